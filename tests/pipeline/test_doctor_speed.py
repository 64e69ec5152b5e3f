"""`kohaku doctor --speed` times the bundled model on this machine: the figure the docs'
timings are quoted with, so a user can find their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from kohaku_assets.cli import main as cli_main  # noqa: E402


def test_doctor_prints_this_machine_s_prefill_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli_main(["doctor", "--speed", "--lake", str(tmp_path / "lake")])
    out = capsys.readouterr().out
    assert re.search(r"^llama\.cpp CPU backend: \w+", out, re.MULTILINE), out
    found = re.search(r"prefill (\d+) tokens/s, generation about (\d+) tokens/s", out)
    assert found and int(found.group(1)) > 0 and int(found.group(2)) > 0, out
