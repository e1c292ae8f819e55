"""Hostile input and faults, end to end: fuzzed specs and CLI options, kill -9 during bench, two
sweeps on one store. Prints a table and exits 1 when a goal is missed.

    .venv/bin/python benchmarks/chaos.py                 # ~4-6 minutes on 2 cores
    .venv/bin/python benchmarks/chaos.py --specs 500 --kills 5     # quicker

What each row does:
- fuzzed specs: N generated spec files (random fields and values, huge and non-finite numbers,
  deep nesting, alias bombs, duplicate keys, non-UTF-8 and oversized files) go through the CLI's
  own path in-process (``load_spec`` then ``plan`` on fixed service curves, each under a 10 s alarm);
  a sample of them also through the real ``rightsize plan`` subprocess. A traceback is any
  exception other than RightsizeError; a hang is a case past 10 s.
- fuzzed CLI options: NaN, infinities, negatives, huge values and words for the float and int
  options of loadtest, serve and validate, as subprocesses: exit 2 with one line, never a traceback.
- kill -9 during bench: a small sweep killed at random moments; after each, SQLite's integrity check,
  no run left ``running`` once the store is reopened; then a full rerun, and no config stored twice.
- two sweeps on one store: started together; no config measured twice.
- 10x overload, default settings: ``rightsize serve`` (a child process) of a model with a known
  t(n) = 60 + 10n ms, open-loop load at 10x its capacity: every request gets one answer (200 or
  503), the excess is refused, and the admitted p99 (at the client) stays within 3 batch times.
- slow connections: 20,000 connections (from two child processes) that send half a request and
  stall, re-opened whenever the server drops them, while real requests arrive at 10/s: every real
  request served, p95 within 2x of the unloaded p95 (or 10 ms of it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "plan"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "serve"))

from plan_fixtures import cpu_curve, gpu_curve, small_catalog
from serve_helpers import open_loop

from rightsize.errors import RightsizeError
from rightsize.plan import MemoryModel, plan
from rightsize.serve import ServerConfig
from rightsize.serve.process import running_server_process
from rightsize.spec import load_spec
from rightsize.store import Store

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 10
CURVES = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2)]
TRAIN = [gpu_curve("T4", 50.0, 5.0, precision="fp16"), cpu_curve("c.4x", 200.0, 100.0)]
MEMORY = {"fp32": MemoryModel(3e8, 2e6), "fp16": MemoryModel(1.5e8, 1e6)}
FAST = {"warmup": 1, "min_repeats": 3, "max_repeats": 8, "max_time_s": 1.0}


# -- spec generation -------------------------------------------------------------------------------

HOSTILE_NUMBERS: list[Any] = [0, -1, 1, 2, 1e-300, 1e300, 10**30, -(10**30), math.inf, -math.inf, math.nan,
                              0.5, 99.9999, 100, 1e7, 1e13, 1e30, "1e30", "12abc", True, None]  # fmt: skip


def _num(rng: random.Random) -> Any:
    return rng.choice(HOSTILE_NUMBERS) if rng.random() < 0.5 else rng.uniform(-10, 10) * 10 ** rng.randint(-6, 14)


def _targets(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["online", "batch", "training", "bogus"])
    t: dict[str, Any] = {}
    if kind == "online":
        t["online"] = {"rate_per_s": _num(rng), "latency": {"bound_ms": _num(rng), "percentile": _num(rng)}}
        for k in ("request_samples", "burstiness", "headroom", "max_replicas", "burst_s"):
            if rng.random() < 0.3:
                t["online"][k] = _num(rng)
        if rng.random() < 0.3:
            t["online"]["arrival"] = rng.choice(["poisson", "bursty", "constant", "chaos"])
    elif kind == "batch":
        t["batch"] = {"items": _num(rng), "deadline_hours": _num(rng)}
    elif kind == "training":
        t["training"] = {"steps": _num(rng), "deadline_hours": _num(rng)}
        for k in ("dataset_size", "epochs", "batch_size", "checkpoint_minutes", "restart_minutes", "max_nodes"):
            if rng.random() < 0.3:
                t["training"][k] = _num(rng)
    else:
        t[rng.choice(["onlnie", "kind", "rows"])] = _num(rng)
    if rng.random() < 0.3:
        t["interruptions_per_hour"] = _num(rng)
    if rng.random() < 0.2:
        t["cold_start"] = {"scale_from_zero": True, "provision_s": _num(rng)}
    return t


def _log(rng: random.Random, low: float, high: float) -> float:
    """Log-uniform in [low, high], with the ends themselves drawn often (the limits are the hostile part)."""
    r = rng.random()
    if r < 0.1:
        return low
    if r < 0.2:
        return high
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _plausible(rng: random.Random) -> dict[str, Any]:
    """A spec the schema accepts, with values anywhere inside its documented limits (docs/spec.md)."""
    kind = rng.choice(["online", "batch", "training"])
    t: dict[str, Any]
    if kind == "online":
        t = {"online": {"rate_per_s": _log(rng, 1e-3, 1e7),
                        "latency": {"bound_ms": _log(rng, 1e-3, 8.64e7), "percentile": rng.uniform(1, 99.999)},
                        "request_samples": int(_log(rng, 1, 1e6)), "burstiness": _log(rng, 1, 1000),
                        "arrival": rng.choice(["poisson", "bursty", "constant"]),
                        "max_replicas": int(_log(rng, 1, 10_000))}}  # fmt: skip
    elif kind == "batch":
        t = {"batch": {"items": int(_log(rng, 1, 1e13)), "deadline_hours": _log(rng, 1e-6, 1e5)},
             "interruptions_per_hour": _log(rng, 1e-6, 60)}  # fmt: skip
    else:
        t = {"training": {"steps": int(_log(rng, 1, 1e10)), "deadline_hours": _log(rng, 1e-6, 1e5),
                          "batch_size": int(_log(rng, 1, 1e7)), "checkpoint_minutes": _log(rng, 1e-9, 1e5),
                          "restart_minutes": _log(rng, 1e-9, 1e5), "max_nodes": int(_log(rng, 1, 1024))},
             "interruptions_per_hour": _log(rng, 1e-6, 60)}  # fmt: skip
    doc: dict[str, Any] = {"model": "bert-base" if kind == "training" else "distilbert", "targets": t}
    if kind == "training":
        doc["mode"] = "training"
    return doc


def _spec_doc(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.5:
        return _plausible(rng)
    training = rng.random() < 0.3
    doc: dict[str, Any] = {"model": rng.choice(["distilbert", "bert-base", "simplenet", "nope", "os:getcwd", 7])}
    if training:
        doc["mode"] = "training"
    for key, gen in (
        ("batch_sizes", lambda: [_num(rng) for _ in range(rng.randint(0, 4))]),
        ("threads", lambda: [rng.choice([None, _num(rng)]) for _ in range(rng.randint(0, 3))]),
        ("input", lambda: {"seq_len": _num(rng), "shape": [_num(rng)] * rng.randint(0, 10)}),
        ("timing", lambda: {"max_time_s": _num(rng), "target_ci": _num(rng)}),
        ("precisions", lambda: [rng.choice(["fp32", "fp64", "int8", 3])]),
        ("name", lambda: "x" * rng.choice([0, 1, 10, 300])),
    ):
        if rng.random() < 0.3:
            doc[key] = gen()
    doc["targets"] = _targets(rng)
    return doc


def _bytes_for(rng: random.Random, i: int) -> bytes:
    """One spec file's bytes: mostly generated documents, some malformed files of each kind."""
    doc = _spec_doc(rng)
    text = yaml.safe_dump(doc, allow_unicode=True)
    form = i % 20
    if form == 1:
        return text.encode("utf-16")
    if form == 2:
        return (text + "note: caf\xe9\n").encode("latin-1")
    if form == 3:
        return (text + "deep: " + "[" * rng.choice([40, 500, 5000]) + "]" * 5000 + "\n").encode()
    if form == 4:
        width = rng.choice([3, 9])
        lines = ["l0: &l0 [" + ",".join(["x"] * width) + "]"]
        lines += [f"l{j}: &l{j} [" + ",".join([f"*l{j - 1}"] * width) + "]" for j in range(1, 9)]
        lines.append(rng.choice(["*l8 : 1", "name: *l8", "targets: *l8"]))
        return ("\n".join(lines) + "\nmodel: simplenet\n").encode()
    if form == 5:
        return (text + "model: resnet50\n").encode()  # duplicate key
    if form == 6:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
    if form == 7 and i % 400 == 7:
        return text.encode() + b"# " + b"x" * (6 * 2**20) + b"\n"  # past the size cap
    return text.encode()


class _Alarm(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm


def fuzz_specs(n: int, seed: int, workdir: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    tracebacks: list[str] = []
    hangs = accepted = refused = 0
    worst = 0.0
    signal.signal(signal.SIGALRM, _on_alarm)
    paths = []
    for i in range(n):
        p = workdir / f"spec{i}.yaml"
        p.write_bytes(_bytes_for(rng, i))
        paths.append(p)
        t0 = time.perf_counter()
        signal.alarm(HANG_S)
        try:
            w = load_spec(p)
            training = w.mode == "training"
            plan(w, TRAIN if training else CURVES, small_catalog(), MEMORY)
            accepted += 1
        except _Alarm:
            hangs += 1
        except RightsizeError as exc:
            refused += 1
            if "\n" in str(exc):
                tracebacks.append(f"{p.name}: multi-line error")
        except Exception as exc:  # counting what escapes is the point
            tracebacks.append(f"{p.name}: {type(exc).__name__}: {str(exc)[:120]}")
        finally:
            signal.alarm(0)
        worst = max(worst, time.perf_counter() - t0)
    # A sample through the real CLI: exit 0 or 2, no traceback on stderr.
    cli_bad = []
    sample = rng.sample(paths, min(30, len(paths)))
    store = workdir / "cli.db"
    for p in sample:
        before = _row_counts(store)
        r = subprocess.run([sys.executable, "-m", "rightsize", "plan", str(p), "--store", str(store),
                            "--json"], capture_output=True, text=True, timeout=300)  # fmt: skip
        if "Traceback" in r.stderr or r.returncode not in (0, 1, 2):
            cli_bad.append(f"{p.name}: rc {r.returncode}: {r.stderr.strip().splitlines()[-1:] or ''}")
        elif r.returncode == 2 and _row_counts(store) != before:
            cli_bad.append(f"{p.name}: refused, but the store changed")
    return {"n": n, "accepted": accepted, "refused": refused, "tracebacks": tracebacks, "hangs": hangs,
            "worst_s": worst, "cli_sampled": len(sample), "cli_bad": cli_bad}  # fmt: skip


def _row_counts(store: Path) -> tuple[int, ...]:
    """Rows per table of a store (empty tuple before it exists): a rejected input must not change them."""
    if not store.exists():
        return ()
    con = sqlite3.connect(store)
    try:
        return tuple(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("envs", "runs", "measurements", "artifacts"))  # fmt: skip
    finally:
        con.close()


# -- CLI options -----------------------------------------------------------------------------------

OPTION_VALUES = ["nan", "inf", "-inf", "-1", "0", "1e308", "abc", "1e-320"]


def fuzz_options() -> dict[str, Any]:
    url = "http://127.0.0.1:9/"
    cases: list[list[str]] = []
    for v in OPTION_VALUES:
        for opt in ("--rate", "--duration", "--timeout-s", "--max-lag-ms", "--slo-ms", "--warmup-s"):
            base = [] if opt == "--rate" else ["--rate", "5"]
            cases.append(["loadtest", url, *base, opt, v, "--no-store"])
        cases.append(["loadtest", url, "--find-knee", "--slo-p95", v, "--no-store"])
        if v in ("nan", "inf", "-inf", "-1", "abc"):  # values a server must refuse (others would start it)
            cases.append(["serve", "simplenet", "--tiny", "--slo-ms", v])
            cases.append(["serve", "simplenet", "--tiny", "--max-wait-ms", v])
        cases.append(["plan", "examples/quick.yaml", "--top", v])
    bad: list[str] = []
    refused = 0
    for args in cases:
        try:
            r = subprocess.run([sys.executable, "-m", "rightsize", *args], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            bad.append(" ".join(args) + ": hang")
            continue
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        said = any(ln.lower().startswith("error") for ln in lines)  # click's usage block ends with "Error: ..."
        if r.returncode == 2 and said and len(lines) <= 4 and "Traceback" not in r.stderr:
            refused += 1
        elif "Traceback" in r.stderr or r.returncode not in (0, 1, 2):
            bad.append(" ".join(args) + f": rc {r.returncode}")
        elif r.returncode == 0 and args[0] == "serve":
            bad.append(" ".join(args) + ": accepted")
    return {"n": len(cases), "refused": refused, "bad": bad}


# -- kill -9 and concurrency -----------------------------------------------------------------------


def _bench_spec(workdir: Path) -> Path:
    p = workdir / "chaos-bench.yaml"
    p.write_text(yaml.safe_dump({"name": "chaos", "model": "simplenet", "tiny": True, "batch_sizes": [1, 4, 16],
                                 "precisions": ["fp32", "bf16"], "timing": FAST}))  # fmt: skip
    return p


def _bench(spec: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rightsize", "bench", str(spec), "--store", str(store), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _duplicates(store: Path) -> int:
    con = sqlite3.connect(store)
    try:
        row = con.execute(
            "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM measurements WHERE status = 'ok' "
            "GROUP BY env_id, key)"
        ).fetchone()
        return int(row[0])
    finally:
        con.close()


def kill_during_bench(kills: int, seed: int, workdir: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    spec, store = _bench_spec(workdir), workdir / "kill.db"
    integrity_bad = left_running = 0
    for _ in range(kills):
        proc = _bench(spec, store)
        time.sleep(rng.uniform(0.3, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        for child in _orphans():
            os.kill(child, signal.SIGKILL)
        if store.exists():
            con = sqlite3.connect(store)
            ok = con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            con.close()
            integrity_bad += not ok
            with Store(store) as s:
                left_running += sum(1 for r in s.runs() if r.status == "running")
    proc = _bench(spec, store)
    proc.communicate(timeout=600)
    return {"kills": kills, "integrity_bad": integrity_bad, "left_running": left_running,
            "rerun_rc": proc.returncode, "duplicates": _duplicates(store) if store.exists() else 0}  # fmt: skip


def _orphans() -> list[int]:
    """Measuring children whose parent was killed (run_isolated's workers), so the next try has the cores."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == 1 and b"multiprocessing" in cmd and sys.executable.encode() in cmd:
            found.append(int(pid))
    return found


def concurrent_sweeps(workdir: Path) -> dict[str, Any]:
    spec, store = _bench_spec(workdir), workdir / "twin.db"
    a, b = _bench(spec, store), _bench(spec, store)
    (_, err_a), (_, err_b) = a.communicate(timeout=600), b.communicate(timeout=600)
    waited = ("waiting" in err_a) or ("waiting" in err_b)
    return {"rc": (a.returncode, b.returncode), "duplicates": _duplicates(store), "waited": waited}


# -- the server under abuse ------------------------------------------------------------------------


def _sleepy_server(**over: Any) -> Any:
    config = ServerConfig(model="chaos_models:sleepy", sample_shape=(2,), port=0, workers=1, threads=1,
                          max_batch=8, max_wait_ms=5.0, **over)  # fmt: skip
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])}
    return running_server_process(config, env=env)


def overload() -> dict[str, Any]:
    from chaos_models import FIXED_S, PER_SAMPLE_S

    t_full_ms = (FIXED_S + 8 * PER_SAMPLE_S) * 1000  # one full batch of 8
    capacity = 8 / (t_full_ms / 1000)
    rate, duration = 10 * capacity, 5.0
    with _sleepy_server() as url:
        outcomes = asyncio.run(open_loop(url, rate, duration, b'{"inputs": [[1, 2]]}'))
        r = httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, timeout=10)  # served again afterwards
    codes = Counter(o.status for o in outcomes)
    ok = sorted(o.latency_s * 1000 for o in outcomes if o.status == 200)
    p99 = ok[min(len(ok) - 1, int(0.99 * len(ok)))] if ok else math.inf
    return {"sent": len(outcomes), "codes": dict(codes), "p99_ms": p99, "t_full_ms": t_full_ms,
            "after": r.status_code, "rate": rate}  # fmt: skip


_SLOWLORIS = """
import socket, sys, time
host, port, k, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
HALF = b"POST /v1/predict HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nX-Slow: "
def connect():
    s = socket.create_connection((host, port), timeout=2)
    s.sendall(HALF)
    s.setblocking(False)
    return s
socks, opened, end = [], 0, time.time() + seconds
while time.time() < end:
    keep = []
    for s in socks:  # the server closed it (timeout or eviction): a slowloris comes back
        try:
            gone = s.recv(1) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            s.close()
        else:
            keep.append(s)
    socks = keep
    while len(socks) < k and time.time() < end:
        try:
            socks.append(connect())
            opened += 1
        except OSError:
            break
    time.sleep(0.5)
print(opened, flush=True)
"""


def slow_connections(n: int, per_process: int = 10_000, seconds: float = 12.0) -> dict[str, Any]:
    """``n`` slow connections held open (re-opened when the server drops them) from child processes,
    while real requests arrive at 10/s."""

    def real_p95(url: str, duration: float) -> tuple[float, int, int]:
        lat, ok = [], 0
        with httpx.Client(timeout=10) as client:
            for _ in range(int(10 * duration)):
                t0 = time.perf_counter()
                with contextlib.suppress(httpx.HTTPError):
                    ok += client.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}).status_code == 200
                lat.append((time.perf_counter() - t0) * 1000)
                time.sleep(max(0.0, 0.1 - (time.perf_counter() - t0)))
        lat.sort()
        return lat[int(0.95 * (len(lat) - 1))], ok, len(lat)

    with _sleepy_server() as url:
        port = str(int(url.rsplit(":", 1)[1]))
        base_p95, _, _ = real_p95(url, 3.0)
        counts = [min(per_process, n - i) for i in range(0, n, per_process)]
        kids = [subprocess.Popen([sys.executable, "-c", _SLOWLORIS, "127.0.0.1", port, str(k), str(seconds)],
                                 stdout=subprocess.PIPE, text=True) for k in counts]  # fmt: skip
        time.sleep(3.0)  # the flood is up
        p95_loaded, ok, sent = real_p95(url, 5.0)
        opened = sum(int((kid.communicate(timeout=60)[0] or "0").strip() or 0) for kid in kids)
    return {"held": n, "opened": opened, "base_p95": base_p95, "p95": p95_loaded, "ok": ok, "sent": sent}


# -- table -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", type=int, default=2000)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=int, default=20_000, help="slow connections held open against the server")
    ap.add_argument("--only", default="", help="comma-separated steps: specs,options,kills,twins,overload,slow")
    args = ap.parse_args(argv)
    rows: list[tuple[str, str, str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="rightsize-chaos-") as tmp:
        work = Path(tmp)
        steps: list[tuple[str, Callable[[], None]]] = []

        def specs() -> None:
            r = fuzz_specs(args.specs, args.seed, work)
            ok = not r["tracebacks"] and not r["hangs"] and not r["cli_bad"]
            rows.append((f"fuzzed specs ({r['n']}: {r['accepted']} planned, {r['refused']} refused; "
                         f"{r['cli_sampled']} also via CLI)",
                         f"{len(r['tracebacks'])} tracebacks, {r['hangs']} hangs, {len(r['cli_bad'])} CLI failures, "
                         f"slowest {r['worst_s']:.1f} s",
                         "0 tracebacks, 0 hangs > 10 s, store unchanged when refused", ok))  # fmt: skip
            for line in (r["tracebacks"] + r["cli_bad"])[:10]:
                print("  ", line, file=sys.stderr)

        def options() -> None:
            r = fuzz_options()
            rows.append((f"fuzzed CLI options ({r['n']})", f"{r['refused']} refused with exit 2, {len(r['bad'])} bad",
                         "exit 2, one line, no traceback", not r["bad"]))  # fmt: skip
            for line in r["bad"][:10]:
                print("  ", line, file=sys.stderr)

        def kills() -> None:
            r = kill_during_bench(args.kills, args.seed, work)
            ok = not r["integrity_bad"] and not r["left_running"] and r["rerun_rc"] == 0 and not r["duplicates"]
            rows.append((f"kill -9 at {r['kills']} random points of bench",
                         f"integrity failures {r['integrity_bad']}, runs left running {r['left_running']}, "
                         f"rerun rc {r['rerun_rc']}, duplicates {r['duplicates']}",
                         "integrity ok, none running, rerun completes, no duplicate", ok))  # fmt: skip

        def twins() -> None:
            r = concurrent_sweeps(work)
            ok = r["rc"] == (0, 0) and r["duplicates"] == 0
            rows.append(("two concurrent sweeps on one store",
                         f"rc {r['rc']}, duplicates {r['duplicates']}, second waited: {r['waited']}",
                         "0 duplicate measurements", ok))  # fmt: skip

        def flood() -> None:
            r = overload()
            codes = r["codes"]
            answered = sum(v for k, v in codes.items() if k is not None)
            ok = (answered == r["sent"] and set(codes) <= {200, 503} and codes.get(503, 0) > 0
                  and r["p99_ms"] <= 3 * r["t_full_ms"] and r["after"] == 200)  # fmt: skip
            rows.append((f"10x overload, default settings ({r['rate']:.0f} req/s for 5 s)",
                         f"{r['sent']} sent, {codes.get(200, 0)} x 200, {codes.get(503, 0)} x 503, "
                         f"{codes.get(None, 0)} unanswered; admitted p99 {r['p99_ms']:.0f} ms "
                         f"(batch time {r['t_full_ms']:.0f} ms)",
                         "one answer each, excess 503, admitted p99 <= 3 batch times", ok))  # fmt: skip

        def slowloris() -> None:
            r = slow_connections(args.slow)
            ok = r["ok"] == r["sent"] and (r["p95"] <= 2 * r["base_p95"] or r["p95"] <= r["base_p95"] + 10)
            rows.append((f"{r['held']:,} slowloris slots ({r['opened']:,} connections opened in 12 s)",
                         f"{r['ok']}/{r['sent']} real requests served, p95 {r['p95']:.0f} ms vs "
                         f"{r['base_p95']:.0f} ms unloaded",
                         "all served, p95 within 2x (or 10 ms) of unloaded", ok))  # fmt: skip

        steps = [("specs", specs), ("options", options), ("kills", kills), ("twins", twins), ("overload", flood),
                 ("slow", slowloris)]  # fmt: skip
        only = {x for x in args.only.split(",") if x}
        for name, step in steps:
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            step()
            print(f"[{name}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr)
    width = max(len(r[0]) for r in rows)
    print(f"{'test':<{width}}  result  |  goal")
    for test, result, goal, ok in rows:
        print(f"{test:<{width}}  {'PASS' if ok else 'FAIL'}  {result}  |  {goal}")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
