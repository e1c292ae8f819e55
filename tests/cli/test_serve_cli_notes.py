"""rightsize serve's notes about what it will run (no server is started here)."""

from __future__ import annotations

from rightsize.cli.serve import hybrid_note


def test_a_cpu_layout_on_a_cuda_machine_is_told_a_gpu_pool_joins() -> None:
    note = hybrid_note(None, False, workers=1, threads=1, has_cuda=True)
    assert note is not None and "GPU pool" in note and "--router cpu" in note
    assert hybrid_note(None, False, workers=None, threads=2, has_cuda=True) is not None
    # nothing to say: no CUDA, a router chosen, lanes, or no CPU layout asked for (hybrid is what was wanted)
    assert hybrid_note(None, False, workers=1, threads=1, has_cuda=False) is None
    assert hybrid_note("cpu", False, workers=1, threads=1, has_cuda=True) is None
    assert hybrid_note("hybrid", False, workers=2, threads=None, has_cuda=True) is None
    assert hybrid_note(None, True, workers=None, threads=None, has_cuda=True) is None
    assert hybrid_note(None, False, workers=None, threads=None, has_cuda=True) is None
