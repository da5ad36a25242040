"""The worker's allocator thresholds: a batch's freed buffers are reused, not refetched."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from stapel.settings import ROOT, Settings

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the thresholds are glibc's"
)

BATCHES = textwrap.dedent(
    """
    import ctypes, json, resource, sys, threading
    from workers.allocator import tune

    tuned = tune(sys.argv[1] == "on")
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    SIZE = int(sys.argv[2])

    def batch():
        # a translator's batch: a few buffers of some MiB, written, then all freed
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blocks = [libc.malloc(SIZE) for _ in range(3)]
        for block in blocks:
            ctypes.memset(block, 1, SIZE)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        for block in blocks:
            libc.free(block)
        return faults

    faults = []
    thread = threading.Thread(target=lambda: faults.extend(batch() for _ in range(4)))
    thread.start()
    thread.join()
    print(json.dumps({"tuned": tuned, "faults": faults}))
    """
)
SIZE = 8 << 20
"""Bytes of each of a batch's three buffers."""
PAGES = 3 * SIZE // 4096
"""Pages a batch of the script writes."""


def batches(mode: str) -> dict:
    """Run four batches in a fresh process (thresholds on or off): page faults of each."""
    out = subprocess.run(
        [sys.executable, "-c", BATCHES, mode, str(SIZE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


@pytest.mark.process
def test_with_the_thresholds_a_batch_reuses_the_memory_the_last_one_freed():
    tuned = batches("on")
    assert tuned["tuned"] is True
    first, *later = tuned["faults"]
    assert first >= PAGES * 0.9  # the first batch's pages are new
    assert all(n < PAGES * 0.05 for n in later), tuned  # then the same pages again


@pytest.mark.process
def test_without_them_glibc_gives_each_batch_fresh_pages_to_fault_in():
    # what the thresholds are for: the default trims the freed buffers and maps anew
    default = batches("off")
    assert default["tuned"] is False
    assert all(n >= PAGES * 0.9 for n in default["faults"]), default


def test_the_setting_is_on_unless_switched_off():
    assert Settings.from_env({}).malloc_tuning is True
    assert Settings.from_env({"STAPEL_MALLOC_TUNING": "off"}).malloc_tuning is False
