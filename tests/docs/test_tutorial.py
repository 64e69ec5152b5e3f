"""The tutorial's commands, run as written on the sample corpus (docs/tutorial.md).

Failed before this issue: the README's walk-through told users to run `duckdb -c ...`, and
no `duckdb` command is installed; nothing ran the documented commands."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"

# What the test does not run, and why; every other line of the page's bash blocks runs.
NOT_RUN = {
    "git clone": "the test runs inside the clone",
    "make install": "the test runs in the installed environment",
    ". .venv/bin/activate": "the test puts the environment's bin folder on PATH",
    "kohaku ui": "a server that runs until stopped (bench/serving/ui_smoke.py drives it)",
    "kohaku serve": "a server that runs until stopped (tests/serving drive it)",
}


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def commands(text: str) -> tuple[list[str], list[str]]:
    """(lines to run, lines left out) of the page's bash blocks, in page order."""
    run, skipped = [], []
    for block in blocks(text, "bash"):
        for line in block.splitlines():
            command = line.split("  #", 1)[0].strip()
            if not command:
                continue
            if any(command.startswith(prefix) for prefix in NOT_RUN):
                skipped.append(command)
            else:
                run.append(command)
    return run, skipped


def test_the_tutorial_lists_its_commands_and_leaves_out_only_the_install_and_servers() -> None:
    run, skipped = commands(TUTORIAL.read_text(encoding="utf-8"))
    assert run[:2] == ["kohaku sample-corpus my_docs", "ls my_docs"]
    assert any(c.startswith("kohaku ask ") for c in run)
    assert all(any(c.startswith(p) for p in NOT_RUN) for c in skipped)
    assert len(skipped) == len(NOT_RUN)  # each left-out line is one of these, once


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="the bundled LLM (the `llm` extra) is not installed"
)
def test_the_tutorial_runs_on_the_sample_corpus(tmp_path: Path) -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    run, _skipped = commands(text)
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOHAKU_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    # Each line echoed before it runs, so the output shows which command printed what.
    # The lake the tutorial builds uses the machine's one copy of the bundled model (joined
    # once per machine, as for every lake), not a 1.1 GB copy per run.
    script = "set -euo pipefail\n" + "".join(f"echo '$ {c}'\n{c}\n" for c in run)
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout
    assert done.returncode == 0, f"{out[-3000:]}\n{done.stderr[-3000:]}"
    # ls: the sample PDFs; index: every document, then nothing to redo; search: hits with pages
    listed = out.split("$ ls my_docs\n", 1)[1].split("$ ", 1)[0].split()
    assert len([f for f in listed if f.endswith(".pdf")]) >= 3
    summary = out.split("$ kohaku index --json\n", 1)[1].split("$ ", 1)[0].strip().splitlines()[-1]
    assert '"recomputed": 0' in summary or '"recomputed": []' in summary, summary
    search = out.split("$ kohaku search ", 1)[1].split("$ ", 1)[0]
    assert "page" in search.lower(), search
    ask = out.split("$ kohaku ask ", 1)[1].split("$ ", 1)[0]
    assert "[value:" in ask or "attempt" in ask, ask
    # The Python block, run with the environment the commands left (the lake they built).
    (python_block,) = blocks(text, "python")
    done = subprocess.run(
        [sys.executable, "-c", python_block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.strip().splitlines()) >= 1
