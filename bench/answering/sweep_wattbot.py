"""A real sweep on WattBot train with the bundled LLM: the estimate before, the real cost after,
and the sweep's report (table, plots), through `kohaku sweep` and `kohaku report`.

The lake must hold the WattBot index (e.g. a copy of one built with bench/indexing/index_wattbot.py).
The script writes a question file of the first --questions train questions, a base config
(the defaults, planner on or off, on those questions) and the sweep file
`configs/sweeps/NAME.toml` (--grid KEY=V1,V2 ..., --seeds N), then:

  1. calibrates: answers the first question with the first member's settings through the
     Python API, so the response cache holds measured seconds per call (its replies are the
     first member's run 0 and are reused, not paid twice);
  2. prints `kohaku sweep NAME --estimate-only` (LLM calls not stored × seconds per call);
  3. runs `kohaku sweep NAME` (one answer_config run per member) and prints the real cost
     next to the estimate;
  4. writes `kohaku report NAME --out .../bench_report.md` and prints the table, then each
     member against the same-run baseline, the member with the default values (paired
     bootstrap 95% interval of the difference).

    python bench/answering/sweep_wattbot.py --lake /tmp/kohaku-b/lake --corpus /tmp/kohaku-bench/corpus \
        --questions 8 --grid top_k_final=8,16 --grid temperature=0.3,0.7 --seeds 2 --planner off
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.paired_tables import diff_cell  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig  # noqa: E402
from kohaku_rag.answering.qa_config_file import config_to_mapping, dump_toml  # noqa: E402
from kohaku_rag.evaluation.leaderboard import leaderboard_rows, question_scores  # noqa: E402
from kohaku_rag.experiments.sweep import expand, sweep_of  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402


def _value(text: str) -> object:
    """A grid value as TOML would read it: int, float, true/false, none, else a string."""
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def write_inputs(args: argparse.Namespace) -> tuple[Path, str]:
    """The question subset, the base config and the sweep file; returns (csv, sweep name)."""
    configs = args.lake / "configs"
    (configs / "sweeps").mkdir(parents=True, exist_ok=True)
    with open(args.wattbot / "train_QA.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)[: args.questions]
        fields = reader.fieldnames or []
    subset = args.lake / f"train_first{args.questions}.csv"
    with open(subset, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    base = QAConfig(questions=str(subset))
    text = dump_toml(base).replace("use_planner = true", f"use_planner = {'true' if args.planner == 'on' else 'false'}")
    (configs / f"{args.name}-base.toml").write_text(text, encoding="utf-8")
    grid = []
    for item in args.grid:
        key, _, values = item.partition("=")
        grid.append(f'"{key.strip()}" = {json.dumps([_value(v.strip()) for v in values.split(",")])}')
    sweep = f'base = "{args.name}-base"\nseeds = {args.seeds}\n[grid]\n' + "\n".join(grid) + "\n"
    (configs / "sweeps" / f"{args.name}.toml").write_text(sweep, encoding="utf-8")
    print(f"sweep file {configs / 'sweeps' / (args.name + '.toml')}:\n{sweep}")
    return subset, args.name


def kohaku(args: argparse.Namespace, *argv: str) -> str:
    env = {**os.environ, "KOHAKU_LAKE": str(args.lake), "KOHAKU_CORPUS": str(args.corpus), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", "import sys; from kohaku_assets.cli import main; sys.exit(main(sys.argv[1:]))", *argv]
    # stdout is the command's JSON / report; its progress lines (stderr) stream to ours.
    done = subprocess.run(cmd, env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"kohaku {' '.join(argv)} failed ({done.returncode})")
    return done.stdout


def calibrate(args: argparse.Namespace, name: str) -> float:
    """Answer the first question with the first member's config (its run 0), so the cache
    records what a call takes; returns the seconds it took."""
    env = {**os.environ, "KOHAKU_LAKE": str(args.lake), "PYTHONPATH": str(REPO)}
    code = (
        "import json, sys, time; import kohaku_rag as kr\n"
        "from kohaku_rag.experiments.sweep import sweep_of, write_members\n"
        "from kohaku_rag.answers.question_files import load_questions\n"
        "from pathlib import Path; from kohaku_rag.lake.layout import Lake\n"
        f"lake = Lake(Path({str(args.lake)!r})); members, _ = write_members(lake, sweep_of(lake, {name!r}))\n"
        "cfg = members[0].config; q = load_questions(cfg.questions)[0]\n"
        "t = time.perf_counter(); kr.open(lake.root).ask(q.question, config=cfg, unit=q.answer_unit)\n"
        "print(time.perf_counter() - t)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, text=True, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"calibration failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lake", type=Path, required=True, help="a lake with the WattBot index (a copy: it is written)"
    )
    parser.add_argument("--corpus", type=Path, required=True, help="the corpus folder the lake was indexed from")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--models", type=Path, default=REPO / ".models", help="where the bundled GGUF already is")
    parser.add_argument("--questions", type=int, default=8, help="the first N train questions")
    parser.add_argument("--grid", action="append", default=[], help="KEY=V1,V2 (repeatable)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--planner", choices=["on", "off"], default="off")
    parser.add_argument("--name", default="bench")
    parser.add_argument("--estimate-only", action="store_true", help="write the sweep, print the estimate, stop")
    args = parser.parse_args()
    args.grid = args.grid or ["top_k_final=8,16", "temperature=0.3,0.7"]
    args.lake = args.lake.resolve()
    gguf = args.models / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    target = args.lake / "models" / gguf.name
    if gguf.is_file() and not target.exists():  # reuse the joined model file instead of a 1 GB copy
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(gguf)

    _, name = write_inputs(args)
    if args.estimate_only:
        print(kohaku(args, "sweep", name, "--estimate-only").strip())
        return
    started = time.perf_counter()
    first = calibrate(args, name)
    print(
        f"calibration: question 1 with member 1's settings took {first:.1f} s (its replies are now cached)", flush=True
    )
    estimate = json.loads(kohaku(args, "sweep", name, "--estimate-only").strip().splitlines()[-1])["estimate"]
    print(
        f"estimate: {estimate['answers_missing']} answers missing, ~{estimate['calls']} LLM calls, "
        f"{estimate['seconds_per_call'] or 0:.1f} s per call -> ~{(estimate['seconds'] or 0) / 60:.1f} min",
        flush=True,
    )
    t0 = time.perf_counter()
    out = json.loads(kohaku(args, "sweep", name, "--json").strip().splitlines()[-1])
    real = time.perf_counter() - t0
    print(
        f"real: {out['calls']} LLM calls made, {out['cache_hits']} cache hits, {real / 60:.1f} min "
        f"(estimate ~{estimate['calls']} calls, ~{(estimate['seconds'] or 0) / 60:.1f} min; "
        f"with calibration {(time.perf_counter() - started) / 60:.1f} min); failed: {out['failed'] or 'none'}"
    )
    report = args.lake / "qa" / "reports" / name / "bench_report.md"
    print(kohaku(args, "report", name, "--out", str(report)).strip())
    print(report.read_text(encoding="utf-8"))
    print_vs_baseline(args, name)


def print_vs_baseline(args: argparse.Namespace, name: str) -> None:
    """Each member against the same-run baseline: the member whose swept values are the
    defaults (paired bootstrap over the questions, 95%)."""
    lake = Lake(args.lake)
    members = expand(sweep_of(lake, name))
    defaults = config_to_mapping(QAConfig())

    def default_of(key: str) -> object:
        node: object = defaults
        for part in key.split("."):
            node = node[part] if isinstance(node, dict) else None
        return node

    base = next((m for m in members if all(default_of(k) == v for k, v in m.overrides)), None)
    if base is None:
        print("no member has the default values of every swept key: no baseline")
        return
    rows = {r["config"]: r for r in leaderboard_rows(lake) if r["kind"] == "config"}
    ref = question_scores(lake, rows[base.name]["score_key"])
    print(f"baseline (the defaults): {base.name} final {rows[base.name]['final']:.3f}")
    for m in members:
        if m is base or m.name not in rows:
            continue
        mine = question_scores(lake, rows[m.name]["score_key"])
        shared = sorted(set(mine) & set(ref))
        vs_baseline = diff_cell([mine[q] for q in shared], [ref[q] for q in shared], " (significant)")
        print(f"  {m.name}: {rows[m.name]['final']:.3f}, vs baseline {vs_baseline}")


if __name__ == "__main__":
    main()
