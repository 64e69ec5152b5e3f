"""Answering under LLM faults: does an outage freeze wrong answers?

Runs `kohaku eval` (in-process, through Dagster, as a user would) on a small indexed corpus
against a fault-injecting OpenAI-compatible server on 127.0.0.1 that answers like a
well-behaved model (tests/support/qa_server.py), in two scenarios:

  flaky     30% of requests fail (HTTP 500); `[generation.llm] max_retries = 2`
  outage    every request fails (HTTP 503) for a whole eval, then the endpoint recovers

and re-runs each eval once the endpoint is healthy. A question is *lost* when its stored
prediction is a failed call (or it has none) after the run. Prints, per run: the exit
code, questions lost, requests made, the WattBot score.

    python bench/faults/faults_answering.py [--questions 30] [--work DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from kohaku_assets.cli import main as cli_main  # noqa: E402
from kohaku_assets.resources import KohakuSettings  # noqa: E402
from kohaku_assets.runner import run_index  # noqa: E402
from kohaku_rag.answering import qa_tables as st  # noqa: E402
from kohaku_rag.answering.config_folder import config_of  # noqa: E402
from tests.support.corpus_docs import write_corpus  # noqa: E402
from tests.support.qa_server import QUESTIONS, QAServer  # noqa: E402

_VARIANT = re.compile(r"\s*\[v\d+\]$", re.MULTILINE)


class VariantServer(QAServer):
    """QAServer answering "<known question> [vN]" like the known question, so N distinct
    questions (and prompts: the response cache cannot merge them) share three facts."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return super()._echo(body, messages, _VARIANT.sub("", key))


def write_questions(path: Path, n: int) -> None:
    facts = list(QUESTIONS.items())
    lines = ["id,question,answer,answer_value,answer_unit,ref_id"]
    for i in range(n):
        q, (unit, value, doc) = facts[i % len(facts)]
        lines.append(f"q{i + 1},{q} [v{i + 1}],{value} {unit},{value},{unit},['{doc}']")
    path.write_text("\n".join(lines) + "\n")


def write_config(lake: Path, name: str, server: QAServer, questions: Path, max_retries: int) -> None:
    """A config whose model is named after it, so no scenario's replies come from another's cache."""
    folder = lake / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    llm = {
        "backend": "openai",
        "model": f"fault-bench-{name}",
        "base_url": server.base_url,
        "api_key_env": None,
        "max_retries": max_retries,
        "timeout": 10.0,
    }
    data = {
        "questions": str(questions),
        "retrieval": {"use_planner": True, "planner_max_queries": 2},
        "generation": {"llm": llm},
        "voting": {"runs": 1},
    }
    (folder / f"{name}.json").write_text(json.dumps(data))


def lost(settings: KohakuSettings, name: str, n: int) -> int:
    """Questions without a good stored prediction (a failed call, or none stored)."""
    cfg = config_of(settings.lake, name)
    keys = st.keys_for(settings.lake, cfg)
    path = st.run_path(settings.lake, keys.prediction, 0)
    if not path.exists():
        return n
    good = {row["id"] for row in pq.read_table(path).to_pylist() if not row["error"]}
    return n - len(good)


def evaluate(settings: KohakuSettings, name: str, questions: Path, server: QAServer, n: int) -> dict[str, object]:
    before = len(server.requests)
    started = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    args = ["eval", "--questions", str(questions), "--config", name, "--json"]
    args += ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(args)
    summary = json.loads(out.getvalue().strip().splitlines()[-1]) if code == 0 else {}
    last = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""
    return {
        "exit": code,
        "lost": lost(settings, name, n),
        "requests": len(server.requests) - before,
        "final": summary.get("final"),
        "seconds": round(time.perf_counter() - started, 1),
        "message": last[:160] if code else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--work", default="/tmp/kohaku-bench-faults")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    corpus = write_corpus(work / "corpus")
    lake = work / "lake"
    os.environ["DAGSTER_HOME"] = str(lake / ".dagster")
    os.environ.pop("KOHAKU_CONFIGS", None)
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
    report = run_index(settings, progress=lambda _m: None)
    assert not report.failed, report.failed
    questions = work / "questions.csv"
    write_questions(questions, args.questions)
    n = args.questions
    print(f"{n} questions, 1 run each, planner on; the endpoint is a fault-injecting server on 127.0.0.1")

    with VariantServer() as server:
        write_config(lake, "flaky", server, questions, max_retries=2)
        server.failure_rate, server.seed = 0.3, 7
        flaky = evaluate(settings, "flaky", questions, server, n)
        server.failure_rate = 0.0
        flaky_again = evaluate(settings, "flaky", questions, server, n)

        write_config(lake, "outage", server, questions, max_retries=1)
        server.outage = True
        down = evaluate(settings, "outage", questions, server, n)
        server.outage = False
        recovered = evaluate(settings, "outage", questions, server, n)
        third = evaluate(settings, "outage", questions, server, n)

    rows = [
        ("30% of requests fail", flaky),
        ("  re-run, endpoint healthy", flaky_again),
        ("100% fail (outage)", down),
        ("  re-run after recovery", recovered),
        ("  re-run again", third),
    ]
    print()
    print("| run | exit | questions lost | requests made | WattBot final | seconds |")
    print("|---|---|---|---|---|---|")
    for label, r in rows:
        final = "-" if r["final"] is None else f"{r['final']:.3f}"
        print(f"| {label} | {r['exit']} | {r['lost']}/{n} | {r['requests']} | {final} | {r['seconds']} |")
    print()
    for label, r in rows:
        if r["message"]:
            print(f"{label.strip()}: {r['message']}")
    print()
    print(f"questions lost (30% failures, first run): {flaky['lost']}; after the re-run: {flaky_again['lost']}")
    print(f"questions lost (outage, then recovery): {down['lost']} during the outage; {recovered['lost']} after")
    print(f"requests made on the recovery run: {recovered['requests']} (the re-run after it: {third['requests']})")


if __name__ == "__main__":
    main()
