"""``rightsize loadtest URL``: open-loop (coordinated-omission free) or closed-loop load, or a knee search.

    rightsize loadtest http://127.0.0.1:8000 --rate 200 --duration 30 --slo-ms 50
    rightsize loadtest http://127.0.0.1:8000 --concurrency 32 --requests 1000
    rightsize loadtest http://127.0.0.1:8000 --find-knee --slo-p95 50
    rightsize loadtest http://127.0.0.1:8000 --generate --rate 2 --prompt-tokens 64-256 --output-tokens 32

See rightsize.loadgen and docs/loadtesting.md.
"""

from __future__ import annotations

import json
import math
import socket
from functools import partial
from pathlib import Path
from typing import Any

import typer

from rightsize.cli._common import JSON_OPTION, STORE_OPTION, emit_json, err_console, given
from rightsize.errors import NotFoundError, RunFailedError, SpecError
from rightsize.inputfile import check_finite, short


def build_target(
    url: str,
    *,
    method: str | None,
    body: Path | None,
    json_body: str | None,
    headers: list[str],
    token: str | None,
    samples: int,
    encoding: str = "auto",
    timeout_s: float = 5.0,
) -> Any:
    """The request every send repeats; without a body, ask the server's /v1/info (within ``timeout_s``, at most
    5 s) for a valid sample, and warn when it did not say: the body sent is then a guess."""
    from rightsize.loadgen import Target, parse_header

    if body is not None and json_body is not None:
        raise SpecError("--body", "give --body FILE or --json-body TEXT, not both")
    payload: bytes | None = None
    if body is not None:
        if not body.is_file():  # a directory had read "no file"
            what = "is a directory" if body.is_dir() else "is not a regular file" if body.exists() else "not found"
            raise NotFoundError(f"--body: {str(body)!r} {what}; give the file holding the request body")
        payload = body.read_bytes()
    elif json_body is not None:
        try:
            json.loads(json_body)
        except ValueError as exc:
            raise SpecError("--json-body", f"not valid JSON ({exc})") from None
        payload = json_body.encode()
    parsed = [parse_header(h) for h in headers]
    info_wait_s = min(5.0, timeout_s)
    target = Target.from_url(url, method=method, body=payload, headers=parsed, token=token, samples=samples,
                             encoding=encoding, info_timeout_s=info_wait_s)  # fmt: skip
    check_reachable(target.host, target.port)  # a closed port: its one line, not a guessed-body warning first
    if target.path_chosen:
        err_console.print(f"note: {target.host}:{target.port} is a rightsize server (its /v1/info describes a model) "
                          f"and serves nothing at /: sending to {target.path}; give --method or a body "
                          "(--json-body, --body) to load / itself", markup=False, highlight=False,
                          soft_wrap=True)  # fmt: skip
    if target.body_guessed:
        shown = target.body.decode(errors="replace")
        err_console.print(f"warning: {target.host}:{target.port}/v1/info did not describe the server (not a rightsize "
                          f"server, or no answer in {info_wait_s:g} s): sending a guessed body {shown}; pass "
                          "--body FILE or --json-body TEXT with a request your server takes", markup=False,
                          highlight=False, soft_wrap=True)  # fmt: skip
    return target


HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def watching_others(host: str, port: int) -> Any:
    """An ``OthersBusy`` over the load test when the server runs on this machine and its process is found by its
    port (its CPU, and this generator's, are the test's own; anything else slows the server), else a no-op. The load
    test had no way to tell a busy machine from a slow server: validate's levels said it, loadtest never did."""
    import contextlib

    from rightsize.hosts import is_loopback
    from rightsize.measure.conditions import OthersBusy, listening_pids

    pids = listening_pids(port) if is_loopback(host) or host == "0.0.0.0" else []
    return OthersBusy(also=pids) if pids else contextlib.nullcontext()


def busy_payload(watch: Any) -> dict[str, Any]:
    """``others_busy_share`` (None when not watched: a remote server, or one whose process was not found) and, past
    validate's threshold, ``others_busy_note`` saying what it means for the figures."""
    from rightsize.workflows.validate_run import OTHERS_BUSY

    share = getattr(watch, "share", None)
    if share is None or share <= OTHERS_BUSY:
        return {"others_busy_share": share}
    return {"others_busy_share": share, "others_busy_note": (
        f"other processes kept {share:.0%} of this machine's cores busy during the test (the server and this load "
        "generator left out): its latencies include that load; run it again on a quiet machine to measure the "
        "server alone")}  # fmt: skip


def say_busy(payload: dict[str, Any]) -> None:
    """The busy note of ``busy_payload``, on stderr, when there is one."""
    if (note := payload.get("others_busy_note")) is not None:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)


def check_reachable(host: str, port: int, timeout_s: float = 3.0) -> None:
    """Fail fast (exit 1) when nothing listens at host:port, instead of a run of connection errors."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise RunFailedError(
            f"cannot connect to {host}:{port} ({exc.strerror or exc}); start the server first "
            "(e.g. rightsize serve MODEL) or fix the URL"
        ) from None


def store_payload(payload: dict[str, Any], store: Path | None) -> str | None:
    """Save to the results store; a store failure is reported, not fatal (the result is printed anyway)."""
    from rightsize.loadgen.persist import save_result

    try:
        return save_result(payload, store)
    except Exception as exc:
        err_console.print(f"warning: could not store the result: {exc}")
        return None


def loadtest(
    ctx: typer.Context,
    url: str = typer.Argument(..., help="http://host:port[/path]; with no path at all, POST /v1/predict."),
    rate: float | None = typer.Option(None, "--rate", help="Open loop: requests per second (recommended)."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, max=100_000, help="Closed loop: concurrent users (tail latency under-reported)."
    ),
    duration: float | None = typer.Option(
        None,
        "--duration",
        help="Seconds of load (with --requests alone: until they are sent).",
        show_default="10, or 5 per --find-knee step",
    ),
    requests: int | None = typer.Option(None, "--requests", min=1, max=10**12, help="Stop after this many requests."),
    arrival: str = typer.Option("poisson", "--arrival", help="Open loop arrivals: poisson | constant."),
    connections: int = typer.Option(
        128, "--connections", min=1, max=100_000, help="Open loop: max keep-alive connections."
    ),
    timeout_s: float = typer.Option(10.0, "--timeout-s", help="Per-request timeout, seconds."),
    slo_ms: float | None = typer.Option(None, "--slo-ms", help="Goodput counts successes within this latency."),
    warmup_s: float = typer.Option(0.0, "--warmup-s", min=0.0, help="Seconds sent but not recorded at the start."),
    max_lag_ms: float = typer.Option(10.0, "--max-lag-ms", help="Open loop: invalid when p99 send lag exceeds this."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the Poisson schedule."),
    find_knee: bool = typer.Option(False, "--find-knee", help="Search the highest rate meeting --slo-p95."),
    slo_p95: float | None = typer.Option(None, "--slo-p95", help="Knee search: p95 latency bound, ms."),
    start_rate: float = typer.Option(10.0, "--start-rate", help="Knee search: first rate tried, per second."),
    tolerance: float = typer.Option(0.05, "--tolerance", help="Knee search: stop when the bracket is this narrow."),
    max_steps: int = typer.Option(16, "--max-steps", min=1, max=1000, help="Knee search: most runs."),
    confirm: int = typer.Option(
        0,
        "--confirm",
        min=0,
        max=100,
        help="Knee search: re-run a failing rate up to N times; any pass counts (noisy hosts).",
    ),
    method: str | None = typer.Option(None, "--method", help="HTTP method (default POST with a body, else GET)."),
    body: Path | None = typer.Option(None, "--body", help="Request body from FILE."),
    json_body: str | None = typer.Option(None, "--json-body", help="Request body as JSON text."),
    samples: int = typer.Option(1, "--samples", min=1, max=1_000_000, help="Samples per request in the default body."),
    encoding: str = typer.Option(
        "auto", "--encoding", help="Default body: json | binary (tensor) | auto (binary for large samples: images)."
    ),
    header: list[str] = typer.Option([], "--header", "-H", help="Extra header 'Name: value' (repeatable)."),
    token: str | None = typer.Option(None, "--token", envvar="RIGHTSIZE_TOKEN", help="Bearer token."),
    generate: bool = typer.Option(
        False, "--generate", help="Open loop against a generation server (serve --generate): TTFT and TPOT."
    ),
    prompt_tokens: str | None = typer.Option(
        None, "--prompt-tokens", help="--generate: prompt tokens, N or LO-HI [default: 64]."
    ),
    output_tokens: str | None = typer.Option(
        None, "--output-tokens", help="--generate: new tokens, N or LO-HI [default: 32]."
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not save the result in the store."),
    store: Path | None = STORE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Load-test URL open-loop (--rate), closed-loop (--concurrency) or find the SLO knee (--find-knee)."""
    from rightsize.loadgen import (
        ENCODINGS,
        ClosedLoopConfig,
        OpenLoopConfig,
        event_loop_name,
        find_knee_open_loop,
        run_closed_loop,
        run_open_loop,
    )

    for name, value, low, high, low_open in (
        ("--rate", rate, 0.0, 1e6, True),
        ("--duration", duration, 0.0, 86_400.0, True),
        ("--timeout-s", timeout_s, 0.0, 3_600.0, True),
        ("--slo-ms", slo_ms, 0.0, 3_600_000.0, True),
        ("--warmup-s", warmup_s, 0.0, 3_600.0, False),
        ("--max-lag-ms", max_lag_ms, 0.0, 3_600_000.0, False),
        ("--slo-p95", slo_p95, 0.0, 3_600_000.0, True),
        ("--start-rate", start_rate, 0.0, 1e6, True),
        ("--tolerance", tolerance, 0.0, 1.0, True),
    ):
        check_finite(name, value, low, high, low_open)
    modes = [m for m, on in (("--rate", rate is not None), ("--concurrency", concurrency is not None)) if on]
    if generate and find_knee:  # before --slo-p95's checks: the knee search is what --generate cannot run
        raise SpecError("--find-knee", "the knee search is for a prediction server; with --generate give --rate R")
    if find_knee:
        if slo_p95 is None or slo_p95 <= 0:
            raise SpecError("--slo-p95", "--find-knee needs a p95 bound in ms, e.g. --slo-p95 50")
        if concurrency is not None:
            raise SpecError("--concurrency", "the knee search runs open loop; drop --concurrency")
    elif len(modes) != 1:
        raise SpecError("--rate", "give exactly one of --rate R (open loop) or --concurrency N (closed loop)")
    if rate is not None and rate <= 0:
        raise SpecError("--rate", f"must be > 0, got {rate}")
    if encoding not in ENCODINGS:
        raise SpecError("--encoding", f"must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    if method is not None:  # `--method FOO` had been sent, answered 400 and stored as a load test
        if method.upper() not in HTTP_METHODS:
            raise SpecError("--method", f"{short(method)} is not an HTTP method; give one of {', '.join(HTTP_METHODS)}")
        method = method.upper()
    if arrival not in ("poisson", "constant"):
        raise SpecError("--arrival", f"must be poisson or constant, got {arrival!r}")
    if timeout_s <= 0:
        raise SpecError("--timeout-s", f"must be > 0, got {timeout_s}")
    if duration is not None and duration <= 0:
        raise SpecError("--duration", f"must be > 0, got {duration}")
    if duration is None and requests is None:
        duration = 5.0 if find_knee else 10.0
    if duration is not None and warmup_s >= duration:
        raise SpecError("--warmup-s", f"{warmup_s:g} s leaves nothing of the {duration:g} s run to record; make it "
                        "shorter than --duration")  # fmt: skip
    if rate is not None and requests is not None and warmup_s > 0 and warmup_s >= requests / rate:
        raise SpecError("--warmup-s", f"{warmup_s:g} s is past the ~{requests / rate:g} s that {requests} requests "
                        f"take at {rate:g}/s: nothing would be recorded; make it shorter, or send more with "
                        "--requests")  # fmt: skip
    if rate is not None and not find_knee and duration is not None and requests is None and rate * duration < 1:
        # the schedule would still send one request, stretching the run to 1/rate seconds (a day at 1e-5/s)
        raise SpecError("--rate", f"{rate:g}/s for {duration:g} s schedules no request; raise --rate or --duration "
                        "so that rate x duration >= 1")  # fmt: skip
    if rate is not None and not find_knee:  # past the cap: a SpecError before any connection is tried
        from rightsize.loadgen.schedule import schedule_size

        schedule_size(rate, duration_s=duration, requests=requests)
    only = {  # options of one kind of load only: refused rather than ignored
        "--samples": samples != 1 or given(ctx, "samples"), "--body": body is not None,
        "--json-body": json_body is not None, "--method": method is not None,
        "--encoding": encoding != "auto" or given(ctx, "encoding"), "--header": bool(header),
        "--arrival": arrival != "poisson" or given(ctx, "arrival"), "--slo-p95": slo_p95 is not None,
    }  # fmt: skip
    if generate and (flag := next((f for f, on in only.items() if on), None)):
        raise SpecError(flag, "only applies to a prediction server's load test; drop it with --generate (which "
                        "sends Poisson token requests: --prompt-tokens, --output-tokens)")  # fmt: skip
    if not generate and (
        flag := next(
            (f for f, v in (("--prompt-tokens", prompt_tokens), ("--output-tokens", output_tokens)) if v is not None),
            None,
        )
    ):
        raise SpecError(flag, "only applies with --generate (a generation server's load test)")  # fmt: skip
    if generate:
        if rate is None or find_knee:
            raise SpecError("--rate", "--generate runs open loop: give --rate R (and no --find-knee)")
        _generate_load(url, rate, duration, requests, seed, prompt_tokens or "64", output_tokens or "32", timeout_s,
                       warmup_s, store=None if no_store else store, save=not no_store, as_json=as_json,
                       token=token)  # fmt: skip
        return

    target = build_target(
        url, method=method, body=body, json_body=json_body, headers=header, token=token, samples=samples,
        encoding=encoding, timeout_s=timeout_s,
    )  # fmt: skip
    loop_name = event_loop_name()

    payload: dict[str, Any]
    if find_knee:
        assert slo_p95 is not None
        config = OpenLoopConfig(
            rate_per_s=start_rate,
            duration_s=duration,
            requests=requests,
            arrival=arrival,  # type: ignore[arg-type]  # checked above
            connections=connections,
            timeout_s=timeout_s,
            slo_ms=slo_ms if slo_ms is not None else slo_p95,
            warmup_s=warmup_s,
            max_lag_ms=max_lag_ms,
            seed=seed,
        )

        def on_step(step: Any) -> None:
            verdict = "meets" if step.meets_slo else f"fails ({step.reason})"
            err_console.print(f"  {step.rate_per_s:10.1f}/s: {verdict}")

        err_console.print(f"knee search on {target.url}, SLO p95 <= {slo_p95:g} ms ({loop_name})")
        knee = find_knee_open_loop(
            target, config, slo_p95, start_rate_per_s=start_rate, tolerance=tolerance, max_steps=max_steps,
            confirm_failures=confirm, on_step=on_step,
        )  # fmt: skip
        payload = {"kind": "loadtest-knee", "event_loop": loop_name, "knee": knee.to_dict()}
        text = knee.render()
        failed = all(not s.result.valid for s in knee.steps)
    else:
        run: Any
        if rate is not None:
            err_console.print(f"open loop on {target.url}: {rate:g}/s {arrival} ({loop_name})")
            run = partial(
                run_open_loop,
                target,
                OpenLoopConfig(
                    rate_per_s=rate,
                    duration_s=duration,
                    requests=requests,
                    arrival=arrival,  # type: ignore[arg-type]
                    connections=connections,
                    timeout_s=timeout_s,
                    slo_ms=slo_ms,
                    warmup_s=warmup_s,
                    max_lag_ms=max_lag_ms,
                    seed=seed,
                ),
            )
        else:
            assert concurrency is not None
            err_console.print(f"closed loop on {target.url}: {concurrency} users ({loop_name})")
            run = partial(
                run_closed_loop,
                target,
                ClosedLoopConfig(
                    concurrency=concurrency,
                    duration_s=duration,
                    requests=requests,
                    timeout_s=timeout_s,
                    slo_ms=slo_ms,
                    warmup_s=warmup_s,
                ),
            )
        with (watch := watching_others(target.host, target.port)):
            result = run()
        payload = {"kind": "loadtest", "event_loop": loop_name, **result.to_dict(), **busy_payload(watch)}
        text = result.render()
        failed = not result.valid
        _hint_unauthorized(result.status_counts, token)

    artifact_id = None if no_store else store_payload(payload, store)
    payload["artifact_id"] = artifact_id
    say_busy(payload)
    if as_json:
        emit_json(payload)
    else:
        typer.echo(text)
        if artifact_id:
            err_console.print(f"stored as artifact {artifact_id}")
    if failed:
        raise typer.Exit(1)


def _token_range(flag: str, text: str) -> tuple[int, int]:
    lo, dash, hi = text.partition("-")
    try:
        if dash and not hi:  # "10-": a range missing its end
            raise ValueError
        a, b = int(lo), int(hi or lo)
    except ValueError:
        raise SpecError(flag, f"must be N or LO-HI token counts, e.g. 64 or 32-256; got {text!r}") from None
    if not 1 <= a <= b <= 1_000_000:
        raise SpecError(flag, f"needs 1 <= LO <= HI <= 1000000, got {text!r}")
    return a, b


def _generate_load(
    url: str, rate: float, duration: float | None, requests: int | None, seed: int, prompt: str, output: str,
    timeout_s: float, warmup_s: float, *, store: Path | None, save: bool, as_json: bool, token: str | None = None,
) -> None:  # fmt: skip
    """``--generate``: a fixed Poisson schedule of generation requests, TTFT/TPOT each (rightsize.llm.loadgen)."""
    import numpy as np

    from rightsize.llm.loadgen import run_generation_load
    from rightsize.loadgen.schedule import arrival_offsets_s
    from rightsize.loadgen.target import split_http_url

    (p_lo, p_hi), (o_lo, o_hi) = _token_range("--prompt-tokens", prompt), _token_range("--output-tokens", output)
    example = "http://127.0.0.1:8000 (a generation server: rightsize serve MODEL --generate)"
    parts, host, port = split_http_url(url, example)
    url = parts.geturl()  # "host:port" alone read as http://host:port
    check_reachable(host, port)
    offsets = arrival_offsets_s(rate, duration_s=duration, requests=requests, seed=seed)
    rng = np.random.default_rng(seed + 1)
    prompts, outputs = rng.integers(p_lo, p_hi + 1, offsets.size), rng.integers(o_lo, o_hi + 1, offsets.size)
    err_console.print(f"generation load on {url}: {rate:g}/s poisson, {offsets.size} requests")
    with (watch := watching_others(host, port)):
        result = run_generation_load(url, offsets, prompts, outputs, timeout_s=timeout_s, seed=seed, token=token)
    summary = result.summary(record_from_s=warmup_s)
    payload = {"kind": "loadtest-generate", "url": url, "rate_per_s": rate, "prompt_tokens": [p_lo, p_hi],
               "output_tokens": [o_lo, o_hi], **summary, **busy_payload(watch)}  # fmt: skip
    payload["artifact_id"] = store_payload(payload, store) if save else None
    say_busy(payload)
    _hint_unauthorized(summary["statuses"], token)
    if as_json:
        emit_json(payload)
    else:
        t, o = summary["ttft_ms"], summary["tpot_ms"]
        valid = "VALID" if summary["valid"] else "INVALID"
        kept = f", recorded {summary['recorded']} after the {warmup_s:g} s warm-up" if warmup_s > 0 else ""
        statuses = summary["statuses"].items()  # "200: 30" had printed as Python's dict {'200': 30}
        codes = ", ".join(f"{n} x HTTP {c}" if c != "0" else f"{n} with no reply" for c, n in statuses)
        lines = [f"sent {summary['sent']}, answered {summary['answered']} ({codes}){kept}, "
                 f"send lag p99 {summary['send_lag_p99_ms']:.1f} ms, {valid}"]  # fmt: skip
        if t:
            lines.append(f"TTFT ms  p50 {t['p50']:.1f}  p90 {t['p90']:.1f}  p95 {t['p95']:.1f}  p99 {t['p99']:.1f}")
        if o:
            lines.append(f"TPOT ms  p50 {o['p50']:.2f}  p90 {o['p90']:.2f}  p95 {o['p95']:.2f}  p99 {o['p99']:.2f}")
        lines.append(f"output tokens/s {summary['output_tokens_per_s']:.1f}")
        typer.echo("\n".join(lines))
    if not summary["valid"]:
        for why in _invalid_reasons(summary, timeout_s):
            err_console.print(f"invalid: {why}", highlight=False)
        raise typer.Exit(1)


def _invalid_reasons(summary: dict[str, Any], timeout_s: float) -> list[str]:
    """Why a generation run is invalid, one line each, with what to change (the percentiles cover answered requests
    only, so every unanswered one hides a slow tail)."""
    from rightsize.llm.loadgen import MAX_SEND_LAG_MS

    out = []
    for error, n in sorted(summary.get("errors", {}).items(), key=lambda kv: -kv[1]):
        if error.startswith("TimeoutError"):
            out.append(f"{n} requests got no complete reply within --timeout-s {timeout_s:g} s (overload, or replies "
                       "longer than that); the TTFT/TPOT percentiles leave them out and understate the tail: raise "
                       "--timeout-s, or lower --rate")  # fmt: skip
        else:
            out.append(f"{n} requests failed: {error}")
    if (streamless := summary["statuses"].get("200", 0) - summary["answered"]) > 0:  # a 200 with no token events
        out.append(f"{streamless} requests answered 200 with no token stream: the URL is not a generation server "
                   "(POST /v1/generate, server-sent events); point it at `rightsize serve MODEL "
                   "--generate`")  # fmt: skip
    if summary.get("answered") and summary.get("recorded") == 0:
        out.append("every answered request was intended within --warmup-s: nothing was recorded; shorten "
                   "--warmup-s, or send for longer (--requests, --duration)")  # fmt: skip
    if n503 := summary["statuses"].get("503"):
        out.append(f"{n503} requests answered 503: the server's queue was full (overload): lower --rate")
    for status, why in sorted(summary.get("refusals", {}).items()):
        if status not in ("401", "503"):  # a request the server would not take: what it said names what to change
            where = (" (no POST /v1/generate at this URL: a prediction server, `rightsize serve MODEL` without "
                     "--generate, answers so; give a generation server's base URL, http://HOST:PORT)")  # fmt: skip
            out.append(f"{summary['statuses'].get(status, 0)} requests answered {status}: {why}"
                       f"{where if status in ('404', '405') else ''}")  # fmt: skip
    lag = summary.get("send_lag_p99_ms", 0.0)
    if not math.isnan(lag) and lag > MAX_SEND_LAG_MS:  # NaN when nothing was sent
        out.append(f"send lag p99 {lag:.1f} ms > {MAX_SEND_LAG_MS:g} ms: this machine could not keep the schedule")
    return out


def _hint_unauthorized(statuses: dict[str, int], token: str | None) -> None:
    """One line on stderr when the server refused requests for their bearer token (HTTP 401)."""
    if statuses.get("401"):
        fix = "check the token you gave" if token else "give it with --token (or RIGHTSIZE_TOKEN)"
        err_console.print(f"{statuses['401']} requests answered 401: the server wants its bearer token; {fix}")


def register(app: typer.Typer) -> None:
    app.command("loadtest")(loadtest)
