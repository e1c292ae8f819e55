"""The allocator setting every timing and the server run under (rightsize.allocator)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import ctypes, os, sys
from rightsize.allocator import keep_freed_memory
kept = keep_freed_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.malloc.argtypes = [ctypes.c_size_t]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
p = libc.malloc(64 << 20)
ctypes.memset(p, 1, 64 << 20)
libc.free(p)
print(kept, (rss() - before) >> 20)
"""


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
