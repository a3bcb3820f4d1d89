"""Streaming generation with the oracle stream: moshi's ``LMGen`` plus one oracle id per step.

:class:`OracleFeed` decides the oracle id of each step and writes it, in place, into a tensor allocated
once per streaming session, so moshi's CUDA graphs (which capture that tensor's address) see every new
value. :class:`KameLMGen` advances the feed once per step and gives the model's main transformer that
tensor; everything else (delays, cache, sampling, depformer) is moshi's ``LMGen`` unchanged.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch
from moshi.models.lm import LMGen, LMModel
from moshi.modules.streaming import State, StreamingModule
from moshi.utils.compile import CUDAGraphed


@dataclass
class _OracleFeedState(State):
    tokens: torch.Tensor  # [B] long: the id fed at the current step, updated in place
    padding_token_id: int = 3
    queue: deque[int] = field(default_factory=deque)
    start_pending: bool = False
    started: bool = False
    next_override: int | None = None
    last_fed: int | None = None

    def reset(self, reset_mask: torch.Tensor) -> None:
        super().reset(reset_mask)
        self.queue.clear()
        self.start_pending = False
        self.started = False
        self.next_override = None
        self.last_fed = None
        self.tokens.fill_(self.padding_token_id)


class OracleFeed(StreamingModule[_OracleFeedState]):
    """The oracle stream of one streaming session: which id is fed at each step.

    Per step: an explicit id set with :meth:`set_next` if any; else the start token at the first step after
    :meth:`reset`; else the next id queued by :meth:`append`; else padding. Calls made before a step take
    effect at that step. Appending before any reset starts an oracle (start token first), as the official
    server does. One schedule is shared by the whole batch. Ids must lie in ``[0, start_token_id]`` (an
    id out of the embedding would crash the step, on CUDA fatally), or be -1, moshi's "zero" token.
    """

    def __init__(self, start_token_id: int, padding_token_id: int, device: torch.device | str) -> None:
        super().__init__()
        self.start_token_id = start_token_id
        self.padding_token_id = padding_token_id
        self._device = torch.device(device)

    def _init_streaming_state(self, batch_size: int) -> _OracleFeedState:
        tokens = torch.full((batch_size,), self.padding_token_id, dtype=torch.long, device=self._device)
        return _OracleFeedState(batch_size, self._device, tokens, padding_token_id=self.padding_token_id)

    @property
    def state(self) -> _OracleFeedState:
        if self._streaming_state is None:
            raise RuntimeError("The oracle feed is used inside `with gen.streaming(batch_size): ...` only.")
        return self._streaming_state

    def reset(self) -> None:
        """A new oracle: the start token at the next step, then what is appended after this call."""
        state = self.state
        state.queue.clear()
        state.start_pending = True
        state.started = True

    def _checked(self, token_id: int) -> int:
        token_id = int(token_id)
        if not -1 <= token_id <= self.start_token_id:
            raise ValueError(f"oracle id {token_id} outside [-1, {self.start_token_id}]")
        return token_id

    def append(self, token_ids: Iterable[int]) -> None:
        """Queue oracle ids, fed one per step after the start token and anything queued before."""
        ids = [self._checked(t) for t in token_ids]
        state = self.state
        if not state.started:
            self.reset()
        state.queue.extend(ids)

    def set_next(self, token_id: int) -> None:
        """Feed exactly ``token_id`` at the next step (the schedule is not consumed for that step)."""
        self.state.next_override = self._checked(token_id)

    def advance(self) -> int:
        """Pick this step's id and write it into :attr:`tokens` in place; returns it."""
        state = self.state
        if state.next_override is not None:
            token, state.next_override = state.next_override, None
        elif state.start_pending:
            token, state.start_pending = self.start_token_id, False
        elif state.queue:
            token = state.queue.popleft()
        else:
            token = self.padding_token_id
        state.tokens.fill_(token)
        state.last_fed = token
        return token

    @property
    def tokens(self) -> torch.Tensor:
        """The preallocated [B] tensor holding the id of the current step."""
        return self.state.tokens


class KameLMGen(LMGen):
    """Moshi ``LMGen`` that feeds the KAME oracle stream, one id per step (see :class:`OracleFeed`).

    Used like ``LMGen``: ``with gen.streaming(1): gen.step(codes)``; plus :meth:`oracle_reset`,
    :meth:`oracle_append` and :meth:`oracle_set_next`. Sampling defaults are the official server's. With a
    model that has no oracle embedding (a plain ``LMModel`` or ``KameLM(oracle=False)``) the schedule is kept
    but nothing is fed, so generation is exactly moshi's.
    """

    def __init__(self, lm_model: LMModel, use_sampling: bool = True, temp: float = 0.8, temp_text: float = 0.7,
                 top_k: int = 250, top_k_text: int = 25, cfg_coef: float = 1.0, check: bool = False,
                 **lm_gen_kwargs: Any) -> None:
        super().__init__(lm_model, use_sampling=use_sampling, temp=temp, temp_text=temp_text, top_k=top_k,
                         top_k_text=top_k_text, cfg_coef=cfg_coef, check=check, **lm_gen_kwargs)
        self.oracle_feed = OracleFeed(lm_model.text_initial_token_id, lm_model.text_padding_token_id,
                                      lm_model.device)

    @property
    def oracle_active(self) -> bool:
        """Whether the model consumes the oracle stream (it has an oracle embedding)."""
        return bool(getattr(self.lm_model, "oracle_enabled", False))

    # -- oracle API ---------------------------------------------------------------------------------
    def oracle_reset(self) -> None:
        self.oracle_feed.reset()

    def oracle_append(self, token_ids: Iterable[int]) -> None:
        self.oracle_feed.append(token_ids)

    def oracle_set_next(self, token_id: int) -> None:
        self.oracle_feed.set_next(token_id)

    @property
    def oracle_last_fed(self) -> int | None:
        """The oracle id of the latest step (``None`` before the first step)."""
        return self.oracle_feed.state.last_fed

    # -- moshi hooks --------------------------------------------------------------------------------
    def _init_streaming_state(self, batch_size: int):  # type: ignore[override]
        state = super()._init_streaming_state(batch_size)
        if self.oracle_active:
            state.graphed_main = CUDAGraphed(self._forward_text_with_oracle,
                                             disable=self.lm_model.device.type != "cuda")
        return state

    def _forward_text_with_oracle(self, input_: torch.Tensor, sum_condition: torch.Tensor | None,
                                  cross_attention_src: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.oracle_feed.tokens  # read inside the graph: its address never changes
        oracle = tokens.repeat(input_.shape[0] // tokens.shape[0])[:, None]  # CFG doubles the batch
        return self.lm_model.forward_text(input_, sum_condition, cross_attention_src, oracle)

    @torch.no_grad()
    def _step(self, input_tokens: torch.Tensor, depformer_replace_tokens: torch.Tensor | None = None):
        self.oracle_feed.advance()
        return super()._step(input_tokens, depformer_replace_tokens)
