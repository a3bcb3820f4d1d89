"""How the KV cache is kept (``--kv-dtype``, ``--kv-grow-frames``): settings only, no torch (read by the settings
and the command lines; :mod:`.kv_cache` builds the caches)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_GROW_FRAMES", "KV_DTYPES", "MAX_GROW_FRAMES", "KVCacheSettings"]

#: ``--kv-dtype`` choices: the model's own dtype (empty), bf16, or fp8 (e4m3) storage
KV_DTYPES = ("", "bf16", "fp8")
DEFAULT_GROW_FRAMES = 250  # 20 s of history per chunk
MAX_GROW_FRAMES = 100_000


@dataclass(frozen=True)
class KVCacheSettings:
    """How the main transformer stores its KV cache. ``dtype``: one of :data:`KV_DTYPES`; ``grow_frames``: the
    chunk a session's cache grows by (0: the whole window is reserved when streaming starts, as moshi does)."""

    dtype: str = ""
    grow_frames: int = DEFAULT_GROW_FRAMES

    def __post_init__(self) -> None:
        if self.dtype not in KV_DTYPES:
            raise ValueError(f"KV cache dtype {self.dtype!r}: choose bf16 or fp8 (or leave it empty: the model's)")
        if isinstance(self.grow_frames, bool) or not isinstance(self.grow_frames, int) \
                or not 0 <= self.grow_frames <= MAX_GROW_FRAMES:
            raise ValueError(f"KV cache growth {self.grow_frames!r}: 0 (reserve the whole window) or a whole "
                             f"number of frames up to {MAX_GROW_FRAMES}")

    @property
    def plain(self) -> bool:
        """Whether this is moshi's own cache (model dtype, whole window): nothing to change."""
        return not self.dtype and not self.grow_frames

    def describe(self) -> str:
        """A few words for provenance labels ("" when plain)."""
        parts = ([f"KV cache in {self.dtype}"] if self.dtype else []) + \
            ([f"grown in {self.grow_frames}-frame chunks"] if self.grow_frames else [])
        return ", ".join(parts)
