"""SmolLM2 in plain torch (kame_core/llm/smollm_torch.py) is the model transformers runs: on the same converted folder,
the same prompt ids as ``apply_chat_template``, logits within 1e-4 of ``LlamaForCausalLM``'s, the same greedy answers
as ``generate`` (decoded as ``decode(skip_special_tokens=True)``), and the same end-of-turn probabilities as the gate
computed through transformers; and loading it imports neither transformers nor torch's compiler."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from kame_core.llm.local_smollm import SMALL_MODEL_SYSTEM_PROMPT
from kame_core.llm.smollm_model import converted_folder, load_generator
from kame_core.llm.smollm_torch import stream_answer
from kame_core.paths import default_cache_root
from kame_core.turns.end_of_turn import END_OF_TURN, SmolLMEndOfTurn, ending_token_ids

pytestmark = pytest.mark.slow  # loads SmolLM2 twice (here and through transformers)

REPO = Path(__file__).resolve().parents[1]
CHATS = [
    [{"role": "system", "content": SMALL_MODEL_SYSTEM_PROMPT},
     {"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "How many legs does a spider have? And what's a group of them called?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who painted the Mona Lisa?"},
     {"role": "assistant", "content": "Leonardo da Vinci."}, {"role": "user", "content": "When? Give me the years."}],
]


@pytest.fixture(scope="module")
def reference():
    """transformers' model and tokenizer on the same converted folder (as the gate and generation used them)."""
    transformers = pytest.importorskip("transformers")
    load_generator()  # converts the GGUF file first where no folder is cached
    folder = converted_folder(default_cache_root())
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)


def test_the_prompt_and_the_logits_are_transformers(reference):
    model, tokenizer = reference
    ours = load_generator()
    for chat in CHATS:
        ids = ours.prompt_ids(chat)
        expected = tokenizer.apply_chat_template(chat, add_generation_prompt=True)
        assert ids == list(expected.get("input_ids", expected) if isinstance(expected, dict) else expected)
        with torch.inference_mode():
            want = model(torch.tensor([ids])).logits[0, -1]
            got = ours.logits(ids, [])
            assert torch.allclose(got, want, atol=1e-4), float((got - want).abs().max())
            # a cache extended one token at a time gives the logits of the whole sequence at once
            cache: list = []
            ours.logits(ids[:-3], cache)
            for token in ids[-3:-1]:
                ours.logits([token], cache)
            assert torch.allclose(ours.logits(ids[-1:], cache), got, atol=1e-4)
            # several tokens after a cached prefix (each sees only what precedes it), the prefix's cache kept as it was
            prefix: list = []
            ours.logits(ids[:-5], prefix)
            kept = [k.clone() for k, _ in prefix]
            assert torch.allclose(ours.logits(ids[-5:], list(prefix)), got, atol=1e-4)
            assert all(torch.equal(k, c) for (k, _), c in zip(prefix, kept))


def test_greedy_answers_are_transformers_generate(reference):
    model, tokenizer = reference
    ours = load_generator()
    for chat in CHATS:
        pieces: list[str] = []
        stream_answer(ours, chat, 24, pieces.append, threading.Event(), lambda text: False)
        ids = torch.tensor([ours.prompt_ids(chat)])
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False,
                                 pad_token_id=tokenizer.eos_token_id)
        expected = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        assert "".join(pieces) == expected and len(pieces) > 3, (pieces, expected)


def test_stopping_and_a_loop_end_the_answer_at_once(reference):
    ours = load_generator()
    stop = threading.Event()
    pieces: list[str] = []

    def emit(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            stop.set()

    stream_answer(ours, CHATS[0], 64, emit, stop, lambda text: False)
    assert len(pieces) == 3
    pieces.clear()
    stream_answer(ours, CHATS[0], 64, pieces.append, threading.Event(), lambda text: len(text) > 10)
    assert len("".join(pieces[:-1])) <= 10 < len("".join(pieces))


def test_the_gates_probability_is_the_one_transformers_gave(reference):
    model, tokenizer = reference
    gate = SmolLMEndOfTurn(precision="float32").load()  # bfloat16 is held to float32 in test_end_of_turn
    ends = list(ending_token_ids(tokenizer))
    assert ends == list(gate._end_ids)
    for words in ("what is the capital of", "what is the capital of france", "tell me about", "i think so"):
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": words}], tokenize=False,
                                               add_generation_prompt=False)
        ids = tokenizer(prompt[:prompt.rindex(END_OF_TURN)], return_tensors="pt").input_ids
        with torch.inference_mode():
            want = float(torch.softmax(model(ids).logits[0, -1].float(), dim=-1)[ends].sum())
        assert gate.probability(words) == pytest.approx(want, abs=1e-5), words


def test_loading_it_imports_neither_transformers_nor_torchs_compiler():
    load_generator()  # the folder converted, if it was not
    code = ("import sys; from kame_core.llm.smollm_model import load_generator; m = load_generator(); "
            "m.logits(m.prompt_ids([{'role': 'user', 'content': 'hi'}]), []); "
            "print(sorted(n for n in ('transformers', 'torch._dynamo', 'sympy') if n in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


def test_a_cache_that_cannot_be_written_converts_into_a_folder_of_the_process_own(tmp_path, monkeypatch):
    """The GGUF file converted (transformers' loading of it stood in by the converted folder's, the same weights: a
    real conversion takes 10-20 s) where the cache root is not a folder: the model is saved under the system's
    temporary folder and answers from there."""
    transformers = pytest.importorskip("transformers")
    from kame_core.llm import smollm_model

    load_generator()
    converted = converted_folder(default_cache_root())
    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        real = cls.from_pretrained.__func__

        def from_converted(klass, source, *args, _real=real, **kwargs):
            kwargs.pop("gguf_file", None)
            return _real(klass, converted, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(from_converted))
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache root should be")
    model = smollm_model._load_generator(blocked)
    assert not str(model.folder).startswith(str(blocked)) and model.folder.is_dir()
    pieces: list[str] = []
    stream_answer(model, CHATS[0], 12, pieces.append, threading.Event(), lambda text: False)
    assert "Paris" in "".join(pieces)
