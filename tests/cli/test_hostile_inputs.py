"""Hostile input found by probing the CLI: each gets one line naming the field and the fix, exit 2, in good time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_kit import run_cli


def _bomb(path: Path, levels: int = 8, width: int = 8) -> Path:
    text = "a0: &a0 [" + ",".join(['"lol"'] * 10) + "]\n"
    for i in range(1, levels + 1):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]\n"
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["plan", "bench", "validate", "pipeline"])
def test_an_alias_bomb_inside_the_alias_count_is_refused_at_once(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """406 bytes, 64 aliases: `plan` ran for minutes walking 200 million values."""
    t0 = time.perf_counter()
    code, _, err = run_cli([command, str(_bomb(tmp_path / "bomb.yaml"))], capsys)
    assert time.perf_counter() - t0 < 10.0  # a shared machine; it takes milliseconds
    assert code == 2
    assert err == "error: bomb.yaml: has YAML aliases (*name) that expand to 213,652,688 values (limit 100,000); " \
        "write the values out\n"  # fmt: skip


def test_serve_refuses_an_unknown_model_before_announcing_its_load(capsys: pytest.CaptureFixture[str]) -> None:
    """ "rightsize serve: loading bogusmodel …" came first, then the error: two lines for a typo."""
    code, out, err = run_cli(["serve", "bogusmodel", "--port", "0"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("error: model 'bogusmodel' is not in the zoo.") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("/nonexistent.pt", "error: model: no file '/nonexistent.pt'; give the path of your .onnx, TorchScript"),
        ("nonexistent_mod:factory", "error: model: cannot import module 'nonexistent_mod' (No module named"),
        ("os:system", "error: model: os:system needs arguments (command); a factory is called with none"),
    ],
)
def test_memory_names_the_models_problem_before_asking_for_shape(
    model: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each said "--shape: required for ..."; given --shape, the real problem came second."""
    code, _, err = run_cli(["memory", model], capsys)
    assert code == 2 and err.startswith(says) and err.count("\n") == 1


def test_dashboard_refuses_an_address_it_cannot_listen_on_before_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """ "warning: --host 999.999.1.1 exposes the results store…" came before the error that it could not listen."""
    code, out, err = run_cli(["dashboard", "--host", "999.999.1.1", "--port", "0"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("error: --host: cannot listen on '999.999.1.1' (") and err.count("\n") == 1


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_catalog_import_onto_a_directory_says_so_at_once(
    force: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "exists; pass --force", then with --force "cannot write (is a directory)": two tries for one mistake."""
    monkeypatch.chdir(tmp_path)
    Path("skypilot").mkdir()
    Path("out").mkdir()
    code, _, err = run_cli(["catalog", "import", "skypilot", "-o", "out", *force], capsys)
    assert code == 2
    assert err == "error: --output: cannot write 'out' (is a directory); name a file (in it, or beside it)\n"
