from rightsize.measure.env import fingerprint


def test_fingerprint_is_stable_and_complete() -> None:
    a, b = fingerprint(), fingerprint()
    assert a["id"] == b["id"] and len(a["id"]) == 12
    for key in ("cpu_model", "physical_cores", "logical_cores", "isa", "ram_bytes", "gpus", "torch"):
        assert key in a
    assert a["ram_bytes"] > 2**30 and a["logical_cores"] >= 1
