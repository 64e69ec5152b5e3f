"""`kohaku sweep NAME` and `kohaku report NAME`: a sweep's members computed, and its report.

`sweep` writes the members' config files, registers them (and the sweep) as partitions,
prints the cost estimate (LLM calls not stored yet × measured seconds per call), runs every
member as an `answer_config` run (what is stored is reused), refreshes the leaderboard and
materializes the sweep's `sweep_report`, then prints the real cost next to the estimate.
A progress bar follows members and questions on a terminal; elsewhere plain lines do.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kohaku_assets.assets import PER_CONFIG
from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.dagster_private import PartitionBackfill, make_new_backfill_id
from kohaku_assets.definitions import defs
from kohaku_assets.instance import instance_for
from kohaku_assets.jobs import leaderboard_job, sweep_report_job
from kohaku_assets.partitions import CONFIGS, SWEEPS
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import RunFailed, failure_message, run_config, run_job
from kohaku_rag.experiments.cost import estimate
from kohaku_rag.experiments.report import build_report, render_markdown, report_dir
from kohaku_rag.experiments.sweep import Member, Sweep, sweep_of, write_members
from kohaku_rag.progress import listening

__all__ = ["add_parser", "cmd_report", "cmd_sweep"]

Say = Callable[[str], None]


def register(settings: KohakuSettings, sweep: Sweep, members: list[Member], removed: list[str]) -> None:
    """The members as config partitions (removed members' partitions deleted), the sweep as a sweeps partition."""
    instance = instance_for(settings.lake.root)
    for n in removed:
        if instance.has_dynamic_partition(CONFIGS, n):
            instance.delete_dynamic_partition(CONFIGS, n)
    new = [m.name for m in members if not instance.has_dynamic_partition(CONFIGS, m.name)]
    if new:
        instance.add_dynamic_partitions(CONFIGS, new)
    if not instance.has_dynamic_partition(SWEEPS, sweep.name):
        instance.add_dynamic_partitions(SWEEPS, [sweep.name])


@contextmanager
def progress_display(total: int, say: Say) -> Iterator[Callable[[str], None]]:
    """A rich bar (members, and the questions of the current step) on a terminal; plain
    lines otherwise. Yields `member_done(name)`."""
    if not sys.stderr.isatty():
        done = 0

        def plain(stage: str, n: int, of: int) -> None:
            say(f"  {stage} {n}/{of}")

        def member_done(name: str) -> None:
            nonlocal done
            done += 1
            say(f"[{done}/{total}] {name}")

        with listening(plain):
            yield member_done
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    members = bar.add_task("members", total=total)
    step = bar.add_task("questions", total=1, visible=False)

    def tick(stage: str, n: int, of: int) -> None:
        if n == 1:
            bar.reset(step, total=of, description=stage)
        bar.update(step, completed=n, visible=True)

    with bar, listening(tick):
        yield lambda name: bar.advance(members)


def submit_backfill(settings: KohakuSettings, sweep: Sweep, members: list[Member]) -> str:
    """One Dagster asset backfill of the answering assets over the member partitions, for
    the daemon of `kohaku ui` to run (the leaderboard and the report follow through their
    automation conditions). Returns its id."""
    instance = instance_for(settings.lake.root)
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(),
        asset_graph=defs.resolve_asset_graph(),
        partition_names=[m.name for m in members],
        asset_selection=[key for a in PER_CONFIG for key in a.keys],
        backfill_timestamp=time.time(),
        tags={"kohaku/sweep": sweep.name},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=f"sweep {sweep.name}",
        description=f"{len(members)} members of configs/sweeps/{sweep.name}",
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def _refresh(settings: KohakuSettings, sweep: Sweep) -> None:
    """The leaderboard, then the sweep's report (both recorded as runs of the location's jobs)."""
    board = run_job(settings, leaderboard_job.name)
    if not board.success:
        raise RunFailed(f"leaderboard: {failure_message(board)}")
    result = run_job(settings, sweep_report_job.name, sweep.name)
    if not result.success:
        raise RunFailed(f"sweep_report {sweep.name}: {failure_message(result)}")


def cmd_sweep(args: argparse.Namespace, settings: KohakuSettings) -> int:
    say: Say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    lake = settings.lake
    sweep = sweep_of(lake, args.name)
    members, removed = write_members(lake, sweep)
    register(settings, sweep, members, removed)
    for n in removed:
        say(f"removed member {n} (no longer in the sweep)")
    est = estimate(lake, [m.config for m in members])
    say(f"estimate: {est.summary()}")
    if args.price_per_million_tokens is not None and est.tokens is not None:  # a hosted model's bill
        price = args.price_per_million_tokens
        say(f"estimate: ~${est.tokens * price / 1e6:.2f} at ${price} per million tokens")
    summary: dict[str, object] = {"sweep": sweep.name, "members": [m.name for m in members], "estimate": vars(est)}
    if args.estimate_only:
        print(json.dumps(summary, default=str))
        return 0
    if args.backfill:
        backfill_id = submit_backfill(settings, sweep, members)
        say(f"submitted backfill {backfill_id}: `kohaku ui` runs it (Overview → Backfills)")
        print(json.dumps({**summary, "backfill": backfill_id}, default=str))
        return 0
    started = time.perf_counter()
    calls = hits = 0
    failed: dict[str, str] = {}
    with progress_display(len(members), say) as member_done:
        for m in members:
            try:
                report = run_config(settings, m.name, leaderboard_too=False)
            except RunFailed as exc:
                failed[m.name] = str(exc)
                member_done(m.name)
                continue
            for step in ("retrievals", "predictions"):  # the planner's calls, then the answers'
                meta = report.metadata.get(step, {})
                calls += int(str(meta.get("llm_calls", 0) or 0))
                hits += int(str(meta.get("llm_cache_hits", 0) or 0))
            member_done(m.name)
    seconds = time.perf_counter() - started
    for why in failed.values():
        say(f"FAILED {why}")
    _refresh(settings, sweep)
    say(
        f"real: {calls} LLM calls made, {hits} cache hits, {seconds / 60:.1f} min "
        f"(estimate: ~{est.calls} calls, "
        + (f"~{est.seconds / 60:.1f} min)" if est.seconds is not None else "no seconds per call measured)")
    )
    say(f"report: {report_dir(lake, sweep.name) / 'report.html'} (and report.md); `kohaku report {sweep.name}`")
    summary.update(calls=calls, cache_hits=hits, seconds=round(seconds, 1), failed=failed)
    print(json.dumps(summary, default=str))
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace, settings: KohakuSettings) -> int:
    """Refresh the leaderboard, materialize the sweep's report, and write it where asked."""
    lake = settings.lake
    sweep = sweep_of(lake, args.name)
    members, removed = write_members(lake, sweep)
    register(settings, sweep, members, removed)
    _refresh(settings, sweep)
    report = build_report(lake, sweep)
    if not report.rows:
        raise ValueError(f"sweep {sweep.name}: no member is scored yet; run `kohaku sweep {sweep.name}` first")
    folder = report_dir(lake, sweep.name)
    out = Path(args.out) if args.out else folder / f"report.{args.format}"
    fmt = "md" if out.suffix == ".md" else "html"
    if out.resolve() != (folder / f"report.{fmt}").resolve():
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "md":  # links to the PNGs, so they are copied next to it
            for path in report.plots.values():
                shutil.copy2(path, out.parent / path.name)
            out.write_text(render_markdown(report, {t: p.name for t, p in report.plots.items()}), encoding="utf-8")
        else:
            shutil.copy2(folder / "report.html", out)
    print(f"wrote {out} ({len(report.rows)} of {len(report.members)} members scored, {len(report.plots)} plots)")
    return 0


def add_parser(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser("sweep", parents=[common], help="compute every member of a sweep (configs/sweeps/NAME.toml)")
    p.add_argument("name")
    p.add_argument("--estimate-only", action="store_true", help="print the cost estimate and stop")
    p.add_argument(
        "--price-per-million-tokens", type=float, default=None, help="a hosted model's price: the estimate in money"
    )
    p.add_argument(
        "--backfill", action="store_true", help="submit the members as one Dagster backfill for `kohaku ui` to run"
    )
    p.add_argument("--json", action="store_true", help="progress to stderr; stdout is the JSON summary")
    p.set_defaults(func=lambda a: cmd_sweep(a, settings_of(a)))

    p = sub.add_parser("report", parents=[common], help="a sweep's table and plots as one HTML or Markdown file")
    p.add_argument("name")
    p.add_argument("--format", choices=["html", "md"], default="html", help="(default: %(default)s)")
    p.add_argument("--out", default=None, help="file to write (default: <lake>/qa/reports/NAME/report.FORMAT)")
    p.set_defaults(func=lambda a: cmd_report(a, settings_of(a)))
