"""`kohaku serve` under load: N concurrent clients asking distinct questions through a real
uvicorn on 127.0.0.1, streaming (so the time to the first progress event is measured too).

    python bench/serve_load.py [--clients 8] [--questions 4] [--delay 0.25]
        a fake OpenAI-compatible model on 127.0.0.1 answering after --delay seconds per
        request (tests/support/qa_server.py), the config's max_concurrent = 4
    flock /tmp/kohaku-llm.lock python bench/serve_load.py --bundled [--clients 3]
        the sample PDFs answered by the bundled LLM (one prompt at a time: the queue), and
        `kohaku ask`'s time for the same kind of question in the same run as the baseline

Prints one JSON line per setting: answers, errors, refused (429), p50/p95 of the time to
answer and to the first progress event, wall time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import httpx  # noqa: E402
from asgi_server import serving  # noqa: E402
from qa_server import QUESTIONS, QAServer  # noqa: E402
from serving_corpus import write_config, write_serving_corpus  # noqa: E402

import kohaku_rag as kr  # noqa: E402
from kohaku_rag.samples import write_sample_corpus  # noqa: E402
from kohaku_rag.serving.app import build_app  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402

KOHAKU = "import sys; from kohaku_assets.cli import main; sys.exit(main(sys.argv[1:]))"
_VARIANT = re.compile(r"\s*\[v\d+\]$", re.MULTILINE)

# Questions for the sample PDFs (kohaku sample-corpus), with their units.
BUNDLED_QUESTIONS = [
    ("By how much can an estimate from rated power overstate the device energy of a training run?", "percent"),
    ("Which GPU had the lowest power draw?", "is_blank"),
    ("What was the PUE of the data center?", "PUE"),
    ("How much water does inference consume per query?", "mL"),
]


class VariantServer(QAServer):
    """Answers "<known question> [vN]" like the known question: N distinct questions (no
    stored answer, no cached prompt can merge them) that share three facts."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return super()._echo(body, messages, _VARIANT.sub("", key))


def ask_streaming(url: str, question: str, unit: str, config: str) -> dict[str, object]:
    """One client's question: seconds to the first progress event and to the answer."""
    started = time.perf_counter()
    first: float | None = None
    body = {"question": question, "unit": unit, "config": config, "stream": True}
    try:
        with httpx.stream("POST", f"{url}/api/ask", json=body, timeout=3600) as r:
            if r.status_code != 200:
                r.read()
                return {"status": r.status_code, "seconds": time.perf_counter() - started}
            outcome = "no answer"
            for line in r.iter_lines():
                if line.startswith("event: ") and first is None:
                    first = time.perf_counter() - started
                if line == "event: done":
                    outcome = "done"
                elif line == "event: error":
                    outcome = "error"
            return {"status": 200, "outcome": outcome, "first": first, "seconds": time.perf_counter() - started}
    except httpx.HTTPError as exc:
        return {"status": 0, "outcome": type(exc).__name__, "seconds": time.perf_counter() - started}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def load(url: str, config: str, questions: list[tuple[str, str]], clients: int) -> dict[str, object]:
    """`clients` threads, each asking its share of `questions` one after the other."""
    results: list[dict[str, object]] = []
    lock = threading.Lock()

    def client(mine: list[tuple[str, str]]) -> None:
        for q, unit in mine:
            res = ask_streaming(url, q, unit, config)
            with lock:
                results.append(res)

    shares = [questions[i::clients] for i in range(clients)]
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(s,)) for s in shares if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    done = [r for r in results if r.get("outcome") == "done"]
    seconds = [float(r["seconds"]) for r in done]  # type: ignore[arg-type]
    firsts = [float(r["first"]) for r in done if r.get("first") is not None]  # type: ignore[arg-type]
    return {
        "clients": clients,
        "questions": len(questions),
        "answers": len(done),
        "errors": sum(1 for r in results if r["status"] not in (200, 429) or r.get("outcome") not in ("done", None)),
        "refused_429": sum(1 for r in results if r["status"] == 429),
        "answer_p50_s": percentile(seconds, 0.5),
        "answer_p95_s": percentile(seconds, 0.95),
        "first_event_p50_s": percentile(firsts, 0.5),
        "first_event_p95_s": percentile(firsts, 0.95),
        "wall_s": round(wall, 3),
    }


def run_fake(args: argparse.Namespace, work: Path) -> None:
    lake = work / "lake"
    kr.index(write_serving_corpus(work / "corpus"), lake, progress=lambda _m: None)
    facts = list(QUESTIONS.items())
    n = args.clients * args.questions
    questions = [(f"{facts[i % 3][0]} [v{i + 1}]", facts[i % 3][1][0]) for i in range(n)]
    with VariantServer() as llm:
        llm.default_delay = args.delay
        write_config(lake, "fake", llm.base_url, max_concurrent=4)
        app = build_app(ServeSettings(lake=lake, config="fake", queue_size=max(8, n)))
        with serving(app) as url:
            row = load(url, "fake", questions, args.clients)
            again = load(url, "fake", questions, args.clients)  # the same questions: stored answers
        row["llm_max_in_flight"] = llm.max_in_flight
    print(json.dumps({"setting": f"fake model, {args.delay}s per request, max_concurrent 4", **row}))
    print(json.dumps({"setting": "the same questions again (stored answers)", **again}))


def run_bundled(args: argparse.Namespace, work: Path) -> None:
    lake = work / "lake"
    corpus = write_sample_corpus(work / "corpus")[0].parent
    kr.index(corpus, lake, progress=lambda _m: None)
    # the baseline: the CLI, one question, in this run (its process loads the model itself)
    q0, unit0 = BUNDLED_QUESTIONS[0]
    started = time.perf_counter()
    cli = subprocess.run(
        [sys.executable, "-c", KOHAKU, "ask", q0, "--unit", unit0, "--lake", str(lake),
         "--corpus", str(corpus)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    cli_seconds = time.perf_counter() - started
    reported = re.search(r"([\d.]+)s\)\s*$", cli.stdout.strip())
    print(json.dumps({"setting": "kohaku ask (CLI, bundled LLM, process start and model load included)",
                      "seconds": round(cli_seconds, 2), "answer_seconds": float(reported.group(1)) if reported else None,
                      "exit": cli.returncode, "answer": cli.stdout.strip().splitlines()[:1]}))  # fmt: skip
    app = build_app(ServeSettings(lake=lake, config=None, queue_size=8))
    with serving(app) as url:
        questions = [(f"{q} (client {i + 1})" if i >= len(BUNDLED_QUESTIONS) else q, u) for i, (q, u) in
                     enumerate((BUNDLED_QUESTIONS * 4)[: args.clients])]  # fmt: skip
        row = load(url, "default", questions, args.clients)
    print(json.dumps({"setting": f"kohaku serve, bundled LLM, {args.clients} concurrent clients", **row}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundled", action="store_true", help="the bundled LLM (wrap in flock /tmp/kohaku-llm.lock)")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (default 8; 3 with --bundled)")
    parser.add_argument("--questions", type=int, default=4, help="questions per client (fake model)")
    parser.add_argument("--delay", type=float, default=0.25, help="the fake model's seconds per request")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    args.clients = args.clients or (3 if args.bundled else 8)
    work = Path(args.work or tempfile.mkdtemp(prefix="kohaku-serve-load-"))
    (run_bundled if args.bundled else run_fake)(args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
