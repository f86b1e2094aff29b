"""Process-wide memory-allocator settings for CPU inference.

PyTorch's CPU tensors come straight from malloc. With glibc's defaults, blocks of a few MB
(decoder logits, the key/value cache, activations of a large batch) are mapped fresh from the
kernel and handed back on free, or the heap top is trimmed, so every decoding step page-faults
its working memory in again: hundreds of thousands of page faults per thousand sentences.
`keep_freed_memory()` makes glibc serve such blocks from its heap and keep freed memory for
reuse; see docs/BENCHMARKS.md for the measured effect. Resident memory then stays at its peak
instead of shrinking between batches.

A process-wide setting, so the owner of the process calls it: the service does at start-up
(`MT_TUNE_MALLOC`, on by default), and the benchmarks do for every system they compare. A no-op
where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's own ceiling for its adaptive threshold (64-bit)
TRIM_THRESHOLD = 512 * 1024 * 1024


def keep_freed_memory(
    mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Blocks below `mmap_threshold` bytes come from the heap, and the heap keeps up to
    `trim_threshold` bytes of freed memory. Returns False where this C library has no mallopt
    or refused the values."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.debug("no mallopt in this C library: allocator left as it is")
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
    return bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold)) and ok


def release_freed_memory() -> bool:
    """Hand the C heap's free pages back to the kernel (glibc's malloc_trim), so that resident
    memory shrinks after large objects (an unloaded model) are freed even while
    `keep_freed_memory` holds freed memory for reuse. Returns False where there is no
    malloc_trim or nothing was released."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        malloc_trim = libc.malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(malloc_trim(0))
