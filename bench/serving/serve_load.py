"""`kohaku serve` under load: N concurrent clients asking distinct questions through a real
uvicorn on 127.0.0.1, streaming (so the time to the first progress event is measured too).

    python bench/serving/serve_load.py [--clients 8] [--questions 4] [--delay 0.25]
        a fake OpenAI-compatible model on 127.0.0.1 answering after --delay seconds per
        request (tests/support/qa_server.py), the config's max_concurrent = 4
    python bench/serving/serve_load.py --hang-up [--clients 12] [--leave 8] [--delay 0.5]
        clients that hang up: --leave of the --clients (asking first) close their stream after
        --after seconds; the fake model takes one request at a time. The same load twice: with
        abandoned questions keeping their places (the old behaviour: a grace longer than the
        run) and with them leaving the queue (the 2 s default grace): the staying clients'
        p50/p95, 429s, and how many abandoned questions the model still answered
    python bench/serving/serve_load.py --processes 2 [--asks 80] [--feedback 150] [--clients 16]
        N real `kohaku serve` processes on one lake (round robin, no sticky sessions), the fake
        model answering after --delay seconds: --asks distinct questions and --feedback verdicts
        per process, all at once, each verdict sent to another process than the one that
        answered; answers and verdicts a second, their p50/p95, and rows lost (served_answers
        and served_feedback counted in the lake's store afterwards)
    flock /tmp/kohaku-llm.lock python bench/serving/serve_load.py --bundled [--clients 3]
        the sample PDFs answered by the bundled LLM (one prompt at a time: the queue), and
        `kohaku ask`'s time for the same kind of question in the same run as the baseline

Prints one JSON line per setting: answers, errors, refused (429), p50/p95 of the time to
answer and to the first progress event, wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

import kohaku_rag as kr  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.samples import write_sample_corpus  # noqa: E402
from kohaku_rag.serving.app import build_app  # noqa: E402
from kohaku_rag.serving.feedback import read_feedback  # noqa: E402
from kohaku_rag.serving.served_answers import all_rows  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402
from tests.support.asgi_server import serving  # noqa: E402
from tests.support.qa_server import QUESTIONS, VariantServer  # noqa: E402
from tests.support.serve_process import kohaku_serve  # noqa: E402
from tests.support.serving_corpus import write_config, write_serving_corpus  # noqa: E402

KOHAKU = "import sys; from kohaku_assets.cli import main; sys.exit(main(sys.argv[1:]))"

# Questions for the sample PDFs (kohaku sample-corpus), with their units.
BUNDLED_QUESTIONS = [
    ("By how much can an estimate from rated power overstate the device energy of a training run?", "percent"),
    ("Which GPU had the lowest power draw?", "is_blank"),
    ("What was the PUE of the data center?", "PUE"),
    ("How much water does inference consume per query?", "mL"),
]


def ask_streaming(
    url: str, question: str, unit: str, config: str, hang_up_after: float | None = None
) -> dict[str, object]:
    """One client's question: seconds to the first progress event and to the answer (a
    client that hangs up closes its stream once nothing arrived for `hang_up_after` s)."""
    started = time.perf_counter()
    first: float | None = None
    body = {"question": question, "unit": unit, "config": config, "stream": True}
    timeout = httpx.Timeout(3600, read=hang_up_after) if hang_up_after else 3600
    try:
        with httpx.stream("POST", f"{url}/api/ask", json=body, timeout=timeout) as r:
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
    except httpx.ReadTimeout:
        return {"status": 200, "outcome": "hung up", "seconds": time.perf_counter() - started}
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


def hang_up_load(url: str, questions: list[tuple[str, str]], leave: int, after: float) -> dict[str, object]:
    """Every question at once (20 ms apart, the leaving clients first): the staying clients'
    times, and what the leaving ones got."""
    results: list[tuple[bool, dict[str, object]]] = []
    lock = threading.Lock()

    def client(i: int, q: str, unit: str) -> None:
        leaves = i < leave
        res = ask_streaming(url, q, unit, "fake", hang_up_after=after if leaves else None)
        with lock:
            results.append((leaves, res))

    started = time.perf_counter()
    threads = []
    for i, (q, unit) in enumerate(questions):
        threads.append(threading.Thread(target=client, args=(i, q, unit)))
        threads[-1].start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    stayed = [r for leaves, r in results if not leaves]
    seconds = [float(r["seconds"]) for r in stayed if r.get("outcome") == "done"]  # type: ignore[arg-type]
    return {
        "clients": len(questions),
        "hung_up": sum(1 for leaves, r in results if leaves and r.get("outcome") == "hung up"),
        "staying_answered": len(seconds),
        "refused_429": sum(1 for _, r in results if r["status"] == 429),
        "staying_p50_s": percentile(seconds, 0.5),
        "staying_p95_s": percentile(seconds, 0.95),
        "wall_s": round(time.perf_counter() - started, 3),
    }


def served_rows(lake: Path) -> int:
    """Answers recorded as served (delivered to a client)."""
    return len(all_rows(Lake(lake)))


def run_hang_up(args: argparse.Namespace, work: Path) -> None:
    lake = work / "lake"
    kr.index(write_serving_corpus(work / "corpus"), lake, progress=lambda _m: None)
    facts = list(QUESTIONS.items())
    for label, grace in (("abandoned questions keep their places (before)", 1e9), ("they leave the queue", None)):
        # distinct questions per setting: no stored answer from the first setting serves the second
        first = 1 if grace else 1001
        questions = [(f"{facts[i % 3][0]} [v{first + i}]", facts[i % 3][1][0]) for i in range(args.clients)]
        served_before = served_rows(lake)
        with VariantServer() as llm:
            llm.default_delay = args.delay
            write_config(lake, "fake", llm.base_url, max_concurrent=1)
            settings = ServeSettings(lake=lake, config="fake", queue_size=args.clients)
            if grace is not None:
                settings = dataclasses.replace(settings, abandon_after=grace)
            with serving(build_app(settings)) as url:
                row = hang_up_load(url, questions, args.leave, args.after)
            leaving = {q for q, _ in questions[: args.leave]}
            row["abandoned_answered_by_model"] = len(
                {q for q in leaving if any(q in json.dumps(r.body) and "ref_id" in json.dumps(r.body)
                                            for r in llm.requests)}
            )  # fmt: skip
            row["served_rows"] = served_rows(lake) - served_before
        print(json.dumps({"setting": f"{label}; fake model {args.delay}s per request, one at a time", **row}))


def timed_post(url: str, body: dict[str, object], path: str) -> tuple[int, float, dict[str, object]]:
    started = time.perf_counter()
    try:
        r = httpx.post(f"{url}{path}", json=body, timeout=600)
    except httpx.HTTPError as exc:
        return 0, time.perf_counter() - started, {"error": type(exc).__name__}
    return r.status_code, time.perf_counter() - started, r.json()


def run_processes(args: argparse.Namespace, work: Path) -> None:
    """N serve processes on one lake: every ask, then every verdict, at once."""
    from concurrent.futures import ThreadPoolExecutor
    from contextlib import ExitStack

    lake = work / "lake"
    kr.index(write_serving_corpus(work / "corpus"), lake, progress=lambda _m: None)
    facts = list(QUESTIONS.items())
    n = args.processes
    asks = [(f"{facts[i % 3][0]} [v{i + 1}]", facts[i % 3][1][0]) for i in range(args.asks * n)]
    with VariantServer() as llm, ExitStack() as stack:
        llm.default_delay = args.delay
        write_config(lake, "fake", llm.base_url, max_concurrent=8)
        flags = ("--config", "fake", "--feedback-per-minute", "100000", "--feedback-per-answer", "100000")
        urls = [stack.enter_context(kohaku_serve(lake, *flags)) for _ in range(n)]
        served_before, feedback_before = served_rows(lake), len(read_feedback(Lake(lake)))
        with ThreadPoolExecutor(args.clients) as pool:
            started = time.perf_counter()
            asked = list(pool.map(lambda i: timed_post(urls[i % n], {"question": asks[i][0], "unit": asks[i][1]},
                                                       "/api/ask"), range(len(asks))))  # fmt: skip
            ask_wall = time.perf_counter() - started
            ids = [str(body.get("answer_id")) for status, _, body in asked if status == 200]

            def verdict(i: int) -> tuple[int, float, dict[str, object]]:
                body = {"answer_id": ids[i % len(ids)], "verdict": "wrong", "correct_value": str(i), "comment": "x"}
                return timed_post(urls[(i + 1) % n], body, "/api/feedback")

            started = time.perf_counter()
            said = list(pool.map(verdict, range(args.feedback * n)))
            feedback_wall = time.perf_counter() - started
    ok_asks = [s for status, s, _ in asked if status == 200]
    ok_feedback = [s for status, s, body in said if status == 200 and body.get("kept")]
    kept_answers = served_rows(lake) - served_before
    kept_feedback = len(read_feedback(Lake(lake))) - feedback_before
    print(json.dumps({
        "setting": f"{n} kohaku serve processes on one lake, fake model {args.delay}s per request",
        "asks": len(asks), "answers_200": len(ok_asks), "answers_per_s": round(len(ok_asks) / ask_wall, 1),
        "answer_p50_s": percentile(ok_asks, 0.5), "answer_p95_s": percentile(ok_asks, 0.95),
        "feedback_posts": len(said), "feedback_200": len(ok_feedback),
        "feedback_per_s": round(len(ok_feedback) / feedback_wall, 1),
        "feedback_p50_s": percentile(ok_feedback, 0.5), "feedback_p95_s": percentile(ok_feedback, 0.95),
        "answers_lost": len(ok_asks) - kept_answers, "feedback_lost": len(ok_feedback) - kept_feedback,
    }))  # fmt: skip


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
    parser.add_argument("--hang-up", action="store_true", help="clients that hang up (queue places freed)")
    parser.add_argument("--leave", type=int, default=8, help="clients that hang up (with --hang-up)")
    parser.add_argument("--after", type=float, default=1.0, help="seconds before they hang up (with --hang-up)")
    parser.add_argument("--processes", type=int, default=0, help="N serve processes on one lake (asks + feedback)")
    parser.add_argument("--asks", type=int, default=80, help="questions per process (with --processes)")
    parser.add_argument("--feedback", type=int, default=150, help="verdicts per process (with --processes)")
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    args.clients = args.clients or (3 if args.bundled else 12 if args.hang_up else 16 if args.processes else 8)
    work = Path(args.work or tempfile.mkdtemp(prefix="kohaku-serve-load-"))
    if args.processes:
        run_processes(args, work)
        return 0
    (run_bundled if args.bundled else run_hang_up if args.hang_up else run_fake)(args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
