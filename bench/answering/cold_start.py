"""A new process's first answer, with and without the saved prompt-opening KV states.

    python bench/answering/cold_start.py --lake LAKE [--n 6] [--questions train_QA.csv] [--wattbot DIR]

Issue 44: `kohaku ask`, a fresh `kohaku serve` and the first question of `kohaku eval` start
with an empty process. For each of the first --n questions, two new processes each ask it
once through `Rag.ask` on a bench-owned copy of LAKE (its LLM response cache emptied before
every process, so every reply is computed): "cold" with the model's `prefix-states` folder
emptied first, "warm" with the states the cold process saved. Prints per mode the median
seconds from the process start to the answer, the median time of the LLM calls, and the prompt
tokens evaluated; then the saving. Run it alone on the machine.
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
sys.path.insert(0, str(ROOT))


def worker(lake: Path, question: str, unit: str) -> None:
    started = time.perf_counter()
    import kohaku_rag as kr

    rag = kr.open(lake)
    result = rag.ask(question, unit=unit)
    pred = result.prediction
    print(
        json.dumps(
            {
                "process_s": round(time.perf_counter() - started, 2),
                "llm_s": round(pred.seconds, 2),
                "prompt_tokens": pred.prompt_tokens,
                "evaluated": pred.prompt_tokens_evaluated,
                "value": result.value,
            }
        )
    )


def states_dir(lake: Path) -> Path:
    from kohaku_rag.llm.model_files import bundled_model

    return bundled_model(lake / "models").parent / "prefix-states"


def ask_in_new_process(lake: Path, question: str, unit: str) -> dict:
    shutil.rmtree(lake / "cache" / "llm", ignore_errors=True)  # every reply computed
    cmd = [sys.executable, __file__, "--worker", "--lake", str(lake), "--question", question, "--unit", unit]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["wall_s"] = round(time.perf_counter() - started, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--wattbot", type=Path, default=ROOT.parent / "shared" / "wattbot")
    parser.add_argument("--questions", default="train_QA.csv")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-cold-start"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--question", help=argparse.SUPPRESS)
    parser.add_argument("--unit", default="is_blank", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.lake, args.question, args.unit)
        return
    from bench.answering.time_to_answer import fresh_lake
    from kohaku_rag.answers.question_files import load_questions

    lake = fresh_lake(args.lake, args.work / "lake")
    states = states_dir(lake)
    questions = load_questions(args.wattbot / args.questions)[: args.n]
    load_start = os.getloadavg()
    rows: dict[str, list[dict]] = {"cold": [], "warm": []}
    for q in questions:
        shutil.rmtree(states, ignore_errors=True)
        rows["cold"].append(ask_in_new_process(lake, q.question, q.answer_unit))
        rows["warm"].append(ask_in_new_process(lake, q.question, q.answer_unit))
        same = rows["cold"][-1]["value"] == rows["warm"][-1]["value"]
        print(f"  {q.id}: cold {rows['cold'][-1]}\n        warm {rows['warm'][-1]} same value: {same}", flush=True)
    for mode, got in rows.items():
        print(
            json.dumps(
                {
                    "mode": mode,
                    "questions": len(got),
                    "median_wall_s": round(statistics.median(r["wall_s"] for r in got), 2),
                    "median_llm_s": round(statistics.median(r["llm_s"] for r in got), 2),
                    "mean_prompt_tokens": round(statistics.mean(r["prompt_tokens"] for r in got)),
                    "mean_evaluated": round(statistics.mean(r["evaluated"] for r in got)),
                }
            )
        )
    saved = [c["llm_s"] - w["llm_s"] for c, w in zip(rows["cold"], rows["warm"], strict=True)]
    print(
        json.dumps(
            {
                "llm_s_saved_median": round(statistics.median(saved), 2),
                "same_values": sum(c["value"] == w["value"] for c, w in zip(rows["cold"], rows["warm"], strict=True)),
                "load_average_start": [round(x, 2) for x in load_start],
                "load_average_end": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
