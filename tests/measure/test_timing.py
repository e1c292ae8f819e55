import itertools
import math

from rightsize.measure.timing import TimingPolicy, median_ci_halfwidth, percentile, summarize, time_adaptive


def test_percentile_and_summary() -> None:
    s = [float(i) for i in range(1, 101)]
    assert percentile(s, 50) == 50.5
    assert percentile(s, 95) == 95.05
    st = summarize(s)
    assert (st.p50, st.n) == (50.5, 100)
    assert st.mean == 50.5


def test_ci_shrinks_with_samples() -> None:
    assert math.isinf(median_ci_halfwidth([1.0, 2.0]))
    noisy = [10.0 + (i % 5) for i in range(10)]
    assert median_ci_halfwidth(noisy * 10) < median_ci_halfwidth(noisy)
    assert median_ci_halfwidth([5.0] * 20) == 0.0


def test_adaptive_stops_when_tight_and_caps_when_noisy() -> None:
    steady = itertools.cycle([1.0])
    stats, ok = time_adaptive(
        lambda: None, TimingPolicy(warmup=0, min_repeats=5, max_repeats=50), timer=lambda f: next(steady)
    )
    assert ok and stats.n == 5

    noisy = itertools.cycle([1.0, 10.0, 100.0])
    stats, ok = time_adaptive(
        lambda: None, TimingPolicy(warmup=0, min_repeats=5, max_repeats=30), timer=lambda f: next(noisy)
    )
    assert not ok and stats.n == 30


def test_the_time_cap_bounds_the_warm_up_too() -> None:
    """warmup: 1000 on a slow model ran for minutes past ``max_time_s`` before the first timed call."""
    import time

    calls = []

    def slow() -> None:
        calls.append(1)
        time.sleep(0.02)

    stats, ok = time_adaptive(
        slow, TimingPolicy(warmup=1000, min_repeats=3, max_repeats=3, max_time_s=0.1), timer=lambda f: (f(), 1.0)[1]
    )
    assert stats.n == 3 and ok
    assert 2 <= len(calls) - 3 <= 10  # the warm-up stopped near 0.1 s, not after 1000 calls (20 s)
