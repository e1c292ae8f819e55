"""The allocator setting every timing and the server run under (rightsize.allocator)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Both children: keep_freed_memory() (or not, by RIGHTSIZE_ALLOCATOR), then glibc's malloc/free by hand.
PREAMBLE = """
import ctypes, os, resource, sys, threading
from rightsize.allocator import keep_freed_memory
kept = keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.malloc.argtypes = [ctypes.c_size_t]
"""

CHILD = (
    PREAMBLE
    + """
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
p = libc.malloc(64 << 20)
ctypes.memset(p, 1, 64 << 20)
libc.free(p)
print(kept, (rss() - before) >> 20)
"""
)


def _child(env: dict[str, str]) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, check=True).stdout
    kept, mib = out.split()
    return kept == "True", int(mib)


def test_freed_blocks_stay_mapped_unless_opted_out() -> None:
    import os

    env = dict(os.environ)
    env.pop("RIGHTSIZE_ALLOCATOR", None)
    kept, mib = _child(env)
    assert kept and mib >= 60  # 64 MiB freed but kept for reuse: no fresh page faults next time
    kept, mib = _child(env | {"RIGHTSIZE_ALLOCATOR": "system"})
    assert not kept and mib < 8  # glibc's default: a 64 MiB block is unmapped on free


THREAD_CHILD = (
    PREAMBLE
    + """
faults = []
def work():  # a worker thread's model call: a 96 MiB activation, allocated, touched and freed, 10 times
    start = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(10):
        p = libc.malloc(96 << 20)
        ctypes.memset(p, 1, 96 << 20)
        libc.free(p)
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - start)
t = threading.Thread(target=work)
t.start()
t.join()
print(kept, faults[0])
"""
)


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_worker_threads_large_blocks_are_reused_not_mapped_per_call() -> None:
    """Thread arenas' heaps are capped at 64 MiB, so without one arena a worker thread's 96 MiB block
    is mapped fresh on every call: a page fault per 4 KiB, ten times over (the server's batch-16
    MobileNetV2 ran 2x slower than the bench for that)."""
    import os

    env = dict(os.environ)
    env.pop("RIGHTSIZE_ALLOCATOR", None)
    pages = (96 << 20) // os.sysconf("SC_PAGE_SIZE")
    out = subprocess.run([sys.executable, "-c", THREAD_CHILD], capture_output=True, text=True, env=env, check=True)
    kept, faults = out.stdout.split()
    assert kept == "True" and int(faults) < 2 * pages  # touched once, then reused
    env["RIGHTSIZE_ALLOCATOR"] = "system"
    out = subprocess.run([sys.executable, "-c", THREAD_CHILD], capture_output=True, text=True, env=env, check=True)
    kept, faults = out.stdout.split()
    assert kept == "False" and int(faults) > 8 * pages  # glibc's default: mapped and faulted in every time
