"""Streaming generation with the oracle stream: moshi's ``LMGen`` plus one oracle id per step and per slot.

Which id each session is fed at each frame is the core's to decide (:class:`kame_core.oracle.manager.OracleStream`:
the start token after a reset, then the revision's tokens, then padding); the session's front-end hands it in with
every step (:meth:`KameLMGen.oracle_set_next`). :class:`OracleFeed` only writes those ids, in place, into one
``[B]`` tensor allocated once per streaming session, so moshi's CUDA graphs (which capture that tensor's address)
see every new value. :class:`KameLMGen` advances the feed once per step and gives the model's main transformer
that tensor; everything else (delays, cache, sampling, depformer) is moshi's ``LMGen`` unchanged. Slots can be
reset on their own (:meth:`KameLMGen.reset_slots`) while the others go on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from moshi.models.lm import LMGen, LMModel
from moshi.modules.streaming import State, StreamingModule
from moshi.utils.compile import CUDAGraphed

from .kv_cache import KVCacheSettings, KVGrowth, lean_kv
from .slots import as_reset_mask, keep_batch_counters


@dataclass
class _OracleFeedState(State):
    tokens: torch.Tensor  # [B] long: the ids fed at the current step, updated in place
    padding_token_id: int = 3
    next_ids: list[int | None] = field(default_factory=list)  # the id each slot is fed at its next executed step
    last_fed: list[int | None] = field(default_factory=list)  # the id each slot was fed at its latest step
    current: list[int] = field(default_factory=list)  # host copy of `tokens`
    executing: list[bool] = field(default_factory=list)  # host copy of the exec mask (see KameLMGen)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.next_ids = [None] * self.batch_size
        self.last_fed = [None] * self.batch_size
        self.current = [self.padding_token_id] * self.batch_size
        self.executing = [True] * self.batch_size

    def reset(self, reset_mask: torch.Tensor) -> None:
        super().reset(reset_mask)
        for slot, reset in enumerate(reset_mask.tolist()):
            if reset:
                self.next_ids[slot] = self.last_fed[slot] = None
                self.current[slot] = self.padding_token_id
                self.executing[slot] = True
        self.tokens.copy_(torch.where(reset_mask, torch.full_like(self.tokens, self.padding_token_id),
                                      self.tokens))


class OracleFeed(StreamingModule[_OracleFeedState]):
    """The oracle ids of one streaming session's slots: per slot, the id set with :meth:`set_next` for its next
    executed step, else padding. A slot that does not execute at a step (moshi's exec mask) keeps its id for its
    next executed step. Every call takes ``slot``: a batch index, or ``None`` for every slot. Ids must lie in
    ``[0, start_token_id]`` (an id out of the embedding would crash the step, on CUDA fatally), or be -1,
    moshi's "zero" token.
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

    def _slots(self, slot: int | None) -> range:
        state = self.state
        if slot is None:
            return range(state.batch_size)
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < state.batch_size:
            raise ValueError(f"slot must be an int in [0, {state.batch_size}) or None (every slot), got {slot!r}")
        return range(slot, slot + 1)

    def checked(self, token_id: int) -> int:
        """``token_id`` as an int if the oracle stream accepts it; else ValueError."""
        token_id = int(token_id)
        if not -1 <= token_id <= self.start_token_id:
            raise ValueError(f"oracle id {token_id} outside [-1, {self.start_token_id}]")
        return token_id

    def set_next(self, token_id: int, slot: int | None = None) -> None:
        """Feed ``token_id`` at the slot's next executed step (then padding, unless set again)."""
        token_id = self.checked(token_id)
        for index in self._slots(slot):
            self.state.next_ids[index] = token_id

    def advance(self) -> list[int]:
        """Take this step's id of every executing slot and write them into :attr:`tokens` in place.

        Returns the ids of all slots (a slot that does not execute keeps its previous id)."""
        state = self.state
        for slot in range(state.batch_size):
            if state.executing[slot]:
                token = state.next_ids[slot]
                state.current[slot] = self.padding_token_id if token is None else token
                state.next_ids[slot] = None
                state.last_fed[slot] = state.current[slot]
        first = state.current[0]
        if all(token == first for token in state.current):
            state.tokens.fill_(first)  # no host-to-device copy in the common case
        else:
            state.tokens.copy_(torch.tensor(state.current, dtype=torch.long))
        return list(state.current)

    def last_fed(self, slot: int) -> int | None:
        """The id fed to ``slot`` at its latest executed step (``None`` before its first)."""
        return self.state.last_fed[self._slots(slot)[0]]

    @property
    def tokens(self) -> torch.Tensor:
        """The preallocated [B] tensor holding the ids of the current step."""
        return self.state.tokens


class KameLMGen(LMGen):
    """Moshi ``LMGen`` that feeds the KAME oracle stream, one id per step (see :class:`OracleFeed`).

    Used like ``LMGen``: ``with gen.streaming(batch_size): gen.step(codes)``; plus :meth:`oracle_set_next`, for one
    slot (batch entry) or all of them, before each step, and :meth:`reset_slots` to start a new session in some
    slots while the others go on. Sampling defaults are the official server's. With a model that has no oracle
    embedding (a plain ``LMModel`` or ``KameLM(oracle=False)``) the ids are taken but nothing is fed, so generation
    is exactly moshi's.

    ``kv``: how the main transformer keeps its KV cache (:mod:`.kv_cache`: bf16 / fp8 storage, grown with the
    longest session); ``None`` is moshi's own cache, the whole window reserved at the start.
    """

    def __init__(self, lm_model: LMModel, use_sampling: bool = True, temp: float = 0.8, temp_text: float = 0.7,
                 top_k: int = 250, top_k_text: int = 25, cfg_coef: float = 1.0, check: bool = False,
                 kv: KVCacheSettings | None = None, **lm_gen_kwargs: Any) -> None:
        super().__init__(lm_model, use_sampling=use_sampling, temp=temp, temp_text=temp_text, top_k=top_k,
                         top_k_text=top_k_text, cfg_coef=cfg_coef, check=check, **lm_gen_kwargs)
        self.oracle_feed = OracleFeed(lm_model.text_initial_token_id, lm_model.text_padding_token_id,
                                      lm_model.device)
        self.kv = kv or KVCacheSettings(grow_frames=0)
        self.kv_growth = KVGrowth(lm_model, self.kv.grow_frames)

    @property
    def oracle_active(self) -> bool:
        """Whether the model consumes the oracle stream (it has an oracle embedding)."""
        return bool(getattr(self.lm_model, "oracle_enabled", False))

    # -- oracle API (``slot``: a batch index, or None for every slot) ------------------------------
    def oracle_set_next(self, token_id: int, slot: int | None = None) -> None:
        """Feed ``token_id`` to ``slot`` at its next executed step (padding after, unless set again)."""
        self.oracle_feed.set_next(token_id, slot)

    @property
    def oracle_last_fed(self) -> int | None:
        """The oracle id of the latest step (``None`` before the first step). With several slots, the id
        they all had; slots that differ raise: ask :meth:`oracle_last_fed_at` then."""
        state = self.oracle_feed.state
        fed = set(state.last_fed)
        if len(fed) != 1:
            raise ValueError(f"the {state.batch_size} slots were fed different oracle ids: "
                             "use oracle_last_fed_at(slot)")
        return fed.pop()

    def oracle_last_fed_at(self, slot: int) -> int | None:
        """The oracle id fed to ``slot`` at its latest executed step (``None`` before its first)."""
        return self.oracle_feed.last_fed(slot)

    # -- slots ----------------------------------------------------------------------------------------
    def reset_slots(self, slots: torch.Tensor | list[int] | int) -> None:
        """Reset some batch entries (a ``[B]`` bool mask or indices) as new sessions: LM caches, delays
        and oracle schedule; the other entries go on undisturbed. Resetting all of them is
        :meth:`reset_streaming`."""
        self.reset_streaming(as_reset_mask(self, slots))

    def reset_streaming(self, reset_mask: torch.Tensor | None = None) -> None:
        """moshi's reset; with a partial mask the batch-wide step counters are kept (see
        :mod:`kame_core.neural.slots`), so the other entries keep producing output."""
        if reset_mask is None or bool(reset_mask.all()):
            super().reset_streaming(reset_mask)
        else:
            with keep_batch_counters(self, self.lm_model):
                super().reset_streaming(reset_mask)
        if self.kv_growth.after_reset():
            self._caches_moved()

    def set_exec_mask(self, exec_mask: torch.Tensor) -> None:
        """moshi's exec mask (``[B]`` bool: which entries execute the next steps); a slot that does not
        execute keeps its oracle schedule too."""
        super().set_exec_mask(exec_mask)
        self.oracle_feed.state.executing[:] = [bool(x) for x in exec_mask.tolist()]

    # -- moshi hooks --------------------------------------------------------------------------------
    def _init_streaming_state(self, batch_size: int):  # type: ignore[override]
        with lean_kv(self.lm_model, self.kv):  # the LM's caches are made as this generator keeps them
            state = super()._init_streaming_state(batch_size)
        if self.oracle_active:
            state.graphed_main = CUDAGraphed(self._forward_text_with_oracle,
                                             disable=self.lm_model.device.type != "cuda")
        return state

    def _forward_text_with_oracle(self, input_: torch.Tensor, sum_condition: torch.Tensor | None,
                                  cross_attention_src: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.oracle_feed.tokens  # read inside the graph: its address never changes
        oracle = tokens.repeat(input_.shape[0] // tokens.shape[0])[:, None]  # CFG doubles the batch
        return self.lm_model.forward_text(input_, sum_condition, cross_attention_src, oracle)  # type: ignore[call-arg]

    def _caches_moved(self) -> None:
        """The KV caches were reallocated: the main transformer's CUDA graph is captured again at its next call."""
        state = self._streaming_state
        if state is not None:
            state.graphed_main.reset()

    @torch.no_grad()
    def _step(self, input_tokens: torch.Tensor, depformer_replace_tokens: torch.Tensor | None = None):
        if self.kv_growth.before_step(self.oracle_feed.state.executing):
            self._caches_moved()
        self.oracle_feed.advance()
        return super()._step(input_tokens, depformer_replace_tokens)
