"""The KAME language model: moshi's ``LMModel`` plus a fourth, "oracle", token stream.

KAME (arXiv 2510.02327) feeds the front-end a fourth stream written by a back-end LLM. Architecturally it
is one extra embedding table, ``oracle_emb``, built exactly like ``text_emb`` (``text_card + 1`` entries,
same norm / demux options). At every step the embedding of that step's oracle token is added to the text
embedding, and the sum then joins the audio embeddings, as in the official KAME model.

Everything else is moshi's own code: the oracle is injected through a forward hook on ``text_emb`` that
is active only while an oracle tensor is being fed, so without oracle tokens the model computes exactly
what ``LMModel`` computes (the fixture test relies on this).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from moshi.conditioners import ConditionTensors
from moshi.models.lm import LMModel, LMOutput
from moshi.models.lm_utils import ScaledEmbedding, _init_layer

TEXT_EMB_PREFIX = "text_emb."
ORACLE_EMB_PREFIX = "oracle_emb."


class KameLM(LMModel):
    """Moshi ``LMModel`` with the KAME oracle embedding.

    Args:
        oracle: build and use ``oracle_emb``. ``False`` gives the plain Moshi model (the baseline with the
            oracle stream off): no extra weights, oracle tokens are not accepted.
        **lm_kwargs: keyword arguments of moshi's ``LMModel`` (``device`` and ``dtype`` included).
    """

    def __init__(self, *, oracle: bool = True, **lm_kwargs: Any) -> None:
        super().__init__(**lm_kwargs)
        self.oracle_enabled = oracle
        self.oracle_emb: ScaledEmbedding | None = None
        # Oracle ids for the text embedding currently being computed; set only inside `_feeding_oracle`.
        self._oracle_for_text: torch.Tensor | None = None
        if oracle:
            self.oracle_emb = ScaledEmbedding(
                self.text_card + 1,
                self.dim,
                norm=lm_kwargs.get("norm_emb", False),
                zero_idx=self.zero_token_id,
                demux_second_stream=lm_kwargs.get("demux_second_text_stream", False),
                device=lm_kwargs.get("device"),
                dtype=lm_kwargs.get("dtype"),
            )
            _init_layer(self.oracle_emb)
            self.text_emb.register_forward_hook(self._add_oracle_embedding)

    # -- oracle injection ---------------------------------------------------------------------------
    def _add_oracle_embedding(self, module: torch.nn.Module, args: tuple[Any, ...],
                              text_embedding: torch.Tensor) -> torch.Tensor | None:
        """Forward hook on ``text_emb``: text embedding + oracle embedding, when an oracle is fed."""
        if self._oracle_for_text is None or self.oracle_emb is None:
            return None
        return text_embedding + self.oracle_emb(self._oracle_for_text)

    @contextlib.contextmanager
    def _feeding_oracle(self, oracle_tokens: torch.Tensor) -> Iterator[None]:
        if self.oracle_emb is None:
            raise ValueError("this KameLM was built with oracle=False: it takes no oracle tokens")
        if oracle_tokens.dim() == 3:  # [B, 1, S] -> [B, S]
            oracle_tokens = oracle_tokens[:, 0]
        self._oracle_for_text = oracle_tokens
        try:
            yield
        finally:
            self._oracle_for_text = None

    # -- moshi entry points -------------------------------------------------------------------------
    def forward_text(
        self,
        sequence: torch.Tensor,
        sum_condition: torch.Tensor | None = None,
        cross_attention_src: torch.Tensor | None = None,
        oracle_tokens: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Moshi's ``forward_text``; ``oracle_tokens`` ([B, S] or [B, 1, S]) are the oracle ids of each
        input position (``None``: no oracle contribution at all)."""
        if oracle_tokens is None:
            return super().forward_text(sequence, sum_condition, cross_attention_src)
        with self._feeding_oracle(oracle_tokens):
            return super().forward_text(sequence, sum_condition, cross_attention_src)

    def forward(self, codes: torch.Tensor, condition_tensors: ConditionTensors | None = None,
                oracle_tokens: torch.Tensor | None = None) -> LMOutput:
        """Teacher-forced forward as moshi's, with an optional oracle stream ``oracle_tokens`` [B, 1, T].

        The oracle stream is aligned like the text stream (official KAME convention): the input position
        ``t`` sees ``oracle_tokens[..., t - 1]`` and position 0 sees the start token (``text_card``).
        """
        if oracle_tokens is None:
            return super().forward(codes, condition_tensors)
        B, _, T = codes.shape
        if oracle_tokens.shape != (B, 1, T):
            raise ValueError(f"oracle_tokens must have shape {(B, 1, T)}, got {tuple(oracle_tokens.shape)}")
        start = torch.full((B, 1, 1), self.text_initial_token_id, dtype=oracle_tokens.dtype,
                           device=oracle_tokens.device)
        shifted = torch.cat([start, oracle_tokens[:, :, :-1]], dim=2)
        with self._feeding_oracle(shifted):
            return super().forward(codes, condition_tensors)


def upgrade_legacy_state_dict(state_dict: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
    """Give a checkpoint without ``oracle_emb.*`` a copy of every ``text_emb.*`` tensor as ``oracle_emb.*``.

    The copies have their own storage (training one must not move the other). A checkpoint that already
    has oracle tensors is returned unchanged (the same object); otherwise a new dict is returned and the
    input is left untouched.
    """
    if any(key.startswith(ORACLE_EMB_PREFIX) for key in state_dict):
        return state_dict
    upgraded = dict(state_dict)
    for key, value in state_dict.items():
        if key.startswith(TEXT_EMB_PREFIX):
            upgraded[ORACLE_EMB_PREFIX + key[len(TEXT_EMB_PREFIX):]] = value.detach().clone()
    return upgraded


def without_oracle(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict minus ``oracle_emb.*`` (to load a KAME checkpoint as the oracle-off baseline)."""
    return {k: v for k, v in state_dict.items() if not k.startswith(ORACLE_EMB_PREFIX)}
