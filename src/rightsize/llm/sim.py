"""Continuous-batching simulator of one LLM replica: TTFT, TPOT and end-to-end percentiles under a load.

    res = simulate_llm(costs, LLMSimConfig(max_seqs=64, kv_tokens=60_000), rate_per_s=5, n_requests=10_000,
                       prompt_tokens=(128, 1024), output_tokens=(64, 256))
    res.ttft_ms["p95"], res.tpot_ms["p50"], res.throughput_tokens_s, res.preemptions

The policy of rightsize.llm.engine (vLLM v0's), iteration by iteration; fidelity is measured against it.
KV memory is paged in blocks of BLOCK_TOKENS. A running sequence has c tokens cached: its prefilled prompt
plus one per decode step (the token just emitted is cached by the next step). At time ``now``:

1. Arrivals up to ``now`` join the tail of the waiting queue (with ``max_queue`` already waiting: rejected).
2. Admission, FCFS: admit the head while running < max_seqs and free blocks >= ceil((prompt + 1) / 16);
   stop at the first that does not fit (no skipping).
3. If any were admitted: a PREFILL iteration, the admitted one after another; each emits its next token
   right after its own prefill (its first token: TTFT). Time Σ prefill_ms(prompt). No decode.
4. Else, if any run: one DECODE step, time decode_ms(running, Σ (c + 1)); each emits one token at its end.
   Before it, oldest admitted first, a sequence whose blocks hold fewer than c + 1 tokens takes a free
   block; while none is free the most recently admitted running sequence (maybe itself) is preempted: its
   blocks freed, back to the HEAD of the queue. Re-admitted, its prompt is the original prompt plus the
   tokens generated so far, prefilled again, and that prefill emits its next token.
5. A request finishes after exactly its output tokens; its blocks are freed.
   TPOT = (last token − first token) / (tokens − 1).
6. Nothing running and nothing waiting: jump to the next arrival.

A request whose prompt + output could never fit in ``kv_tokens`` is rejected on arrival (``too_long``; the
engine refuses such a configuration). Speed: per-sequence state is (step of admission, prompt prefilled),
so a decode step costs O(1) plus O(1) per sequence that finishes or needs a block; block needs fall in 16
buckets by step mod 16, finishes are indexed by step, and runs of >= FAST_MIN_STEPS quiet steps (no
finish, no arrival, blocks for every need) advance in one numpy pass with the same arithmetic.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rightsize.errors import SpecError
from rightsize.llm.costs import StepCosts
from rightsize.plan.arrivals import arrival_times_ms

__all__ = ["BLOCK_TOKENS", "WARMUP_SHARE", "LLMSimConfig", "LLMSimResult", "draw_lengths", "simulate_llm"]

BLOCK_TOKENS = 16  # as rightsize.llm.engine (vLLM's default block size)
FAST_MIN_STEPS = 32  # quiet decode steps worth one vectorised advance (a numpy pass costs ~20 µs)
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
WARMUP_SHARE = 0.1  # the first arrivals, served but not counted (a simulation starts from an idle replica)
Lengths = int | tuple[int, int] | Sequence[int] | np.ndarray  # fixed | uniform [lo, hi] | one per request


@dataclass(frozen=True)
class LLMSimConfig:
    """The replica's scheduler limits (same names as rightsize.llm.engine.EngineConfig)."""

    max_seqs: int = 256  # running sequences at most
    kv_tokens: int = 65_536  # KV-cache capacity in tokens (DecoderShape.max_concurrent_tokens)
    max_queue: int | None = None  # waiting requests at most; an arrival beyond it is rejected


@dataclass(frozen=True)
class LLMSimResult:
    """Percentile dicts (``p50``, ``p90``, ``p95``, ``p99``, ``mean``; ms) over the recorded requests; rates
    and averages over the window from ``record_from_ms`` to the last arrival (to the last finish when every
    request arrives at once). Per-request arrays cover every request (NaN where it does not apply)."""

    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]  # over requests with >= 2 output tokens
    e2e_ms: dict[str, float]
    throughput_tokens_s: float  # output tokens emitted per second in the window
    throughput_rps: float  # requests finished per second in the window
    mean_running: float  # time-average of running sequences in the window (idle time counts as 0)
    busy_fraction: float  # share of the window spent in iterations
    device_share: float  # share of the iterations' time the device works (the rest it waits on an eager host)
    compute_share: float  # share of the device's work its math units do (StepCosts.prefill_split / decode_split)
    preemptions: int
    rejected: int  # beyond max_queue
    too_long: int  # could never fit in kv_tokens
    n_recorded: int
    iterations: int
    arrival_ms: np.ndarray  # (n,)
    prompt_tokens: np.ndarray  # (n,) int
    output_tokens: np.ndarray  # (n,) int
    first_token_ms: np.ndarray  # (n,) absolute time of the first token; NaN if rejected
    finish_ms: np.ndarray  # (n,) absolute time of the last token; NaN if rejected
    preempted: np.ndarray  # (n,) int: times each request was preempted
    recorded: np.ndarray  # (n,) bool: served and arrived at or after record_from_ms

    @property
    def ttft(self) -> np.ndarray:
        return self.first_token_ms - self.arrival_ms

    @property
    def e2e(self) -> np.ndarray:
        return self.finish_ms - self.arrival_ms

    @property
    def tpot(self) -> np.ndarray:
        return _tpot(self.first_token_ms, self.finish_ms, self.output_tokens)


def draw_lengths(spec: Lengths, n: int, rng: np.random.Generator, what: str = "lengths") -> np.ndarray:
    """``(n,)`` token counts >= 1: a fixed int, uniform integers in [lo, hi] (a 2-tuple), or n given values."""
    if isinstance(spec, int | np.integer):
        out = np.full(n, int(spec), dtype=np.int64)
    elif isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = int(spec[0]), int(spec[1])
        if hi < lo:
            raise SpecError(what, f"uniform range ({lo}, {hi}) has hi < lo")
        out = rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    else:
        out = np.asarray(spec, dtype=np.int64).reshape(-1)
        if out.size != n:
            raise SpecError(what, f"has {out.size} values for {n} requests. To fix: give one per request.")
    if n and out.min() < 1:
        raise SpecError(what, "token counts must be >= 1")
    return out


def simulate_llm(
    costs: StepCosts,
    config: LLMSimConfig,
    arrivals_ms: Sequence[float] | np.ndarray | None = None,
    rate_per_s: float | None = None,
    n_requests: int | None = None,
    prompt_tokens: Lengths = 512,
    output_tokens: Lengths = 128,
    seed: int = 0,
    service_noise: float = 0.0,
    record_from_ms: float | None = None,
    warmup: float = WARMUP_SHARE,
) -> LLMSimResult:
    """Simulate one replica under the policy of the module docstring.

    Arrivals: ``arrivals_ms`` (sorted), or ``n_requests`` Poisson arrivals at ``rate_per_s``. Lengths: see
    ``draw_lengths``; draws come from one generator seeded ``seed`` in the order arrivals, prompts, outputs,
    noise. ``service_noise``: lognormal sigma multiplying each iteration's time (median kept). Requests
    arriving before ``record_from_ms`` (default: the first ``warmup`` share) are served but not counted.
    """
    rng = np.random.default_rng(seed)
    if arrivals_ms is None:
        if rate_per_s is None or n_requests is None or rate_per_s <= 0:
            raise SpecError("arrivals", "give arrivals_ms, or rate_per_s > 0 and n_requests")
        arr = arrival_times_ms(rng, n_requests, rate_per_s)[0]
    else:
        arr = np.asarray(arrivals_ms, dtype=np.float64).reshape(-1)
        if arr.size and np.any(np.diff(arr) < 0):
            raise SpecError("arrivals_ms", "must be sorted")
    n = int(arr.size)
    prompts = draw_lengths(prompt_tokens, n, rng, "prompt_tokens")
    outputs = draw_lengths(output_tokens, n, rng, "output_tokens")
    if config.max_seqs < 1 or config.kv_tokens < BLOCK_TOKENS:
        raise SpecError("config", f"needs max_seqs >= 1 and kv_tokens >= {BLOCK_TOKENS}")
    start = float(record_from_ms) if record_from_ms is not None else (float(arr[int(n * warmup)]) if n else 0.0)
    end = float(arr[-1]) if n and arr[-1] > start else math.inf  # window: start -> last arrival
    state = _run(arr, prompts, outputs, costs, config, rng, service_noise, start, end)
    return _result(arr, prompts, outputs, start, end, state)


@dataclass
class _State:
    first: list[float]
    finish: list[float]
    preempted: list[int]
    rejected: int = 0
    too_long: int = 0
    preemptions: int = 0
    iterations: int = 0
    busy_ms: float = 0.0  # iteration time inside the window
    device_ms: float = 0.0  # of which the device works (the rest it waits on an eager host)
    compute_ms: float = 0.0  # of which the math units work (StepCosts.prefill_split / decode_split)
    running_ms: float = 0.0  # ∫ running count dt inside the window
    tokens: int = 0  # output tokens of iterations ending inside the window
    finished: int = 0  # requests finished inside the window
    end_ms: float = 0.0


def _run(
    arr: np.ndarray,
    prompts: np.ndarray,
    outputs: np.ndarray,
    costs: StepCosts,
    config: LLMSimConfig,
    rng: np.random.Generator,
    sigma: float,
    window_from: float,
    window_to: float,
) -> _State:
    n = int(arr.size)
    arrival, prompt, out = arr.tolist(), prompts.tolist(), outputs.tolist()
    st = _State(first=[math.nan] * n, finish=[math.nan] * n, preempted=[0] * n)
    blocks_total, max_seqs = config.kv_tokens // BLOCK_TOKENS, config.max_seqs
    max_queue = config.max_queue if config.max_queue is not None else n + 1
    prefill_split, decode_split = costs.prefill_split, costs.decode_split
    noise: list[float] = []  # lognormal multipliers drawn ahead; noise[pos] is the next iteration's
    pos = 0
    # A running sequence i was (re)admitted before decode step adm[i] with pre[i] tokens prefilled and gen[i]
    # tokens generated then (the prefill's included): at step s its cache holds c = pre + s − adm tokens.
    # It needs a block before step s > adm[i] when c % 16 == 0: bucket[s % 16]. fresh: admitted since the
    # last decode step (their first step never needs one; bucketed after it). ends[s]: those whose last
    # token comes from step s (stale entries of preempted sequences are skipped); end_steps: heap of keys.
    pre, adm, gen = [0] * n, [0] * n, [0] * n
    bucket: list[set[int]] = [set() for _ in range(BLOCK_TOKENS)]
    fresh: list[int] = []
    ends: dict[int, list[int]] = {}
    end_steps: list[int] = []
    running: dict[int, None] = {}  # insertion order = admission order
    waiting: deque[int] = deque()
    free, step, ctx, nxt = blocks_total, 0, 0, 0  # ctx = Σ (c + 1) over running
    now = float(arr[0]) if n else 0.0

    def blocks(tokens: int) -> int:
        return -(-tokens // BLOCK_TOKENS)

    def draw(k: int) -> list[float]:
        """The next ``k`` noise multipliers, not consumed (the same stream whatever the chunks)."""
        nonlocal noise, pos
        if len(noise) - pos < k:
            noise = noise[pos:] + np.exp(sigma * rng.standard_normal(max(4096, k))).tolist()
            pos = 0
        return noise[pos : pos + k]

    def tick(ms: float, tokens: int, finished: int, device: float = 1.0, compute: float = 0.0) -> float:
        """The end of an iteration of ``ms`` starting now (``device`` and ``compute``: the shares of it the device
        works and its math units work); its share of the window is accounted."""
        t1 = now + ms
        inside = min(t1, window_to) - max(now, window_from)
        if inside > 0:
            st.busy_ms += inside
            st.device_ms += inside * device
            st.compute_ms += inside * compute
            st.running_ms += inside * len(running)
        if window_from < t1 <= window_to:
            st.tokens += tokens
            st.finished += finished
        st.iterations += 1
        return t1

    def retire(i: int) -> None:
        """Out of the batch (finished or preempted): its blocks, ceil(max(c, pre + 1) / 16), are freed."""
        nonlocal free, ctx
        c = pre[i] + step - adm[i]
        del running[i]
        bucket[(adm[i] - pre[i]) % BLOCK_TOKENS].discard(i)
        free += blocks(max(c, pre[i] + 1))
        ctx -= c + 1

    while nxt < n or waiting or running:
        # 1. Arrivals up to now; 6. idle: jump to the next arrival.
        if not waiting and not running and arrival[nxt] > now:
            now = arrival[nxt]
        while nxt < n and arrival[nxt] <= now:
            i, nxt = nxt, nxt + 1
            if blocks(prompt[i] + out[i]) > blocks_total:
                st.too_long += 1
            elif len(waiting) >= max_queue:
                st.rejected += 1
            else:
                waiting.append(i)
        # 2. Admission, FCFS without skipping; a re-admitted request prefills prompt + tokens generated.
        admitted: list[int] = []
        while waiting and len(running) < max_seqs and blocks(prompt[waiting[0]] + gen[waiting[0]] + 1) <= free:
            i = waiting.popleft()
            free -= blocks(prompt[i] + gen[i] + 1)
            running[i] = None
            admitted.append(i)
        if admitted:
            # 3. Prefill iteration: each admitted emits its next token right after its own prefill.
            scale = 1.0
            if sigma > 0:
                scale = draw(1)[0]
                pos += 1
            t, emitted, done, dev_ms, comp_ms = now, [], 0, 0.0, 0.0
            for i in admitted:
                ms, dev, comp = prefill_split(prompt[i] + gen[i])
                t += ms * scale
                dev_ms, comp_ms = dev_ms + dev * scale, comp_ms + comp * scale
                emitted.append(t)
                done += gen[i] + 1 == out[i]
            span = max(t - now, 1e-12)
            end = tick(t - now, len(admitted), done, dev_ms / span, comp_ms / span)
            for i, t in zip(admitted, emitted, strict=True):
                pre[i], adm[i] = prompt[i] + gen[i], step
                if gen[i] == 0:
                    st.first[i] = t
                gen[i] += 1
                ctx += pre[i] + 1
                if gen[i] == out[i]:
                    st.finish[i] = t
                    retire(i)
                    continue
                fresh.append(i)
                last = step + out[i] - gen[i] - 1  # the decode step whose token is its last
                ends.setdefault(last, []).append(i)
                heapq.heappush(end_steps, last)
            now = end
            continue
        if not running:
            continue
        # 4. Decode. Fast path: the next m >= FAST_MIN_STEPS steps are quiet (none finishes, none starts
        # after an arrival, free blocks cover every need): advance them at once, the same arithmetic.
        batch = len(running)
        while end_steps[0] not in ends:  # keys already handled
            heapq.heappop(end_steps)
        quiet = end_steps[0] - step if not fresh else 0
        if quiet >= FAST_MIN_STEPS:
            sizes = [len(bucket[(step + j) % BLOCK_TOKENS]) for j in range(BLOCK_TOKENS)]
            full, rem = divmod(free, batch)  # 16 consecutive steps need one block per sequence
            fits = BLOCK_TOKENS * full
            for size in sizes:
                if size > rem:
                    break
                rem, fits = rem - size, fits + 1
            quiet = min(quiet, fits, 1 << 16)
        if quiet >= FAST_MIN_STEPS:
            c = ctx + batch * np.arange(quiet)  # (quiet,) Σ (c + 1) before each step
            t_ms, device, compute = decode_split(batch, c)
            guard = np.maximum(t_ms, 1e-12)
            dev_share, comp_share = device / guard, compute / guard
            if sigma > 0:
                t_ms *= np.array(draw(quiet))
            e = now + np.cumsum(t_ms)  # (quiet,) end of each step
            k = quiet if nxt >= n else 1 + int(np.searchsorted(e[: quiet - 1], arrival[nxt]))  # start < arrival
            e, s = e[:k], np.concatenate(([now], e[: k - 1]))
            each = np.clip(np.minimum(e, window_to) - np.maximum(s, window_from), 0.0, None)  # (k,) in the window
            inside = float(each.sum())
            st.busy_ms += inside
            st.device_ms += float(each @ dev_share[:k])
            st.compute_ms += float(each @ comp_share[:k])
            st.running_ms += inside * batch
            st.tokens += batch * int(np.count_nonzero((e > window_from) & (e <= window_to)))
            st.iterations += k
            pos += k if sigma > 0 else 0
            free -= (k // BLOCK_TOKENS) * batch + sum(sizes[: k % BLOCK_TOKENS])
            now, step, ctx = float(e[-1]), step + k, ctx + batch * k
            continue
        # Single step: a block for each sequence at a 16-token boundary, preempting the newest if none.
        needy = bucket[step % BLOCK_TOKENS]
        if len(needy) <= free:
            free -= len(needy)
        else:
            for i in [j for j in running if j in needy]:  # oldest admitted first
                while free == 0 and i in running:
                    victim = next(reversed(running))
                    gen[victim] += step - adm[victim]  # tokens generated so far: recomputed on re-admission
                    retire(victim)
                    waiting.appendleft(victim)
                    st.preempted[victim] += 1
                    st.preemptions += 1
                if i in running:
                    free -= 1
        batch = len(running)  # >= 1: a lone sequence always finds a free block (too_long filter)
        ms, dev, comp = decode_split(batch, ctx)
        dev, comp = (dev / ms, comp / ms) if ms > 0 else (1.0, 0.0)
        if sigma > 0:
            ms *= draw(1)[0]
            pos += 1
        # Valid entries only, once each (a re-admitted sequence can be listed twice under one step).
        done_now = dict.fromkeys(i for i in ends.pop(step, ()) if i in running and adm[i] + out[i] - gen[i] - 1 == step)
        now = tick(ms, batch, len(done_now), dev, comp)
        step += 1
        ctx += batch
        for i in fresh:
            if i in running:
                bucket[(adm[i] - pre[i]) % BLOCK_TOKENS].add(i)
        fresh.clear()
        for i in done_now:
            st.finish[i] = now
            retire(i)
    st.end_ms = now
    return st


def _tpot(first: np.ndarray, finish: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """(last − first token) / (tokens − 1) per request; NaN for single-token outputs."""
    return np.where(outputs > 1, (finish - first) / np.maximum(outputs - 1, 1), np.nan)


def _summary(values: np.ndarray) -> dict[str, float]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return {f"p{q:g}": math.nan for q in PERCENTILES} | {"mean": math.nan}
    pct = np.percentile(v, PERCENTILES)
    return {f"p{q:g}": float(x) for q, x in zip(PERCENTILES, pct, strict=True)} | {"mean": float(v.mean())}


def _result(
    arr: np.ndarray, prompts: np.ndarray, outputs: np.ndarray, start: float, end: float, st: _State
) -> LLMSimResult:
    first, finish = np.array(st.first, dtype=np.float64), np.array(st.finish, dtype=np.float64)
    recorded = np.isfinite(finish) & (arr >= start)
    span = max(min(end, st.end_ms) - start, 1e-9)
    return LLMSimResult(
        ttft_ms=_summary((first - arr)[recorded]),
        tpot_ms=_summary(_tpot(first, finish, outputs)[recorded]),
        e2e_ms=_summary((finish - arr)[recorded]),
        throughput_tokens_s=st.tokens / span * 1e3,
        throughput_rps=st.finished / span * 1e3,
        mean_running=st.running_ms / span,
        busy_fraction=min(1.0, st.busy_ms / span),
        device_share=st.device_ms / st.busy_ms if st.busy_ms > 0 else 1.0,
        compute_share=st.compute_ms / st.device_ms if st.device_ms > 0 else 0.0,
        preemptions=st.preemptions,
        rejected=st.rejected,
        too_long=st.too_long,
        n_recorded=int(recorded.sum()),
        iterations=st.iterations,
        arrival_ms=arr,
        prompt_tokens=prompts,
        output_tokens=outputs,
        first_token_ms=first,
        finish_ms=finish,
        preempted=np.array(st.preempted, dtype=np.int64),
        recorded=recorded,
    )
