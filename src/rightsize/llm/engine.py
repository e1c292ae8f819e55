"""A continuous-batching generation engine: one background thread schedules at iteration level.

    engine = Engine(EngineConfig(model="gpt2", size="small", max_seqs=16, kv_tokens=8192))
    engine.start()
    rid = engine.submit([5, 17, 42], max_new_tokens=32, on_token=print_token, on_done=print_stats)
    engine.stop()

The KV cache holds ``kv_tokens`` in blocks of ``BLOCK_TOKENS``; a sequence holds the blocks its cache
needs (block accounting as in paged attention, Kwon et al. 2023; the memory itself is ``Decoder``'s
static per-slot cache). Policy per iteration, vLLM v0's (rightsize.llm's simulator reproduces it):

0. Cancel: requests cancelled since the last iteration leave the queue or the batch; blocks freed.
1. Admission, FCFS from the waiting queue: admit the head while running < max_seqs and the free
   blocks cover ceil((prompt_len + 1) / BLOCK_TOKENS). Stop at the first that does not fit (no
   skipping). A preempted request's prompt_len is its original prompt + the tokens generated so far.
2. If any were admitted: a PREFILL iteration. Each admitted request is prefilled, one after another,
   and emits its next token right after its own prefill (the first one is the TTFT point). No decode.
3. Otherwise, if any are running: one DECODE step, batched over every running sequence, each emits
   one token. Before the step, oldest admitted first, a sequence whose cache of c tokens fills its
   blocks (blocks × BLOCK_TOKENS < c + 1) needs one more block; while none is free, the most recently
   admitted running sequence (possibly itself) is preempted: all its blocks freed, put back at the
   HEAD of the waiting queue (each victim in turn, so the earliest admitted ends up first), later
   recomputed by prefill (tokens already streamed are not re-sent).
4. A sequence finishes after exactly max_new_tokens generated tokens (EOS ignored: random weights;
   greedy argmax); its blocks are freed.
5. Idle (nothing waiting or running): wait on a condition, no busy spin.

Every iteration is recorded (``iterations(since)``): prefill ``tokens`` = prompt tokens summed,
``context_tokens`` = 0; decode ``tokens`` = seqs, ``context_tokens`` = keys attended, Σ(c + 1).
``ms`` spans the whole iteration: scheduling, model, sampling and the token callbacks. Running
sequences hold decoder slots 0..n-1 (a leaving one's slot takes the highest slot's cache), so a
decode step reads the keys through a view of the cache instead of gathering them.
Callbacks run on the engine thread (``stop()`` fails what is left on the caller's thread).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import psutil
import torch

from rightsize.errors import SpecError
from rightsize.llm.decoder import Decoder, build_lm, lm_config, max_positions
from rightsize.llm.engine_types import (
    BLOCK_TOKENS,
    Cancelled,
    EngineConfig,
    EngineStopped,
    GenStats,
    IterationRecord,
    PromptTooLong,
    QueueFull,
    blocks_for,
)
from rightsize.llm.shape import DecoderShape

__all__ = ["BLOCK_TOKENS", "Cancelled", "Engine", "EngineConfig", "EngineStopped", "GenStats", "IterationRecord",
           "PromptTooLong", "QueueFull", "blocks_for"]  # fmt: skip

ITERATION_LOG_SIZE = 65_536  # iterations kept one by one


@dataclass(eq=False)
class _Request:
    rid: int
    prompt: list[int]
    max_new: int
    on_token: Callable[[int, float], None]
    on_done: Callable[[GenStats | Exception], None]
    t_submit: float
    generated: list[int] = field(default_factory=list)
    t_admit: float | None = None
    t_first: float = 0.0
    t_last: float = 0.0
    slot: int = -1
    blocks: int = 0
    preemptions: int = 0


def _check_kv_fits(cfg: EngineConfig, hf_config: Any, max_len: int) -> None:
    """Refuse a static KV cache (``Decoder``: max_seqs slots x max_len positions, fp32 on this CPU) larger than the
    memory this machine has free: allocating it would fail with a traceback, or have the process OOM-killed."""
    need = cfg.max_seqs * max_len * DecoderShape.from_hf_config(hf_config).kv_bytes_per_token("fp32")
    free = psutil.virtual_memory().available
    if need > 0.8 * free:  # the weights and the activations need room too
        gib = 2**30
        raise SpecError("max_seqs", f"{cfg.max_seqs} sequences x {max_len} positions (max_prompt_tokens + "
                        f"max_new_tokens) need {need / gib:.1f} GiB of KV cache; this machine has {free / gib:.1f} "
                        "GiB free: lower --max-seqs, --max-prompt-tokens or --max-new-tokens")  # fmt: skip


class Engine:
    """The generation engine of one model; thread-safe ``submit``/``cancel``, one scheduling thread."""

    def __init__(self, cfg: EngineConfig) -> None:
        self.cfg = cfg
        hf_config = lm_config(cfg.model, cfg.size)
        self.vocab_size = int(hf_config.vocab_size)
        self.max_len = cfg.max_prompt_tokens + cfg.max_new_tokens  # positions one sequence can use
        if self.max_len > max_positions(hf_config):
            raise SpecError("max_prompt_tokens", f"max_prompt_tokens + max_new_tokens = {self.max_len} is past the "
                            f"model's {max_positions(hf_config)} positions; lower them")  # fmt: skip
        _check_kv_fits(cfg, hf_config, self.max_len)
        self.total_blocks = cfg.kv_tokens // BLOCK_TOKENS
        self.decoder: Decoder | None = None
        self._cond = threading.Condition()
        self._waiting: deque[_Request] = deque()  # guarded by _cond
        self._cancel: set[int] = set()  # guarded by _cond
        self._live: dict[int, _Request] = {}  # waiting or running, by id; guarded by _cond
        self._running: list[_Request] = []  # admission order; engine thread only
        self._free_blocks = self.total_blocks
        self._ids = itertools.count()
        self._log: deque[IterationRecord] = deque(maxlen=ITERATION_LOG_SIZE)
        self._iterations = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self.preemptions = 0
        self.tokens_generated = 0
        self.finished = 0

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Build the model, warm up prefill and decode on the engine thread, then serve the queue."""
        lm = build_lm(self.cfg.model, self.cfg.size, self.cfg.seed)
        self.decoder = Decoder(lm, slots=self.cfg.max_seqs, max_len=self.max_len)
        self._thread = threading.Thread(target=self._run, name="rightsize-llm-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._start_error is not None:
            raise self._start_error

    def stop(self) -> None:
        """Stop after the current iteration; every request not finished gets ``on_done(EngineStopped)``."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._cond:
            left = [*self._running, *self._waiting]
            self._running.clear()
            self._waiting.clear()
            self._live.clear()
        for r in left:
            _call(r.on_done, EngineStopped("the engine stopped before the request finished"))

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self._start_error is None and not self._stopping

    # --- public API -----------------------------------------------------------------------------------

    def submit(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        on_token: Callable[[int, float], None],
        on_done: Callable[[GenStats | Exception], None],
    ) -> int:
        """Queue a request; its id. Raises QueueFull, EngineStopped, or ValueError naming the field."""
        cfg = self.cfg
        if len(prompt) == 0:
            raise ValueError("prompt: must hold at least one token id")
        if len(prompt) > cfg.max_prompt_tokens:
            raise PromptTooLong(f"prompt: {len(prompt)} tokens is over max_prompt_tokens={cfg.max_prompt_tokens}; "
                                "shorten it")  # fmt: skip
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise ValueError(f"max_new_tokens: must be an integer, got {repr(max_new_tokens)[:60]}")
        if not 1 <= max_new_tokens <= cfg.max_new_tokens:
            raise ValueError(f"max_new_tokens: must be in [1, {cfg.max_new_tokens}], got {max_new_tokens}")
        ids = list(prompt)
        bad = next((t for t in ids if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.vocab_size),
                   None)  # fmt: skip
        if bad is not None:
            raise ValueError(f"prompt: token id {bad!r} is outside the vocabulary; use integers in "
                             f"[0, {self.vocab_size})")  # fmt: skip
        with self._cond:
            if self._stopping:
                raise EngineStopped("the engine is stopping; no new requests")
            if len(self._waiting) >= cfg.max_queue:
                raise QueueFull(f"{len(self._waiting)} requests waiting (max_queue={cfg.max_queue}); retry later")
            r = _Request(next(self._ids), ids, max_new_tokens, on_token, on_done, time.perf_counter())
            self._waiting.append(r)
            self._live[r.rid] = r
            self._cond.notify()
        return r.rid

    def cancel(self, request_id: int) -> None:
        """Drop a request at the next iteration (``on_done(Cancelled)``); unknown or finished ids are ignored."""
        with self._cond:
            if request_id in self._live:
                self._cancel.add(request_id)
                self._cond.notify()

    def info(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"model": cfg.model, "size": cfg.size, "vocab_size": self.vocab_size, "max_seqs": cfg.max_seqs,
                "kv_tokens": cfg.kv_tokens, "block_tokens": BLOCK_TOKENS, "max_prompt_tokens": cfg.max_prompt_tokens,
                "max_new_tokens": cfg.max_new_tokens, "max_queue": cfg.max_queue, "threads": cfg.threads}  # fmt: skip

    def counters(self) -> dict[str, int]:
        return {"running": len(self._running), "waiting": len(self._waiting), "preemptions": self.preemptions,
                "tokens_generated": self.tokens_generated, "finished": self.finished,
                "free_blocks": self._free_blocks}  # fmt: skip

    def iterations(self, since: int = 0) -> tuple[int, list[IterationRecord]]:
        """Iterations numbered ``since`` onwards still held, and the number the next one will get."""
        with self._cond:
            skip = min(len(self._log), max(0, since - (self._iterations - len(self._log))))  # any int: none past
            return self._iterations, list(itertools.islice(self._log, skip, None))

    # --- the engine thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        torch.set_num_threads(self.cfg.threads)
        try:
            self._warm_up()
        except BaseException as exc:
            self._start_error = exc
            self._ready.set()
            return
        self._ready.set()
        while True:
            with self._cond:
                while not (self._stopping or self._waiting or self._running or self._cancel):
                    self._cond.wait()  # 5. idle
                if self._stopping:
                    return
                t0 = time.perf_counter()
                dropped = self._take_cancelled()
                admitted = self._admit()
            for r in dropped:
                _call(r.on_done, Cancelled(f"request {r.rid} cancelled"))
            if admitted:
                self._prefill(admitted, t0)
            elif self._running:
                self._decode(t0)

    def _warm_up(self) -> None:
        dec = self._dec()
        n = min(16, self.cfg.max_prompt_tokens)
        dec.prefill(0, [0] * n)
        dec.decode([0], [0])
        dec.release(0)

    def _dec(self) -> Decoder:
        assert self.decoder is not None, "start() builds the decoder"
        return self.decoder

    def _take_cancelled(self) -> list[_Request]:
        """0. Under the lock: cancelled requests leave the queue and the batch."""
        out = []
        for rid in self._cancel:
            r = self._live.get(rid)
            if r is None:
                continue
            if r in self._running:
                self._free(r)
            else:
                self._waiting.remove(r)
                del self._live[rid]
            out.append(r)
        self._cancel.clear()
        return out

    def _admit(self) -> list[_Request]:
        """1. Under the lock: FCFS admission while a slot and the blocks for prompt + 1 token are free."""
        admitted = []
        while self._waiting and len(self._running) < self.cfg.max_seqs:
            r = self._waiting[0]
            need = blocks_for(len(r.prompt) + len(r.generated) + 1)
            if need > self._free_blocks:
                break  # no skipping: the head waits, and everyone behind it
            self._waiting.popleft()
            self._free_blocks -= need
            r.blocks, r.slot = need, len(self._running)  # running sequences hold slots 0..n-1
            if r.t_admit is None:
                r.t_admit = time.perf_counter()
            self._running.append(r)
            admitted.append(r)
        return admitted

    def _prefill(self, admitted: list[_Request], t0: float) -> None:
        """2. Prefill each admitted request in turn; each emits its next token."""
        dec, tokens = self._dec(), 0
        for r in admitted:
            context = r.prompt + r.generated  # a preempted request recomputes what it had
            tokens += len(context)
            try:
                token = int(dec.prefill(r.slot, context).argmax())
            except Exception as exc:  # a model failure fails this request, never the engine
                self._fail([r], exc)
                continue
            self._emit(r, token)
        self._record(t0, "prefill", len(admitted), tokens, 0)

    def _decode(self, t0: float) -> None:
        """3. Reserve a block for each sequence whose next token needs one (preempting), then one step."""
        dec = self._dec()
        for r in list(self._running):  # oldest admitted first
            if r not in self._running or r.blocks * BLOCK_TOKENS >= dec.lengths[r.slot] + 1:
                continue
            while self._free_blocks == 0 and r in self._running:
                self._preempt(self._running[-1])  # the most recently admitted, maybe r itself
            if r in self._running:
                r.blocks += 1
                self._free_blocks -= 1
        batch = list(self._running)
        if not batch:
            return
        context = sum(dec.lengths[r.slot] + 1 for r in batch)
        try:
            tokens = dec.decode([r.slot for r in batch], [r.generated[-1] for r in batch]).argmax(-1).tolist()
        except Exception as exc:
            self._fail(batch, exc)
            return
        for r, token in zip(batch, tokens, strict=True):
            self._emit(r, int(token))
        self._record(t0, "decode", len(batch), len(batch), context)

    def _release(self, r: _Request) -> None:
        """Out of the batch, blocks back; the highest slot's cache moves into r's, so the running
        sequences keep slots 0..n-1 and the decoder reads their keys through a view, not a gather."""
        dec, last = self._dec(), max(self._running, key=lambda x: x.slot)
        self._running.remove(r)
        self._free_blocks += r.blocks
        dec.release(r.slot)
        if last is not r:
            dec.move(last.slot, r.slot)
            last.slot = r.slot
        r.blocks, r.slot = 0, -1

    def _preempt(self, r: _Request) -> None:
        """Free all of ``r``'s blocks and put it back at the head of the queue (recompute later)."""
        self._release(r)
        r.preemptions += 1
        self.preemptions += 1
        with self._cond:
            self._waiting.appendleft(r)

    def _emit(self, r: _Request, token: int) -> None:
        now = time.perf_counter()
        r.generated.append(token)
        if len(r.generated) == 1:
            r.t_first = now
        r.t_last = now
        self.tokens_generated += 1
        try:
            r.on_token(token, now)
        except Exception as exc:  # a broken consumer drops its own request only
            self._fail([r], exc)
            return
        if len(r.generated) == r.max_new:  # 4. done: exactly max_new tokens
            self._free(r)
            self.finished += 1
            n = len(r.generated)
            stats = GenStats(
                queue_ms=((r.t_admit or now) - r.t_submit) * 1e3,
                ttft_ms=(r.t_first - r.t_submit) * 1e3,
                tpot_ms=(r.t_last - r.t_first) * 1e3 / (n - 1) if n > 1 else 0.0,
                tokens=n,
                preemptions=r.preemptions,
            )
            _call(r.on_done, stats)

    def _free(self, r: _Request) -> None:
        """Done with ``r`` for good (finished, failed or cancelled)."""
        if r in self._running:
            self._release(r)
        with self._cond:
            self._live.pop(r.rid, None)

    def _fail(self, requests: list[_Request], exc: Exception) -> None:
        for r in requests:
            self._free(r)
            _call(r.on_done, exc)

    def _record(self, t0: float, kind: Literal["prefill", "decode"], seqs: int, tokens: int, context: int) -> None:
        ms = (time.perf_counter() - t0) * 1e3
        with self._cond:
            self._log.append(IterationRecord(self._iterations, t0, kind, seqs, tokens, context, round(ms, 4)))
            self._iterations += 1


def _call(fn: Callable[[Any], None], arg: Any) -> None:
    """A completion callback; its own failure must not take the engine down (nothing to tell it)."""
    with contextlib.suppress(Exception):
        fn(arg)
