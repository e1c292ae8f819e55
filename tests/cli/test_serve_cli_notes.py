"""rightsize serve's notes about what it will run (no server is started here)."""

from __future__ import annotations

import socket

import pytest
from cli_kit import run_cli

from rightsize.cli.serve import hybrid_note
from rightsize.errors import SpecError
from rightsize.serve.server import bind_socket


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


def test_a_bad_log_level_is_refused_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    """uvicorn's own check came after the model had loaded, as a KeyError traceback."""
    rc, out, err = run_cli(["serve", "distilbert", "--tiny", "--log-level", "bogus"], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --log-level: must be one of critical, error, warning")
    assert "loading" not in err


def test_a_taken_port_or_a_foreign_host_names_the_option_to_change() -> None:
    """Both were exit 1 ('pick another --port' for a bad host too); they are the option's fault: exit 2."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SpecError, match=rf"^--port: cannot listen on 127\.0\.0\.1:{port} \("):
            bind_socket("127.0.0.1", port)
    with pytest.raises(SpecError, match=r"^--host: cannot listen on '999\.1\.1\.1'"):
        bind_socket("999.1.1.1", 0)


def test_the_bound_socket_takes_a_connection_before_the_server_starts() -> None:
    """The ready line is printed from the lifespan startup, before uvicorn listens: a client connecting on it had
    been refused (a generation-server test's first connect, ECONNREFUSED). The socket listens once bound."""
    sock = bind_socket("127.0.0.1", 0)
    try:
        with socket.create_connection(sock.getsockname()[:2], timeout=5):
            pass  # queued in the backlog, accepted once the server runs
    finally:
        sock.close()


@pytest.mark.parametrize("generate", [False, True])
def test_an_empty_token_is_refused_not_served_without_auth(capsys: pytest.CaptureFixture[str], generate: bool) -> None:
    """`--token "$RIGHTSIZE_TOKEN"` with the variable unset served every request, silently."""
    argv = ["serve", "gpt2", "--generate", "--size", "tiny"] if generate else ["serve", "distilbert", "--tiny"]
    rc, out, err = run_cli([*argv, "--token", " "], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --token: is empty (an unset variable?)")
    assert "loading" not in err


def test_the_dashboard_refuses_an_empty_token_too(capsys: pytest.CaptureFixture[str]) -> None:
    """It started and locked every request out (401), while an empty Authorization header got in."""
    rc, out, err = run_cli(["dashboard", "--port", "0", "--token", ""], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --token: is empty (an unset variable?)")


def test_a_crossover_no_router_uses_is_refused_before_the_model_loads(capsys: pytest.CaptureFixture[str]) -> None:
    """--crossover 32 with one pool was accepted and never used."""
    rc, out, err = run_cli(["serve", "distilbert", "--tiny", "--router", "cpu", "--crossover", "32"], capsys)
    assert (rc, out) == (2, "") and err.startswith(
        "error: --crossover: steers the size and hybrid routers; with router cpu"
    )
    assert "loading" not in err


@pytest.mark.parametrize("generate", [False, True])
def test_an_address_it_cannot_listen_on_is_refused_before_the_model_loads(
    capsys: pytest.CaptureFixture[str], generate: bool
) -> None:
    """`--host 999.1.1.1` had warned about serving it without a token, loaded the model, then failed; a taken port
    likewise failed only once the model had loaded."""
    argv = ["serve", "gpt2", "--generate", "--size", "tiny"] if generate else ["serve", "distilbert", "--tiny"]
    rc, out, err = run_cli([*argv, "--host", "999.1.1.1"], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --host: cannot listen on '999.1.1.1'")
    assert "loading" not in err and "warning" not in err
    rc, out, err = run_cli([*argv, "--host", ""], capsys)  # an unset $HOST: it had served on every interface
    assert (rc, out) == (2, "") and err == (
        "error: --host: is empty (which would listen on every interface); give 127.0.0.1, or the address of one "
        "interface\n")  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        rc, out, err = run_cli([*argv, "--port", str(taken.getsockname()[1])], capsys)
    assert rc == 2 and err.startswith("error: --port: cannot listen on 127.0.0.1:") and "loading" not in err


def test_the_ready_line_names_each_pools_threads_and_precision(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--lane small=1x1 --lane large=1x1:int8` printed "pools small=cpu×1, large=cpu×1": the int8 lane unseen."""
    import rightsize.serve.server as server

    info = {"url": "http://127.0.0.1:1", "router": "size", "pools": [
        {"name": "small", "device": "cpu", "workers": 1, "threads": 1, "precision": "fp32"},
        {"name": "large", "device": "cpu", "workers": 1, "threads": 1, "precision": "int8"}]}  # fmt: skip
    monkeypatch.setattr(server, "serve", lambda cfg, on_ready: on_ready(type("S", (), {"info": lambda self: info})()))
    argv = ["serve", "distilbert", "--tiny", "--lane", "small=1x1", "--lane", "large=1x1:int8", "--router", "size",
            "--crossover", "8", "--port", "0"]  # fmt: skip
    rc, _, err = run_cli(argv, capsys)
    assert rc == 0 and "(pools small=cpu×1 1 thr fp32, large=cpu×1 1 thr int8, router size" in err, err
