"""The neural front-end: Mimi + the KAME LM behind the core ``FrontEnd`` protocol, one call per 80 ms frame.

Per frame: Mimi encodes the user's 1920 samples into codes, :class:`KameLMGen` steps once with the
frame's oracle id (chosen by the core runner), and Mimi decodes the generated audio codes. The LM's first
``max_delay`` steps produce nothing (moshi's acoustic delay); those frames are text padding and silence.

One instance owns one streaming session: moshi keeps streaming state inside the modules, so a model
(LM + Mimi) serves one session at a time here. To serve many sessions with one model, in one batched step
per frame, use :class:`kame_core.neural.pool.SessionPool` and its ``SlotFrontEnd``.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
from moshi.models.compression import MimiModel
from moshi.models.lm import LMModel

from ..clock import SAMPLES_PER_FRAME
from ..protocols import FrontEndOutput
from ..record.trace import Provenance
from .generation import KameLMGen
from .tokenizer import LMTokenizer, SentencePieceTokenizer


class NeuralFrontEnd:
    """``FrontEnd`` implementation over a moshi Mimi codec and a (KAME or Moshi) LM.

    ``hold=True`` (the forced-delay gate) returns text padding and silence and also forces the LM's own
    text token to padding, so the model keeps following the user and does not believe it said words
    nobody heard. With an oracle-off model (Moshi baseline) oracle tokens are accepted and ignored.
    """

    def __init__(self, lm: LMModel, mimi: MimiModel, tokenizer: SentencePieceTokenizer, provenance: Provenance,
                 *, use_sampling: bool = True, temp: float = 0.8, temp_text: float = 0.7, top_k: int = 250,
                 top_k_text: int = 25) -> None:
        self.provenance = provenance
        self.tokenizer = tokenizer
        self.lm = lm
        self.mimi = mimi
        self.gen = KameLMGen(lm, use_sampling=use_sampling, temp=temp, temp_text=temp_text, top_k=top_k,
                             top_k_text=top_k_text, on_text_hook=self._on_text)
        self._holding = False
        self._streams = contextlib.ExitStack()
        self._streams.enter_context(mimi.streaming(1))
        self._streams.enter_context(self.gen.streaming(1))

    @property
    def device(self) -> torch.device:
        return self.lm.device

    def reset(self, seed: int) -> None:
        """Clear all streaming state (LM, oracle feed, Mimi) and seed the sampler."""
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
        self._holding = False
        self.mimi.reset_streaming()
        self.gen.reset_streaming()

    def close(self) -> None:
        """Leave streaming mode (frees the KV caches); the front-end is unusable afterwards."""
        self._streams.close()

    def _on_text(self, text_token: torch.Tensor) -> None:
        if self._holding:
            text_token.fill_(self.lm.text_padding_token_id)

    @torch.no_grad()
    def step(self, user_frame: np.ndarray, oracle_token: int | None, hold: bool = False) -> FrontEndOutput:
        if user_frame.shape != (SAMPLES_PER_FRAME,):
            raise ValueError(f"a frame has {SAMPLES_PER_FRAME} samples, got shape {user_frame.shape}")
        pcm = torch.from_numpy(np.asarray(user_frame, np.float32)).to(self.device)[None, None]
        codes = self.mimi.encode(pcm)
        self.gen.oracle_set_next(self.lm.text_padding_token_id if oracle_token is None else oracle_token)
        self._holding = hold
        tokens = self.gen.step(codes)
        if tokens is None:  # acoustic delay: nothing generated yet
            return silent_output()
        audio = self.mimi.decode(tokens[:, 1:])[0, 0].float().cpu().numpy()
        return frame_output(self.tokenizer, int(tokens[0, 0, 0]), audio, hold)


def silent_output() -> FrontEndOutput:
    """A frame of text padding and silence (the LM's acoustic delay, or a held frame)."""
    return FrontEndOutput(text_piece="", audio=np.zeros(SAMPLES_PER_FRAME, np.float32))


def frame_output(tokenizer: LMTokenizer, text_token: int, audio: np.ndarray, hold: bool) -> FrontEndOutput:
    """The ``FrontEndOutput`` of one generated frame: its text token and decoded audio; silence if held."""
    if hold:
        return silent_output()
    if tokenizer.is_padding(text_token):
        return FrontEndOutput(text_piece="", audio=audio)
    return FrontEndOutput(text_piece=tokenizer.piece(text_token), audio=audio, text_token=text_token)
