"""Address parsing and the node fingerprint's instance-type tag (no cluster needed)."""

from __future__ import annotations

import pytest

from rightsize.cluster.fingerprint import tag_env
from rightsize.cluster.session import host_of, is_loopback
from rightsize.profile import Environment


@pytest.mark.parametrize(
    ("address", "host", "loopback"),
    [("127.0.0.1:6379", "127.0.0.1", True), ("localhost:1", "localhost", True), ("[::1]:6379", "::1", True),
     ("10.0.0.5:6379", "10.0.0.5", False), ("ray://head.example:10001", "head.example", False),
     ("auto", "auto", False)],
)  # fmt: skip
def test_host_and_loopback(address: str, host: str, loopback: bool) -> None:
    assert host_of(address) == host and is_loopback(address) is loopback


def test_instance_type_changes_the_id_and_keeps_the_machine() -> None:
    env = Environment("abc123abc123", cpu_model="X")
    assert tag_env(env, None) == env  # unmapped nodes share the in-process fingerprint (and its stored results)
    a, b = tag_env(env, "g5.xlarge"), tag_env(env, "g6.xlarge")
    assert a.id != b.id and a.id != env.id and len(a.id) == 12
    assert a.hardware_id == b.hardware_id == env.id and a.instance_type == "g5.xlarge"
    assert tag_env(env, "g5.xlarge").id == a.id  # stable across runs: results are reused


def test_an_address_nothing_listens_on_fails_in_seconds() -> None:
    import socket
    import time

    import pytest

    from rightsize.cluster.session import probe
    from rightsize.errors import RunFailedError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(RunFailedError, match="nothing answers"):
        probe(f"127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 5
    probe("auto")  # no port: left to Ray
    from rightsize.errors import SpecError

    for bad in ("bogus", "127.0.0.1:99999", ":6379", "ray://h"):  # Ray's answer: a ValueError traceback
        with pytest.raises(SpecError, match=r"^--ray: .* is not a cluster address; pass auto, HOST:PORT"):
            probe(bad)


def test_what_is_printed_to_fd_1_inside_a_session_goes_to_stderr() -> None:
    import subprocess
    import sys

    code = (
        "import os\nfrom rightsize.cluster.session import _stdout_to_stderr\n"
        "with _stdout_to_stderr():\n    os.write(1, b'raylet noise\\n')\n    os.system('echo child noise')\n"
        "print('{\"ok\": true}')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout == '{"ok": true}\n'
    assert "raylet noise" in r.stderr and "child noise" in r.stderr
