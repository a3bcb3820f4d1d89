"""SmolLM2-135M-Instruct run in plain torch from its converted folder: the offline oracle's generation without
transformers.

Why: importing transformers costs ~1.8 CPU-s (it imports torch._dynamo, torch.distributed.tensor and sympy on the
way to any model or tokenizer class): 60 % of a SmolLM2 worker process's start (:mod:`.smollm_process`), paid again
by every replacement the watchdog starts. Generation needs the forward pass of a Llama, greedy decoding, the
tokenizer and the chat template, which torch, the ``tokenizers`` library and Jinja give directly: a worker starts in
~1 CPU-s where it took ~3. transformers only converts the GGUF file, once (:func:`~.smollm_model.load_generator`,
cached). The end-of-turn gate (:class:`kame_core.turns.end_of_turn.SmolLMEndOfTurn`) reads the same model's next-token
probabilities.

The model is the one transformers' ``LlamaForCausalLM`` computes on the same weights (RMS norms, rotary positions,
grouped-query attention, SiLU-gated MLP, tied embeddings); the prompt is its ``apply_chat_template`` (the folder's
Jinja template, tokenized without special tokens) and the text its ``decode(skip_special_tokens=True)`` with the
folder's clean-up of spaces before punctuation. ``tests/test_smollm_torch.py`` holds the two to the same prompt ids,
logits and greedy answers.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

#: the spaces transformers' ``clean_up_tokenization_spaces`` removes from decoded text, in its order
_CLEAN_UPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
              (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


@dataclass(frozen=True)
class LlamaShape:
    """What a Llama folder's ``config.json`` says of its shape."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_theta: float
    eos_id: int

    @classmethod
    def read(cls, folder: Path) -> LlamaShape:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "llama" or config.get("rope_scaling") or not config.get("tie_word_embeddings"):
            raise ValueError(f"{folder}: not a plain Llama with tied embeddings (model_type "
                             f"{config.get('model_type')!r}, rope_scaling {config.get('rope_scaling')!r})")
        generation = folder / "generation_config.json"
        eos = json.loads(generation.read_text(encoding="utf-8")).get("eos_token_id") if generation.is_file() else None
        eos = config.get("eos_token_id") if eos is None else eos
        heads = int(config["num_attention_heads"])
        return cls(hidden=int(config["hidden_size"]), layers=int(config["num_hidden_layers"]), heads=heads,
                   kv_heads=int(config.get("num_key_value_heads", heads)),
                   head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
                   eps=float(config["rms_norm_eps"]), rope_theta=float(config.get("rope_theta", 10000.0)),
                   eos_id=int(eos[0] if isinstance(eos, list) else eos))


class SmolLM2:
    """A converted SmolLM2 folder (``config.json``, ``model.safetensors``, ``tokenizer.json``,
    ``chat_template.jinja``), ready to answer. Thread-safe: generations share the weights, each has its own cache.
    ``dtype``: the weights' and activations' type (norms in float32 either way, logits returned as float32)."""

    def __init__(self, folder: Path, dtype: torch.dtype = torch.float32) -> None:
        import jinja2.sandbox
        import tokenizers
        from safetensors.torch import load_file

        self.folder = folder
        self.shape = LlamaShape.read(folder)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.clean_up_spaces = bool(settings.get("clean_up_tokenization_spaces", False))
        # as transformers renders a chat template: sandboxed, blocks trimmed
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self.template = env.from_string((folder / "chat_template.jinja").read_text(encoding="utf-8"))
        self.dtype = dtype
        self.w = {name: t.to(dtype) for name, t in load_file(str(folder / "model.safetensors")).items()}
        s = self.shape
        self.inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, dtype=torch.int64).float() / s.head_dim))

    # -- text ------------------------------------------------------------------------------------------------
    def chat_text(self, messages: Sequence[dict[str, str]], *, answer: bool = False) -> str:
        """The chat ``messages`` (role / content) as the model reads them; ``answer``: with the assistant's turn
        opened."""
        return self.template.render(messages=list(messages), add_generation_prompt=answer)

    def token_ids(self, text: str, *, special: bool = False) -> list[int]:
        """``text`` as token ids; ``special``: with the tokenizer's own special tokens (its beginning-of-text)."""
        return list(self.tokenizer.encode(text, add_special_tokens=special).ids)

    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The chat ``messages`` and the assistant's turn opened, as token ids (as transformers'
        ``apply_chat_template``: no special tokens added to the template's own)."""
        return self.token_ids(self.chat_text(messages, answer=True))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens left out."""
        text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
        if self.clean_up_spaces:
            for before, after in _CLEAN_UPS:
                text = text.replace(before, after)
        return text

    # -- the model -------------------------------------------------------------------------------------------
    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMS norm computed in float32 whatever the weights' type, as transformers' ``LlamaRMSNorm``."""
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.shape.eps)).to(x.dtype)

    def _rotary(self, start: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(start, start + n, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(self.dtype), angles.sin().to(self.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + turned * sin

    def logits(self, ids: Sequence[int], cache: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """The next token's logits (float32) after ``ids``, which follow the positions ``cache`` holds (one
        (keys, values) per layer, extended here in place -- a list entry replaced, its tensors untouched, so a copy
        of the list continues a cached prefix and leaves it as it was; an empty list to start)."""
        s, w = self.shape, self.w
        start = cache[0][0].shape[2] if cache else 0
        n = len(ids)
        x = F.embedding(torch.tensor([list(ids)]), w["model.embed_tokens.weight"])
        cos, sin = self._rotary(start, n)
        # several tokens after a cached prefix: each sees the prefix and the new tokens up to itself
        mask = (torch.ones(n, start + n, dtype=torch.bool).tril(diagonal=start) if start and n > 1 else None)
        for i in range(s.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"]).view(1, n, s.heads, s.head_dim).transpose(1, 2)
            k = F.linear(h, w[p + "self_attn.k_proj.weight"]).view(1, n, s.kv_heads, s.head_dim).transpose(1, 2)
            v = F.linear(h, w[p + "self_attn.v_proj.weight"]).view(1, n, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            if len(cache) > i:
                k, v = torch.cat((cache[i][0], k), dim=2), torch.cat((cache[i][1], v), dim=2)
                cache[i] = (k, v)
            else:
                cache.append((k, v))
            repeat = s.heads // s.kv_heads
            attended = F.scaled_dot_product_attention(q, k.repeat_interleave(repeat, dim=1),
                                                      v.repeat_interleave(repeat, dim=1), attn_mask=mask,
                                                      is_causal=n > 1 and not start, scale=s.head_dim ** -0.5)
            x = x + F.linear(attended.transpose(1, 2).reshape(1, n, s.heads * s.head_dim),
                             w[p + "self_attn.o_proj.weight"])
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gated = F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(gated, w[p + "mlp.down_proj.weight"])
        last = self._norm(x[:, -1], w["model.norm.weight"])
        return F.linear(last, w["model.embed_tokens.weight"])[0].float()

    def generate(self, ids: Sequence[int], max_new_tokens: int, on_token: Callable[[int], bool]) -> None:
        """Greedy decoding after ``ids``: each new token to ``on_token`` (which returns True to stop), until the
        end-of-sequence token (handed over too) or ``max_new_tokens``."""
        cache: list[tuple[torch.Tensor, torch.Tensor]] = []
        with torch.inference_mode():
            step: Sequence[int] = ids
            for _ in range(max_new_tokens):
                token = int(torch.argmax(self.logits(step, cache)))
                if on_token(token) or token == self.shape.eos_id:
                    return
                step = [token]


def stream_answer(model: SmolLM2, messages: Sequence[dict[str, str]], max_new_tokens: int,
                  emit: Callable[[str], None], stop: threading.Event, looping: Callable[[str], bool]) -> None:
    """Greedy generation, ``emit`` given what the decoded text gained at each token (nothing while it ends mid
    UTF-8); stops when ``stop`` is set or ``looping(text so far)`` says the answer went round in a loop."""
    made: list[int] = []
    said = [""]

    def on_token(token: int) -> bool:
        made.append(token)
        text = model.decode(made)
        if not text.endswith("\ufffd") and len(text) > len(said[0]):
            emit(text[len(said[0]):])
            said[0] = text
        return stop.is_set() or looping(said[0])

    model.generate(model.prompt_ids(messages), max_new_tokens, on_token)

