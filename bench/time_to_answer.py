"""Time to answer with the bundled model: what a person at the ask page waits, before/after.

    flock /tmp/kohaku-llm.lock python bench/time_to_answer.py \
        --baseline-code CHECKOUT --baseline-llama DIR \
        [--lake DIR] [--wattbot ../shared/wattbot] [--n 8] [--work /tmp/kohaku-bench-tta]

Asks the first --n train questions of WattBot 2025 with the default config (4,000-character
context, the planner, the is_blank retry) through `Rag.ask`, exactly as `kohaku serve` does,
once per setting in its own process on a fresh copy of the lake (no stored answers), after
one warm-up question that loads the model:

- before: the code of --baseline-code (a checkout of an earlier commit, e.g. `git worktree
  add /tmp/base 089bacf`: no prefix cache) with the llama.cpp in --baseline-llama (a folder
  holding a `llama_cpp` package built the old way, e.g. `CMAKE_ARGS="-DGGML_NATIVE=OFF" pip
  install --target DIR --no-deps llama-cpp-python==0.3.36`: AVX2 at most);
- after: this checkout with this install's llama.cpp (per-CPU variants picked at run time;
  --llama DIR to measure another build) and its prompt-prefix states.

Prints per setting the CPU backend, median/p90/mean seconds per question and the WattBot
score of its answers, then how many answers (answer, value, refs) are the same in both.
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

ROOT = Path(__file__).resolve().parents[1]


def worker(lake: Path, questions_csv: Path, n: int) -> None:
    """One setting: ask the questions in this process and print one JSON line per question."""
    import kohaku_rag as kr  # from the PYTHONPATH the parent chose: this or the baseline checkout
    from kohaku_rag.evaluation.wattbot_csv import load_questions

    questions = load_questions(questions_csv)
    rag = kr.open(lake)
    rag.ask("What is this collection of documents about?")  # loads the model; not counted
    backend = cpu_backend()
    print(json.dumps({"backend": backend, "code": str(Path(kr.__file__).parents[1])}), flush=True)
    for q in questions[:n]:
        started = time.perf_counter()
        result = rag.ask(q.question, unit=q.answer_unit)
        seconds = time.perf_counter() - started
        print(
            json.dumps(
                {
                    "id": q.id,
                    "seconds": round(seconds, 2),
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
    try:
        from kohaku_rag.llm.cpu_backends import ensure_cpu_backend
    except ImportError:  # a checkout from before per-CPU variants: its llama.cpp has the CPU code built in
        return "built in"
    return ensure_cpu_backend().variant


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
    print(f"[{name}] asking {args.n} questions ...", flush=True)
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
    secs = sorted(r["seconds"] for r in rows)
    summary = {
        "setting": name,
        "code": loaded,
        "cpu_backend": backend,
        "score": wattbot_score(args.wattbot / "train_QA.csv", rows),
        "questions": len(rows),
        "median_s": round(statistics.median(secs), 1),
        "p90_s": round(secs[min(len(secs) - 1, int(0.9 * len(secs)))], 1),
        "mean_s": round(statistics.mean(secs), 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(summary), flush=True)
    for r in rows:
        print(f"  {r['id']}: {r['seconds']:6.1f} s  {r['answer']!r} refs={r['refs']}", flush=True)
    kept = args.work / f"{name}.json"
    kept.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(f"[{name}] rows kept in {kept}", flush=True)
    return {"summary": summary, "rows": rows}


def wattbot_score(questions_csv: Path, rows: list[dict]) -> float:
    """The WattBot score of these answers on the questions asked (train_QA.csv's gold)."""
    from kohaku_rag.evaluation.records import Answer
    from kohaku_rag.evaluation.score import score_predictions
    from kohaku_rag.evaluation.wattbot_csv import load_questions

    asked = {r["id"] for r in rows}
    gold = [q for q in load_questions(questions_csv) if q.id in asked]
    preds = {
        r["id"]: Answer(r["answer"], r["value"], r["unit"], tuple(r["refs"]), is_blank=r["is_blank"]) for r in rows
    }
    return round(score_predictions(gold, preds).final, 3)


def build_lake(wattbot: Path, work: Path) -> Path:
    from index_wattbot import make_corpus

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
    parser.add_argument("--baseline-llama", type=Path, help="folder holding the baseline build's llama_cpp package")
    parser.add_argument(
        "--llama", type=Path, help="folder holding the llama_cpp package to measure (default: the installed one)"
    )
    parser.add_argument("--lake", type=Path, help="an indexed WattBot lake (default: index one into --work)")
    parser.add_argument("--wattbot", type=Path, default=ROOT.parent / "shared" / "wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench-tta"))
    parser.add_argument("--n", type=int, default=8, help="questions per setting (train_QA.csv order)")
    parser.add_argument("--only", choices=["before", "after"], help="run one setting (no comparison)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.lake, args.wattbot / "train_QA.csv", args.n)
        return
    sys.path.insert(0, str(ROOT))  # the parent only: a worker imports the code its PYTHONPATH names

    source = args.lake or (args.work / "lake" if (args.work / "lake" / "index").is_dir() else None)
    source = source or build_lake(args.wattbot, args.work)
    base_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    settings = []
    if args.baseline_code or args.baseline_llama:
        if not (args.baseline_code and args.baseline_llama):
            sys.exit("--baseline-code and --baseline-llama go together (see --help)")
        if not (args.baseline_llama / "llama_cpp").is_dir():
            sys.exit(f"{args.baseline_llama}: no llama_cpp package in it (see --help)")
        if not (args.baseline_code / "kohaku_rag").is_dir():
            sys.exit(f"{args.baseline_code}: not a kohaku-lake checkout")
        before_path = f"{args.baseline_llama}{os.pathsep}{args.baseline_code}"
        settings.append(("before", {**base_env, "PYTHONPATH": before_path}, args.baseline_code))
    after_env = {**base_env, "PYTHONPATH": f"{args.llama}{os.pathsep}{ROOT}"} if args.llama else base_env
    settings.append(("after", after_env, ROOT))
    results = {}
    settings = [setting for setting in settings if args.only in (None, setting[0])]
    for name, env, code in settings:
        results[name] = run_setting(name, fresh_lake(source, args.work / f"lake-{name}"), args, env, code)
    if {"before", "after"} <= results.keys():
        same = sum(
            (a["answer"], a["value"], a["refs"]) == (b["answer"], b["value"], b["refs"])
            for a, b in zip(results["before"]["rows"], results["after"]["rows"])
        )
        before, after = results["before"]["summary"], results["after"]["summary"]
        print(
            json.dumps(
                {
                    "answers_same": f"{same}/{len(results['after']['rows'])}",
                    "median_before_s": before["median_s"],
                    "median_after_s": after["median_s"],
                    "speedup": round(before["median_s"] / after["median_s"], 2),
                }
            )
        )


if __name__ == "__main__":
    main()
