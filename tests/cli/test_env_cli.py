"""``rightsize env``: the catalog CPU family it names, and how it matched."""

from __future__ import annotations

import json

import pytest
from cli_kit import run_cli

from rightsize.profile import Environment

ZEN4_VM = {"id": "zen4-vm", "cpu_model": "AMD EPYC", "cpu_signature": "25/17", "isa": ["avx2", "fma"],
           "physical_cores": 2, "logical_cores": 2}  # fmt: skip


def _fake(monkeypatch: pytest.MonkeyPatch, env: dict[str, object]) -> None:
    import rightsize.measure.env as env_mod

    monkeypatch.setattr(env_mod, "fingerprint", lambda: Environment.from_dict(env))


def test_env_says_the_family_came_from_the_cpu_numbers_and_the_isa_the_vm_hides(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dev VM had printed "catalog CPU family amd-rome": its model name says only "AMD EPYC"."""
    _fake(monkeypatch, ZEN4_VM)
    code, out, _ = run_cli(["env"], capsys)
    assert code == 0
    assert "CPU family amd-genoa (from cpu family 25 model 17; AVX-512 hidden here: avx2, fma kernels)" in out
    code, out, _ = run_cli(["env", "--json"], capsys)
    doc = json.loads(out)
    assert doc["catalog_cpu_family"] == "amd-genoa" and doc["catalog_cpu_matched_by"] == "signature"
    assert doc["catalog_cpu_isa_hidden"] == ["avx512f", "avx512_vnni", "avx512_bf16"]
    assert doc["cpu_signature"] == "25/17"


def test_env_names_a_family_matched_by_its_sku_plainly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake(monkeypatch, {**ZEN4_VM, "cpu_model": "AMD EPYC 9R14", "isa": ["avx2", "fma", "avx512f", "avx512_vnni",
                                                                        "avx512_bf16"]})  # fmt: skip
    code, out, _ = run_cli(["env"], capsys)
    assert code == 0 and "CPU family amd-genoa\n" in out.replace(" \n", "\n")
