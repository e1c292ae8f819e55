"""Address parsing and the node fingerprint's instance-type tag (no cluster needed)."""

from __future__ import annotations

import pytest

from rightsize.cluster.fingerprint import tag_env
from rightsize.cluster.session import host_of, is_loopback


@pytest.mark.parametrize(
    ("address", "host", "loopback"),
    [("127.0.0.1:6379", "127.0.0.1", True), ("localhost:1", "localhost", True), ("[::1]:6379", "::1", True),
     ("10.0.0.5:6379", "10.0.0.5", False), ("ray://head.example:10001", "head.example", False),
     ("auto", "auto", False)],
)  # fmt: skip
def test_host_and_loopback(address: str, host: str, loopback: bool) -> None:
    assert host_of(address) == host and is_loopback(address) is loopback


def test_instance_type_changes_the_id_and_keeps_the_machine() -> None:
    env = {"id": "abc123abc123", "cpu_model": "X"}
    assert tag_env(env, None) == env  # unmapped nodes share the in-process fingerprint (and its stored results)
    a, b = tag_env(env, "g5.xlarge"), tag_env(env, "g6.xlarge")
    assert a["id"] != b["id"] and a["id"] != env["id"] and len(a["id"]) == 12
    assert a["hardware_id"] == b["hardware_id"] == env["id"] and a["instance_type"] == "g5.xlarge"
    assert tag_env(env, "g5.xlarge")["id"] == a["id"]  # stable across runs: results are reused
