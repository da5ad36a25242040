"""glibc's allocator, set so that a translator's buffers are reused, not refetched.

Each batch CTranslate2 runs allocates and frees buffers of a few MiB per translator
thread. With glibc's defaults their memory goes back to the kernel when freed (its
arena trimmed, or the block unmapped) and comes back as fresh pages for the next batch:
the kernel zeroes each page again (`clear_page` was 5% of the CPU in a many-small row;
docs/design/allocator.md). Fixed thresholds keep the freed memory in the process for the next
batch: faster, for about the same peak RSS (a batch's working set is held either way).

Setting any threshold turns off glibc's own adjustment of the others, so all three are
set together (a trim threshold alone mapped every buffer afresh and ran at 40% of the
default's speed). `STAPEL_MALLOC_TUNING=off` keeps glibc's defaults; an allocator that
is not glibc's (musl, or one preloaded) is left alone.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
"""mallopt's parameter numbers (malloc.h)."""

MIB = 1 << 20
THRESHOLDS = ((M_MMAP_THRESHOLD, 32 * MIB), (M_TRIM_THRESHOLD, 128 * MIB), (M_TOP_PAD, 32 * MIB))
"""Blocks up to 32 MiB (glibc's maximum) come from the arenas, not their own mapping; an
arena gives memory back only when 128 MiB at its top are free, and grows 32 MiB at once."""


def tune(enabled: bool) -> bool:
    """Set the thresholds in this process (before the models load); return whether set."""
    if not enabled or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)  # the C library this process runs on, no search for it
    done = all(libc.mallopt(param, value) == 1 for param, value in THRESHOLDS)
    log.info("malloc thresholds %s", "set" if done else "refused by the C library")
    return done
