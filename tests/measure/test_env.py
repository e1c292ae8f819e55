from rightsize.measure.env import fingerprint


def test_fingerprint_is_stable_and_complete() -> None:
    a, b = fingerprint(), fingerprint()
    assert a.id == b.id and len(a.id) == 12
    assert a.cpu_model and a.isa and a.physical_cores >= 1
    assert a.ram_bytes > 2**30 and a.logical_cores >= 1
    assert type(a).from_dict(a.to_dict()) == a  # what the store keeps reads back the same
