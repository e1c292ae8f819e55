from rightsize.measure.env import fingerprint


def test_fingerprint_is_stable_and_complete() -> None:
    a, b = fingerprint(), fingerprint()
    assert a.id == b.id and len(a.id) == 12
    assert a.cpu_model and a.isa and a.physical_cores >= 1
    assert a.ram_bytes > 2**30 and a.logical_cores >= 1
    assert type(a).from_dict(a.to_dict()) == a  # what the store keeps reads back the same


def test_driver_version_from_proprietary_and_open_kernel_modules() -> None:
    from rightsize.measure.env import nvidia_driver_version

    # /proc/driver/nvidia/version first lines; the open module's (seen on an H200 machine) once parsed as "for"
    assert (
        nvidia_driver_version(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
        )
        == "535.104.05"
    )
    assert (
        nvidia_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build")
        == "580.159.04"
    )
    assert nvidia_driver_version("garbage") is None
