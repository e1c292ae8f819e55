import pytest

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


def test_cpu_signature_from_cpuinfo() -> None:
    from rightsize.measure.env import cpu_signature

    zen4_vm = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
    assert cpu_signature(zen4_vm) == "25/17"
    arm = "processor\t: 0\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
    assert cpu_signature(arm) == ""


def test_the_cpu_signature_is_recorded_and_leaves_the_environment_id_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The signature came after results were stored: in the id, every stored result of a machine would be measured
    again. An older fingerprint without it reads back with none."""
    import rightsize.measure.env as env_mod
    from rightsize.profile import Environment

    model, isa, _ = env_mod._cpuinfo()
    ids = {}
    for signature in ("25/17", ""):
        monkeypatch.setattr(env_mod, "_cpuinfo", lambda s=signature: (model, isa, s))
        fp = env_mod.fingerprint()
        assert fp.cpu_signature == signature and Environment.from_dict(fp.to_dict()) == fp
        assert ("cpu_signature" in fp.to_dict()) == bool(signature)
        ids[signature] = fp.id
    assert ids["25/17"] == ids[""]
    old = Environment.from_dict({"id": "old", "cpu_model": "AMD EPYC", "isa": ["avx2", "fma"]})
    assert old.cpu_signature == "" and "cpu_signature" not in old.to_dict()
