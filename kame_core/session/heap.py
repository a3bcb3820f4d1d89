"""Giving freed memory back to the system once a server is idle.

An ended session is freed by reference counting, but glibc's allocator keeps the pages it freed in its arenas (a
session's audio, traces and model activations come and go in tens of MB), so a server's resident memory climbs in
steps toward a high-water mark instead of coming back down. ``malloc_trim`` returns those pages. It takes the
arenas' locks while it walks them, so it is called only when no session is running (:func:`trim_free_heap` from
the server when its last session has ended): no live conversation can miss a frame deadline for it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("kame.heap")

__all__ = ["trim_free_heap"]


def trim_free_heap() -> bool:
    """Return the allocator's free pages to the system (glibc ``malloc_trim(0)``); whether anything was given
    back. False (and nothing done) where the C library has no ``malloc_trim`` (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        trim = None
    if trim is None:
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))
