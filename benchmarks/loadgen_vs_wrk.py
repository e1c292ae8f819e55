"""The load generator vs wrk against one trivial endpoint on 127.0.0.1.

    .venv/bin/python benchmarks/loadgen_vs_wrk.py [--duration 5] [--connections 16] [--server uvicorn|raw]

Goal: the rate our generator drives within 5% of wrk's (medians of >= 3 alternated rounds). How we compare:
  1. wrk (C, closed loop, -t1) measures the endpoint's max throughput with C connections.
  2. Ours, closed loop with the same C connections (same method as wrk). Closed-loop throughput is
     C / round trip, so it also measures how fast the client turns a response into the next send.
  3. Ours, open loop with the same C connections offered at 1.2x that round's wrk rate (wrk2-style
     fixed rate): sent (written) rate, answered share, responses/s and validity. At 1.2x the server is
     the bottleneck unless the generator is: its responses/s is the max rate our generator drives,
     the number compared.
  4. httpx (AsyncClient, HTTP/1.1 pool, same C) closed loop: why the generator uses a raw client.
The server runs in its own process (uvicorn + a bare ASGI app, or a raw uvloop protocol); the
generator shares the 2 cores with it, as wrk does. Skips with a message when wrk is absent
(Debian: ``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

from rightsize.loadgen import ClosedLoopConfig, OpenLoopConfig, Target, run_closed_loop, run_open_loop

UVICORN_APP = """
import uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})
uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="error", access_log=False, loop="uvloop", http="httptools")
"""

RAW_APP = """
import asyncio, uvloop
RESP = b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 11\\r\\n\\r\\n{\\"ok\\":true}"
class P(asyncio.Protocol):
    def connection_made(self, t): self.t = t; self.buf = b""
    def data_received(self, d):
        self.buf += d
        while b"\\r\\n\\r\\n" in self.buf:
            _, self.buf = self.buf.split(b"\\r\\n\\r\\n", 1)
            self.t.write(RESP)
async def main():
    srv = await asyncio.get_running_loop().create_server(P, "127.0.0.1", PORT, backlog=1024)
    await srv.serve_forever()
uvloop.run(main())
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(kind: str, port: int) -> subprocess.Popen[bytes]:
    code = (UVICORN_APP if kind == "uvicorn" else RAW_APP).replace("PORT", str(port))
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def run_wrk(url: str, connections: int, duration_s: float) -> float:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(duration_s)}s", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise SystemExit(f"could not parse wrk output:\n{out}")
    return float(m.group(1))


async def _httpx_closed(url: str, connections: int, duration_s: float) -> float:
    import httpx

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    done = 0
    async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:
        await asyncio.gather(*(client.get(url) for _ in range(connections)))  # warm connections
        t0 = time.perf_counter()
        end = t0 + duration_s

        async def user() -> None:
            nonlocal done
            while time.perf_counter() < end:
                r = await client.get(url)
                done += r.status_code == 200

        await asyncio.gather(*(user() for _ in range(connections)))
        return done / (time.perf_counter() - t0)


def run_httpx(url: str, connections: int, duration_s: float) -> float:
    import uvloop

    return uvloop.run(_httpx_closed(url, connections, duration_s))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--server", choices=["uvicorn", "raw"], default="uvicorn")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds of wrk and ours (medians of each)")
    ap.add_argument("--no-httpx", action="store_true")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        print("SKIP: wrk is not installed (Debian: apt-get install -y wrk)")
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}/ping"
    proc = start_server(args.server, port)
    wrk_rates: list[float] = []
    closed_rates: list[float] = []
    driven: list[float] = []  # open loop offered 1.2 x that round's wrk: responses/s
    open_runs = []
    try:
        target = Target.from_url(url, method="GET")
        run_wrk(url, args.connections, 1)  # warm up the server

        def ours() -> None:
            closed = run_closed_loop(
                target, ClosedLoopConfig(concurrency=args.connections, duration_s=args.duration, warmup_s=0.5)
            )
            closed_rates.append(closed.achieved_rate_per_s)
            rate = 1.2 * (wrk_rates[-1] if wrk_rates else closed.achieved_rate_per_s)
            opened = run_open_loop(
                target,
                OpenLoopConfig(rate_per_s=rate, duration_s=args.duration, warmup_s=0.5, arrival="constant",
                               connections=args.connections, timeout_s=30.0),
            )  # fmt: skip
            open_runs.append(opened)
            driven.append(opened.throughput_per_s)

        # Alternated, neither side always first (this machine is shared: its load drifts): W O, O W, W O, ...
        for r in range(args.rounds):
            steps = (lambda: wrk_rates.append(run_wrk(url, args.connections, args.duration)), ours)
            for step in steps if r % 2 == 0 else steps[::-1]:
                step()
        httpx_rate = None if args.no_httpx else run_httpx(url, args.connections, min(args.duration, 2.0))
    finally:
        proc.terminate()
        proc.wait(10)

    med = statistics.median
    wrk_rate = med(wrk_rates)

    def spread(xs: list[float]) -> str:
        return f"{min(xs):.0f}-{max(xs):.0f}; runs {', '.join(f'{x:.0f}' for x in xs)}"

    rows = [
        ("wrk -t1, closed loop (median)", wrk_rate, spread(wrk_rates)),
        ("rightsize closed loop (median)", med(closed_rates), spread(closed_rates)),
        ("rightsize open loop @ 1.2 x wrk: responses/s", med(driven), spread(driven)),
    ]
    if httpx_rate is not None:
        rows.append(("httpx AsyncClient, closed loop (one run)", httpx_rate, "HTTP/1.1 pool, same connections"))
    where = f"{args.server} trivial GET on 127.0.0.1"
    runs = f"{args.duration:g} s runs, {args.rounds} alternated rounds"
    print(f"\nendpoint: {where}; {args.connections} connections; {runs}")
    print(f"{'generator':<46} {'req/s':>10} {'vs wrk':>8}  min-max and runs")
    for name, rate, note in rows:
        print(f"{name:<46} {rate:>10.0f} {rate / wrk_rate:>8.3f}  {note}")
    for r in open_runs:
        lag = r.send_lag_ms.p99 if r.send_lag_ms else float("nan")
        answered = r.requests_answered / r.requests_sent if r.requests_sent else 0.0
        print(f"  open loop: offered {r.offered_rate_per_s or 0:.0f}/s, sent (written) {r.achieved_rate_per_s:.0f}/s, "
              f"answered {answered:.1%}, p99 send lag {lag:.1f} ms: {'VALID' if r.valid else 'INVALID'}")  # fmt: skip
    over = med(driven) / wrk_rate
    print(
        f"\nmax rate driven (open loop at 1.2 x wrk, median responses/s) vs wrk median: {over:.3f} "
        f"({'within' if over >= 0.95 else 'NOT within'} 5%); closed loop vs wrk: {med(closed_rates) / wrk_rate:.3f}"
    )


if __name__ == "__main__":
    main()
