"""Time to answer with the bundled model: what a person at the ask page waits, before/after.

    python bench/answering/time_to_answer.py --baseline-code CHECKOUT [--config FILE] \
        [--name NAME] [--only before|after] [--lake DIR] [--questions train_QA.csv,dev_QA.csv]
    python bench/answering/time_to_answer.py --compare before NAME      # paired, from the kept rows

Asks every question of --questions (train + dev of WattBot 2025: 133 labelled questions)
through `Rag.ask`, exactly as `kohaku serve` does, once per setting in its own process on a
fresh copy of the lake (no stored answers), after one warm-up question that loads the model:

- before: the code of --baseline-code (a checkout of an earlier commit, e.g. `git worktree
  add /tmp/base 64ed563`) with its default config, optionally with the llama.cpp build in
  --baseline-llama (a folder holding a `llama_cpp` package);
- after (or --name): this checkout with its defaults, or the QA config --config.

Per setting it prints the CPU backend, the median / p90 / mean seconds per question, the
first-text time (from the click to the first reply text of the answering call: what the ask
page shows first), mean prompt and reply tokens, the WattBot score with a 95 % bootstrap
interval, and the load average at start and end; the rows are kept in WORK/NAME.json.
Two settings are then compared question by question: the score difference with a paired
bootstrap interval, how many answers are the same, and the speed-up. Run it alone on the
machine: a timing taken beside other work is noise.
Without --lake the WattBot corpus is indexed into --work first (minutes, once).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def worker(lake: Path, questions_csvs: list[Path], n: int, config: Path | None) -> None:
    """One setting: ask the questions in this process and print one JSON line per question."""
    import kohaku_rag as kr  # from the PYTHONPATH the parent chose: this or the baseline checkout
    from kohaku_rag.answers.question_files import load_questions
    from kohaku_rag.llm.reply_stream import streaming_reply

    questions = [q for path in questions_csvs for q in load_questions(path)]
    rag = kr.open(lake)
    cfg = str(config) if config is not None else None
    rag.ask("What is this collection of documents about?", config=cfg)  # loads the model; not counted
    backend = cpu_backend()
    print(json.dumps({"backend": backend, "code": str(Path(kr.__file__).parents[1])}), flush=True)
    for q in questions[: n or None]:
        marks: dict[str, float] = {}
        started = time.perf_counter()

        def stage(name: str, marks: dict[str, float] = marks, started: float = started) -> None:
            marks.setdefault(name, time.perf_counter() - started)

        def text(_piece: str, marks: dict[str, float] = marks, started: float = started) -> None:
            # The first words of the answer: the first reply text after answering began
            # (a planner's reply streams too, but a person does not see it as the answer).
            if "answering" in marks:
                marks.setdefault("first_text", time.perf_counter() - started)

        with streaming_reply(text):
            result = rag.ask(q.question, unit=q.answer_unit, config=cfg, progress=stage)
        seconds = time.perf_counter() - started
        pred = result.prediction
        print(
            json.dumps(
                {
                    "id": q.id,
                    "seconds": round(seconds, 2),
                    "first_text_s": round(marks.get("first_text", seconds), 2),
                    "retrieving_at_s": round(marks.get("retrieving", 0.0), 2),
                    "answering_at_s": round(marks.get("answering", 0.0), 2),
                    "prompt_tokens": pred.prompt_tokens,
                    # of them evaluated (None: code from before the time split was stored)
                    "prompt_tokens_evaluated": getattr(pred, "prompt_tokens_evaluated", None),
                    "completion_tokens": pred.completion_tokens,
                    "llm_calls": pred.llm_calls,
                    "attempts": pred.attempts,
                    "answer": result.answer,
                    "value": result.value,
                    "unit": result.unit,
                    "is_blank": result.is_blank,
                    "refs": list(result.refs),
                }
            ),
            flush=True,
        )


def cpu_backend() -> str:
    """The llama.cpp CPU variant this checkout runs here (older checkouts: their own loader)."""
    try:
        from kohaku_rag.llm.cpu_verdicts import trusted_cpu_backend
        from kohaku_rag.llm.model_files import bundled_model
    except ImportError:
        try:
            from kohaku_rag.llm.cpu_backends import ensure_cpu_backend  # type: ignore[attr-defined]
        except ImportError:  # from before per-CPU variants: its llama.cpp has the CPU code built in
            return "built in"
        return str(ensure_cpu_backend().variant)
    return trusted_cpu_backend(bundled_model()).variant


def fresh_lake(source: Path, dest: Path) -> Path:
    """A copy of the lake without its stored LLM replies (every question is asked for real);
    the model files are linked, not copied."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("llm", "models", ".lake.lock"))
    if (source / "models").is_dir():
        (dest / "models").symlink_to((source / "models").resolve())
    return dest


def run_setting(name: str, lake: Path, args: argparse.Namespace, env: dict[str, str], code: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--lake",
        str(lake),
        "--n",
        str(args.n),
        "--wattbot",
        str(args.wattbot),
    ]
    cmd += ["--questions", args.questions] + (
        ["--config", str(args.config)] if args.config and name != "before" else []
    )
    print(f"[{name}] asking {args.n or 'all'} questions of {args.questions} ...", flush=True)
    load_at_start = os.getloadavg()
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"[{name}] failed:\n{proc.stderr[-3000:]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    backend = next(line["backend"] for line in lines if "backend" in line)
    loaded = next(line["code"] for line in lines if "code" in line)
    if Path(loaded).resolve() != code.resolve():
        sys.exit(f"[{name}] ran the code in {loaded}, not {code}")
    rows = [line for line in lines if "id" in line]
    totals = question_scores(question_files(args), rows)
    for row in rows:
        row["score"] = totals[row["id"]]
    summary = {
        "setting": name,
        "code": loaded,
        "config": str(args.config) if args.config and name != "before" else "default",
        "cpu_backend": backend,
        **score_summary([r["score"] for r in rows]),
        "questions": len(rows),
        **spread("s", [r["seconds"] for r in rows]),
        **spread("first_text_s", [r["first_text_s"] for r in rows]),
        "mean_prompt_tokens": round(statistics.mean(r["prompt_tokens"] for r in rows)),
        "mean_prompt_tokens_evaluated": (
            round(statistics.mean(r["prompt_tokens_evaluated"] for r in rows))
            if all(r.get("prompt_tokens_evaluated") is not None for r in rows)
            else None
        ),
        "mean_completion_tokens": round(statistics.mean(r["completion_tokens"] for r in rows)),
        "wall_s": round(time.perf_counter() - started, 1),
        "load_average_start": [round(x, 2) for x in load_at_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(summary), flush=True)
    for r in rows:
        print(
            f"  {r['id']}: {r['seconds']:6.1f} s  {r['answer']!r} refs={r['refs']} score={r['score']:.2f}", flush=True
        )
    kept = args.work / f"{name}.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(f"[{name}] rows kept in {kept}", flush=True)
    return {"summary": summary, "rows": rows}


def spread(suffix: str, values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        f"median_{suffix}": round(statistics.median(ordered), 1),
        f"p90_{suffix}": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 1),
        f"mean_{suffix}": round(statistics.mean(ordered), 1),
    }


def question_files(args: argparse.Namespace) -> list[Path]:
    return [args.wattbot / name for name in args.questions.split(",")]


def question_scores(files: list[Path], rows: list[dict]) -> dict[str, float]:
    """Each asked question's WattBot score (the gold of the question files)."""
    from kohaku_rag.answers.question_files import load_questions
    from kohaku_rag.answers.records import Answer
    from kohaku_rag.evaluation.wattbot2025 import score_predictions

    asked = {r["id"] for r in rows}
    gold = [q for path in files for q in load_questions(path) if q.id in asked]
    preds = {
        # the API's unit is null when none was asked; the scorer's records spell it is_blank
        r["id"]: Answer(r["answer"], r["value"], r["unit"] or "is_blank", tuple(r["refs"]), is_blank=r["is_blank"])
        for r in rows
    }
    return {row.id: row.total for row in score_predictions(gold, preds).rows}


def score_summary(scores: list[float]) -> dict[str, float]:
    """The mean WattBot score (per-question totals) and its 95 % bootstrap interval."""
    import numpy as np

    values = np.asarray(scores, dtype=float)
    means = values[np.random.default_rng(0).integers(0, len(values), size=(2000, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"score": round(float(values.mean()), 3), "score_ci": [round(float(low), 3), round(float(high), 3)]}


def compare(work: Path, a: str, b: str) -> None:
    """Paired comparison of two kept settings (b − a) over the questions both asked."""
    from kohaku_rag.evaluation.run_stats import paired_bootstrap

    first, second = (json.loads((work / f"{name}.json").read_text()) for name in (a, b))
    by_id = {r["id"]: r for r in first["rows"]}
    pairs = [(by_id[r["id"]], r) for r in second["rows"] if r["id"] in by_id]
    diff = paired_bootstrap([y["score"] for _, y in pairs], [x["score"] for x, _ in pairs])
    same = sum((x["answer"], x["value"], x["refs"]) == (y["answer"], y["value"], y["refs"]) for x, y in pairs)
    print(
        json.dumps(
            {
                "compare": f"{b} - {a}",
                "questions": len(pairs),
                "score_diff": round(diff.diff, 3),
                "score_diff_ci": [round(diff.low, 3), round(diff.high, 3)],
                "answers_same": same,
                f"median_s_{a}": round(statistics.median(x["seconds"] for x, _ in pairs), 1),
                f"median_s_{b}": round(statistics.median(y["seconds"] for _, y in pairs), 1),
                "speedup_median": round(
                    statistics.median(x["seconds"] for x, _ in pairs)
                    / statistics.median(y["seconds"] for _, y in pairs),
                    2,
                ),
                "time_ratio_mean": round(
                    statistics.mean(y["seconds"] for _, y in pairs) / statistics.mean(x["seconds"] for x, _ in pairs), 2
                ),
            }
        ),
        flush=True,
    )


def build_lake(wattbot: Path, work: Path) -> Path:
    from bench.indexing.index_wattbot import make_corpus
    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import run_index

    lake = work / "lake"
    corpus = make_corpus(wattbot, work / "corpus")
    print(f"indexing the WattBot corpus into {lake} ...", flush=True)
    run_index(KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus)), progress=lambda _m: None)
    return lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-code", type=Path, help="a checkout of the commit to compare with")
    parser.add_argument(
        "--baseline-llama", type=Path, help="folder holding the baseline build's llama_cpp package (default: this one)"
    )
    parser.add_argument(
        "--llama", type=Path, help="folder holding the llama_cpp package to measure (default: the installed one)"
    )
    parser.add_argument("--lake", type=Path, help="an indexed WattBot lake (default: index one into --work)")
    parser.add_argument("--wattbot", type=Path, default=ROOT.parent / "shared" / "wattbot")
    parser.add_argument("--questions", default="train_QA.csv,dev_QA.csv", help="question files in --wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench-tta"))
    parser.add_argument("--n", type=int, default=0, help="questions per setting, in file order (0: all)")
    parser.add_argument("--config", type=Path, help="a QA config file for the after setting (default: the defaults)")
    parser.add_argument("--name", default="after", help="the after setting's name (its rows go to WORK/NAME.json)")
    parser.add_argument("--only", choices=["before", "after"], help="run one setting (no comparison)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two kept settings, run nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.lake, question_files(args), args.n, args.config)
        return
    sys.path.insert(0, str(ROOT))  # the parent only: a worker imports the code its PYTHONPATH names
    if args.compare:
        compare(args.work, *args.compare)
        return

    source = args.lake or (args.work / "lake" if (args.work / "lake" / "index").is_dir() else None)
    source = source or build_lake(args.wattbot, args.work)
    base_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    settings = []
    if args.baseline_code:
        if not (args.baseline_code / "kohaku_rag").is_dir():
            sys.exit(f"{args.baseline_code}: not a kohaku-lake checkout")
        if args.baseline_llama and not (args.baseline_llama / "llama_cpp").is_dir():
            sys.exit(f"{args.baseline_llama}: no llama_cpp package in it (see --help)")
        llama = [str(args.baseline_llama)] if args.baseline_llama else []
        before_path = os.pathsep.join([*llama, str(args.baseline_code)])
        settings.append(("before", {**base_env, "PYTHONPATH": before_path}, args.baseline_code))
    after_env = {**base_env, "PYTHONPATH": f"{args.llama}{os.pathsep}{ROOT}"} if args.llama else base_env
    settings.append((args.name, after_env, ROOT))
    settings = [s for s in settings if args.only is None or (s[0] == "before") == (args.only == "before")]
    for name, env, code in settings:
        run_setting(name, fresh_lake(source, args.work / f"lake-{name}"), args, env, code)
    if len(settings) == 2:
        compare(args.work, settings[0][0], settings[1][0])


if __name__ == "__main__":
    main()
