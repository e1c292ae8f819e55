"""``rightsize serve MODEL``: a micro-batching HTTP inference server (see rightsize.serve and docs/serving.md)."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import typer

from rightsize.cli._common import JSON_OPTION, check_token, emit_json, err_console, given
from rightsize.errors import SpecError
from rightsize.serve.config import MAX_READ_TIMEOUT_S, READ_TIMEOUT_S


def serve_command(
    ctx: typer.Context,
    model: str = typer.Argument(
        ...,
        help="Zoo name (`rightsize models`), hf:CONFIG_DIR, hf:TYPE, model.onnx, model.pt or module:factory; "
        "ort:MODEL / ov:MODEL on ONNX Runtime / OpenVINO (a plan's engine: ONNX Runtime serves as ort:MODEL).",
    ),
    tiny: bool = typer.Option(False, "--tiny", help="Serve the tiny variant (tests, demos)."),
    seq: int | None = typer.Option(None, "--seq", min=1, max=1_000_000, help="Sequence length of token models."),
    image: int | None = typer.Option(None, "--image", min=8, max=8192, help="Image size of vision models."),
    shape: str | None = typer.Option(None, "--shape", help="Per-sample shape of a user model, e.g. 3,224,224."),
    vocab: int | None = typer.Option(
        None,
        "--vocab",
        min=2,
        max=10_000_000,
        help="A user model takes int64 token ids below this (factory / TorchScript).",
    ),
    precision: str = typer.Option(
        "fp32", "--precision", help="fp32 | bf16 | int8 (int8, CPU: dynamic quantisation; conv nets static)."
    ),
    max_batch: int = typer.Option(
        8, "--max-batch", min=1, max=65_536, help="Most samples per batch (and per request)."
    ),
    max_wait_ms: float = typer.Option(
        2.0,
        "--max-wait-ms",
        min=0.0,
        max=60_000.0,
        help="A partial batch waits until the oldest request's arrival + this.",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, max=1024, help="CPU worker processes, each with its own model copy (default: 1)."
    ),
    threads: int | None = typer.Option(None, "--threads", min=1, max=4096, help="Intra-op threads per CPU worker."),
    router: str | None = typer.Option(None, "--router", help="cpu | gpu | size | hybrid (default: hybrid with CUDA)."),
    crossover: int | None = typer.Option(
        None, "--crossover", min=1, max=65_536, help="size router: CPU below this batch size."
    ),
    lane: list[str] | None = typer.Option(
        None,
        "--lane",
        help="A CPU pool NAME=WORKERSxTHREADS[:PRECISION]; repeat it, the first takes the smallest requests (e.g. "
        "--lane small=1x1 --lane large=1x1:int8 --router size --crossover 32: a size split with no GPU).",
    ),
    queue_size: int | None = typer.Option(
        None,
        "--queue-size",
        min=1,
        max=10_000_000,
        help="Samples waiting per pool before 503 (256); --generate: requests waiting before 503 (64).",
    ),
    slo_ms: float | None = typer.Option(None, "--slo-ms", help="Latency SLO: refuse (503) what would miss it."),
    max_queue_batches: float = typer.Option(
        2.0,
        "--max-queue-batches",
        help="Without --slo-ms: refuse (503) what would wait more than this many batch times (0: off).",
    ),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port (0: a free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; 0.0.0.0 exposes it to the network."),
    token: str | None = typer.Option(None, "--token", envvar="RIGHTSIZE_TOKEN", help="Require this bearer token."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
    read_timeout_s: float = typer.Option(
        READ_TIMEOUT_S,
        "--read-timeout-s",
        min=0.001,
        max=MAX_READ_TIMEOUT_S,
        help="A request's headers and body must arrive within this many seconds (408 after); both servers.",
    ),
    generate: bool = typer.Option(
        False, "--generate", help="Serve token generation (continuous batching, streamed) for gpt2 or llama-1b."
    ),
    size: str | None = typer.Option(None, "--size", help="--generate: tiny | small | full (default small)."),
    max_seqs: int | None = typer.Option(
        None, "--max-seqs", min=1, max=65_536, help="--generate: most sequences at once (16)."
    ),
    kv_tokens: int | None = typer.Option(
        None,
        "--kv-tokens",
        min=16,
        max=1_000_000_000,
        help="--generate: KV cache capacity in tokens over all sequences (8192).",
    ),
    max_prompt_tokens: int | None = typer.Option(
        None, "--max-prompt-tokens", min=1, max=1_000_000, help="--generate: longest prompt accepted (512; 413 above)."
    ),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", min=1, max=1_000_000, help="--generate: most tokens one request may ask for (512)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve MODEL over HTTP with micro-batching; Ctrl-C drains the queue and stops.

    With --generate, serve token generation instead (POST /v1/generate, see rightsize.llm.server)."""
    if log_level.lower() not in LOG_LEVELS:  # uvicorn's own check comes after the model has loaded, as a traceback
        raise SpecError("--log-level", f"must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    if generate:
        # options of the prediction server, set away from their defaults: refused, not silently dropped
        _refuse_set(ctx, "only applies to a prediction server, not to --generate; drop it", seq=seq, image=image,
                    shape=shape, vocab=vocab, precision=precision, max_batch=max_batch, max_wait_ms=max_wait_ms,
                    workers=workers, router=router, crossover=crossover, lane=lane or None,
                    slo_ms=slo_ms, max_queue_batches=max_queue_batches)  # fmt: skip
        _check_access(host, port, token)
        limits = {"max_seqs": max_seqs, "kv_tokens": kv_tokens, "max_queue": queue_size,
                  "max_prompt_tokens": max_prompt_tokens, "max_new_tokens": max_new_tokens,
                  "threads": threads}  # fmt: skip
        _serve_generate(model, "tiny" if tiny else size or "small", limits, host, port,
                        log_level, as_json, token, read_timeout_s)  # fmt: skip
        return
    _refuse_set(ctx, "only applies to a generation server; add --generate (or drop the option)", size=size,
                max_seqs=max_seqs, kv_tokens=kv_tokens, max_prompt_tokens=max_prompt_tokens,
                max_new_tokens=max_new_tokens)  # fmt: skip
    from rightsize.models.user_input import user_input_options
    from rightsize.serve.config import ServerConfig, cpu_cores, parse_lanes

    pools = parse_lanes(lane, cpu_cores()) if lane else None
    if pools is not None and (workers is not None or threads is not None):
        raise SpecError("--lane", "gives each lane's workers and threads; drop --workers / --threads")
    if pools is not None and len(pools) == 1:
        raise SpecError("--lane", "needs two or more lanes (one pool is --workers / --threads)")
    dims, vocab = user_input_options(model, shape, vocab, seq, image)
    sample_shape = tuple(dims) if dims else None
    config = ServerConfig(
        model=model,
        tiny=tiny,
        seq_len=seq,
        image_size=image,
        sample_shape=sample_shape,
        input_dtype="int64" if vocab else None,
        input_max=vocab,
        precision=precision,  # type: ignore[arg-type]  # checked in ServerConfig
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        workers=workers,
        threads=threads,
        router=router,  # type: ignore[arg-type]
        crossover_batch=crossover,
        pools=pools,
        queue_size=max(queue_size or ServerConfig.queue_size, max_batch),
        slo_ms=slo_ms,
        max_queue_batches=max_queue_batches,
        host=host,
        port=port,
        token=token,
        log_level=log_level,
        read_timeout_s=read_timeout_s,
    )
    _check_access(host, port, token)
    from rightsize.serve.config import cuda_available, resolve_router

    if crossover is not None and (routed := resolve_router(config, cuda_available())) in ("cpu", "gpu"):
        raise SpecError("--crossover", f"steers the size and hybrid routers; with router {routed} one pool serves "
                        "every request (drop it, or add two --lane pools and --router size)")  # fmt: skip
    if note := hybrid_note(router, pools is not None, workers, threads, cuda_available()):
        err_console.print(note)
    err_console.print(f"rightsize serve: loading {model}{' (tiny)' if tiny else ''} …")

    def on_ready(service: Any) -> None:
        info = service.info()
        if as_json:
            emit_json(info)
        else:
            # each pool's threads and precision too: an int8 lane had read as the fp32 one beside it
            pools = ", ".join(f"{p['name']}={p['device']}×{p['workers']}"
                              + (f" {p['threads']} thr" if p.get("threads") else "") + f" {p['precision']}"
                              for p in info["pools"])  # fmt: skip
            err_console.print(
                f"serving {model} on {info['url']}  (pools {pools}, router {info['router']}, max batch "
                f"{max_batch}, max wait {max_wait_ms:g} ms; docs at /docs, metrics at /metrics)"
            )
        sys.stderr.flush()

    from rightsize.serve.server import serve

    serve(config, on_ready)


def _refuse_set(ctx: typer.Context, problem: str, **values: Any) -> None:
    """A SpecError naming the first of ``values`` (serve_command's parameters by name) given on the command line or
    set away from its default (read from serve_command's own signature, so the two cannot drift apart)."""
    params = inspect.signature(serve_command).parameters
    for name, value in values.items():
        option = params[name].default  # a typer OptionInfo
        if value is not None and (value != option.default or given(ctx, name)):
            raise SpecError(option.param_decls[0], problem)


_FLAGS = {"max_queue": "--queue-size"}  # EngineConfig fields whose flag is not their name


def hybrid_note(
    router: str | None, lanes: bool, workers: int | None, threads: int | None, has_cuda: bool
) -> str | None:
    """Where CUDA is, the default router is hybrid and a GPU pool joins: said when --workers / --threads asked for a
    CPU layout (a served check of a CPU plan on a lent H200 was answered by its GPU, 2026-11-27)."""
    if router is not None or lanes or not has_cuda or (workers is None and threads is None):
        return None
    return ("note: CUDA is here, so the router is hybrid (the default) and a GPU pool serves beside the CPU "
            "workers; --router cpu serves the CPU layout alone")  # fmt: skip


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's (uvicorn.config.LOG_LEVELS)


def _check_access(host: str, port: int, token: str | None) -> None:
    """Refuse an empty token (it served with no auth, silently: `--token "$RIGHTSIZE_TOKEN"` with the variable
    unset) and an address this machine cannot listen on, before the model loads (`--host 999.1.1.1` had warned
    about its token, loaded the model, then failed); warn when a reachable address serves without a token."""
    from rightsize.hosts import check_host
    from rightsize.serve.server import bind_socket

    check_token(token)
    check_host(host)
    bind_socket(host, port).close()  # SpecError naming --host or --port; the server binds again once loaded
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        err_console.print(f"warning: serving on {host} without --token; anyone who can reach it can use it")


def _serve_generate(
    model: str,
    size: str,
    limits: dict[str, int | None],
    host: str,
    port: int,
    log_level: str,
    as_json: bool,
    token: str | None,
    read_timeout_s: float,
) -> None:
    """``rightsize serve MODEL --generate``: the continuous-batching generation server (``limits``: EngineConfig
    fields the user set; ``token``: the bearer token requests need)."""
    from rightsize.llm.engine import EngineConfig

    try:
        cfg = EngineConfig(model=model, size=size, **{k: v for k, v in limits.items() if v is not None})
    except SpecError as exc:  # name the flag the user typed
        flag = exc.field if exc.field == "model" else _FLAGS.get(exc.field, "--" + exc.field.replace("_", "-"))
        raise SpecError(flag, exc.problem) from None
    from rightsize.llm.decoder import lm_config, max_positions

    if (longest := cfg.max_prompt_tokens + cfg.max_new_tokens) > (room := max_positions(lm_config(model, size))):
        raise SpecError("--max-prompt-tokens", f"--max-prompt-tokens {cfg.max_prompt_tokens} + --max-new-tokens "
                        f"{cfg.max_new_tokens} = {longest} is past {model} ({size})'s {room} positions; lower "
                        "them")  # fmt: skip
    err_console.print(f"rightsize serve --generate: loading {model} ({size}) …")

    def on_ready(info: dict[str, Any]) -> None:
        if as_json:
            emit_json(info)
        else:
            err_console.print(
                f"serving {model} ({size}) generation on {info['url']}  (max seqs {info['max_seqs']}, KV "
                f"{info['kv_tokens']} tokens; POST /v1/generate, metrics at /metrics)"
            )
        sys.stderr.flush()

    from rightsize.llm.server import serve_generate

    serve_generate(cfg, host, port, on_ready, log_level, token or None, read_timeout_s=read_timeout_s)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
