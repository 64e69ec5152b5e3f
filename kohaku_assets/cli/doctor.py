"""`kohaku doctor [--repair]`: what is wrong with a lake, and the fix, as a table."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.instance import fail_orphaned_runs, instance_for, orphaned_runs
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import run_index
from kohaku_rag.doctor import Finding, check_lake, repair_lake
from kohaku_rag.lake.lock import hold_lake
from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.cpu_verdicts import verdict_line
from kohaku_rag.llm.model_files import BUNDLED_FILE, bundled_model, machine_model_dir
from kohaku_rag.llm.model_process import ModelProcess

__all__ = ["add_parser", "cmd_doctor"]


def findings(settings: KohakuSettings) -> list[Finding]:
    """The lake's findings plus the Dagster runs its CLI processes left STARTED."""
    lake = settings.lake
    corpus = settings.corpus if settings.corpus.is_dir() else None
    found = check_lake(lake, corpus)
    if lake.dagster_home.exists():
        for run in orphaned_runs(instance_for(lake.root)):
            found.append(
                Finding(
                    "runs",
                    f"{run.job_name} {run.run_id[:8]}",
                    f"left STARTED by pid {run.tags.get('kohaku/pid')}, which ended",
                    "marked failed",
                    True,
                )
            )
    return found


def print_table(found: list[Finding], root: Path, out: Callable[[str], None] = print) -> None:
    """One row per finding, paths relative to the lake (`root`)."""
    if not found:
        out("the lake is healthy: every table reads, the indexes hold what the rows say, no run is stuck")
        return
    out(f"lake {root}:")
    prefix = f"{root}{os.sep}"
    rows = [("area", "subject", "problem", "fix")] + [
        (f.area, f.subject.removeprefix(prefix), f.problem, f.fix) for f in found
    ]
    widths = [min(max(len(r[i]) for r in rows), cap) for i, cap in enumerate((8, 48, 80, 60))]
    for row in rows:
        out("  ".join(_cut(cell, w).ljust(w) for cell, w in zip(row, widths)).rstrip())


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _model_line() -> str:
    """The bundled model's CPU code on this machine (the verdict kept beside the model file)."""
    return verdict_line(machine_model_dir() / BUNDLED_FILE)


# ~600 prompt tokens of plain text: long enough for a stable prefill rate, short enough to wait for.
_SPEED_TEXT = " ".join(f"Site {i} used {100 + i} MWh of electricity in {2000 + i % 20}." for i in range(60))


def machine_speed() -> str:
    """The bundled model's prefill and generation tokens/s on this machine, measured now in its
    own process (the figure the docs' timings are quoted with)."""
    model = ModelProcess(bundled_model(), n_ctx=2048, state_dir=None)
    try:
        model.complete(ChatRequest((Message("user", "hi"),), max_tokens=1))  # load and page in
        prefill = model.complete(ChatRequest((Message("user", _SPEED_TEXT),), max_tokens=1))
        story = ChatRequest((Message("user", "Write a long story about a lighthouse."),), max_tokens=48)
        generation = model.complete(story)
    finally:
        model.close()
    evaluated = prefill.prompt_tokens_evaluated or prefill.prompt_tokens
    gen_rate = max(generation.completion_tokens - 1, 1) / max(generation.seconds, 1e-6)
    return (
        f"this machine ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}): "
        f"prefill {evaluated / max(prefill.seconds, 1e-6):.0f} tokens/s, generation about {gen_rate:.0f} tokens/s "
        "(an answer's prompt is ~1,000-1,500 tokens; its reply ~80)"
    )


def cmd_doctor(args: argparse.Namespace, settings: KohakuSettings) -> int:
    """Exit 0 when nothing needs fixing, 1 when something does (after --repair: still does)."""
    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    found = findings(settings)
    if args.repair and any(f.repairable for f in found):
        with hold_lake(settings.lake.root, "kohaku doctor --repair", say=say):
            for line in repair_lake(settings.lake):
                say(line)
            for run_id in fail_orphaned_runs(instance_for(settings.lake.root)):
                say(f"marked run {run_id} failed: its process ended without finishing it")
            if settings.corpus.is_dir():
                say(f"re-indexing {settings.corpus}: what was set aside is recomputed, the indexes re-assembled")
                report = run_index(settings, progress=say)
                say(f"recomputed {len(report.recomputed)} documents in {report.seconds:.1f}s")
            else:
                say(f"no corpus folder at {settings.corpus}: give --corpus to recompute and re-assemble")
        found = findings(settings)
    say(_model_line())
    if args.speed:
        say(machine_speed())
    if args.json:
        print(json.dumps([asdict(f) for f in found]))
    else:
        print_table(found, settings.lake.root)
    # A damaged served store needs fixing too, by hand (doctor says how): it is derived from
    # nothing, so no repair here may replace it.
    return 1 if any(f.repairable or f.area == "served" for f in found) else 0


def add_parser(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser(
        "doctor", parents=[common], help="check the whole lake (tables, indexes, runs) and print the fixes"
    )
    p.add_argument("--repair", action="store_true", help="apply the fixes, then check again")
    p.add_argument("--json", action="store_true", help="last line: the findings as JSON")
    p.add_argument(
        "--speed",
        action="store_true",
        help="also time the bundled model here (prefill, generation; ~1 min)",
    )
    p.set_defaults(func=lambda a: cmd_doctor(a, settings_of(a)))
