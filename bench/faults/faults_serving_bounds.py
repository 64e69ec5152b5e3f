"""Serving faults and bounds: a killed server process leaves no answer running forever, and
nothing a request can send makes a reply, a post or a refusal unbounded.

    python bench/faults/faults_serving_bounds.py [--work DIR] [--lease 5] [--only leases,quote,chat,feedback]

Runs real `kohaku serve` processes on a small indexed lake (the serving tests' corpus) with a
fake OpenAI-compatible model on 127.0.0.1 (tests/support/qa_server.py):

  leases    three processes; 8 questions streamed to one of them, which is killed with SIGKILL
            while it answers. Held when every answer id, polled on the other two, is answered
            (taken over) or failed with its reason within 1.25 leases plus an answer's time,
            and feedback on each answered one is kept.
  quote     the quote of a 10,000-row table cited for a value no row states (and for one that
            thousands of rows state). Held when it is at most 20 rows and 4,000 characters and
            says how many rows it left out.
  chat      /v1/chat/completions with 40 exchanges of 1,500-character replies (65 kB), 400 of
            them (650 kB), and a body over the 4 MB cap. Held: 200, 200, 413.
  feedback  feedback post latency with 0, 1,000 and 10,000 verdicts already in the store: 30
            posts one after another, then 80 at once; and how long the `feedback` question set
            takes to hold them all. Held when the median post at 10,000 is within 3x of the
            median at 0 (flat in the number of verdicts). Timings: rerun on a quiet machine.

Prints one line per scenario ending in `held` or `FAILED`, then the feedback timings.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

import kohaku_rag as kr  # noqa: E402
from kohaku_rag.document.table_record import TableRecord, TableRow, table_text  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.serving.feedback import feedback_set_path, write_question_set  # noqa: E402
from kohaku_rag.serving.served_store import connection, insert_feedback, transaction  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402
from kohaku_rag.serving.table_rows import QUOTE_CHARS, QUOTE_ROWS, record_quote, table_quote  # noqa: E402
from tests.support.qa_server import QUESTIONS, VariantServer  # noqa: E402
from tests.support.serve_process import kohaku_serve_process  # noqa: E402
from tests.support.serving_corpus import write_config, write_serving_corpus  # noqa: E402

FACTS = list(QUESTIONS.items())


def verdict(ok: bool) -> str:
    return "held" if ok else "FAILED"


def build_lake(work: Path) -> Path:
    """The serving corpus, indexed once; each scenario works on a copy."""
    base = work / "base"
    if not (base / "lake").exists():
        summary = kr.index(write_serving_corpus(base / "corpus"), base / "lake", progress=lambda _m: None)
        assert not summary.failed, summary.failed
    return base / "lake"


def lake_copy(base: Path, work: Path, name: str) -> Path:
    lake = work / name
    shutil.rmtree(lake, ignore_errors=True)
    return Path(shutil.copytree(base, lake))


def wait_for(check: Callable[[], object], timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    return None


# ── leases ──────────────────────────────────────────────────────────────────


def leases(base: Path, work: Path, lease: float) -> bool:
    lake = lake_copy(base, work, "lake-leases")
    flags = ("--config", "fake", "--job-lease", str(lease), "--feedback-per-minute", "1000")
    with VariantServer() as llm, ExitStack() as stack:
        llm.default_delay = 3.0
        write_config(lake, "fake", llm.base_url, max_concurrent=4)
        started = [stack.enter_context(kohaku_serve_process(lake, *flags)) for _ in range(3)]
        (doomed_url, doomed), others = started[0], [url for url, _ in started[1:]]
        ids: list[str] = []
        for i in range(8):
            question, (unit, _value, _doc) = FACTS[i % len(FACTS)]
            body = {"question": f"{question} [v{i}]", "unit": unit, "stream": True}
            with httpx.stream("POST", f"{doomed_url}/api/ask", json=body, timeout=60) as reply:
                first = next(line for line in reply.iter_lines() if line.startswith("data: "))
                ids.append(json.loads(first[6:])["answer_id"])
        wait_for(lambda: len(llm.requests) >= 4, 30)  # the model is working on the first four
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
        killed = time.monotonic()
        llm.default_delay = 0.5
        settled: dict[str, tuple[int, float, str]] = {}

        def poll(i: int) -> None:
            url = others[i % 2]
            while time.monotonic() - killed < 600:
                r = httpx.get(f"{url}/api/answers/{ids[i]}", timeout=30)
                if r.status_code != 202:
                    why = r.json().get("error", {}).get("message", "") if r.status_code != 200 else ""
                    settled[ids[i]] = (r.status_code, time.monotonic() - killed, why)
                    return
                time.sleep(0.5)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(poll, range(8)))
        kept = 0
        for i, answer_id in enumerate(ids):
            if settled.get(answer_id, (0,))[0] == 200:
                body = {"answer_id": answer_id, "verdict": "right"}
                kept += httpx.post(f"{others[(i + 1) % 2]}/api/feedback", json=body, timeout=30).status_code == 200
    answered = sum(1 for s, _t, _w in settled.values() if s == 200)
    failed = [w for s, _t, w in settled.values() if s != 200 and w]
    stuck = len(ids) - len(settled)
    slowest = max((t for _s, t, _w in settled.values()), default=float("nan"))
    bound = 1.25 * lease + 8 * 2 * 0.5 + 10  # the lease, the answers (two calls each) one after another, slack
    ok = stuck == 0 and answered + len(failed) == len(ids) and slowest < bound and kept == answered
    print(
        f"leases: kill -9 of 1 of 3 processes with {len(ids)} questions on it (--job-lease {lease:g}): "
        f"{answered} answered by another process, {len(failed)} failed with a reason, {stuck} stuck; "
        f"all settled {slowest:.1f} s after the kill (bound {bound:.0f} s); feedback kept on {kept}/{answered} "
        f"-> {verdict(ok)}"
    )
    for why in failed[:2]:
        print(f"  failed: {why}")
    return ok


# ── quote ───────────────────────────────────────────────────────────────────


def quote() -> bool:
    rows = tuple(TableRow(f"model-{i}", (f"{1000 + i}.5", f"{i % 97}")) for i in range(10_000))
    table = TableRecord("Table 7", "Table 7: Energy per request.", "model", ("energy (Wh)", "requests"), rows)
    text = "\n".join(["Table 7: Energy per request.", *(f"model-{i} | {1000 + i}.5 | {i % 97}" for i in range(10_000))])
    quotes = {
        "record, no row states it": record_quote(table, "123456.7"),
        "record, 103 rows state it": record_quote(table, "5"),
        "text table, no row states it": table_quote(text, "123456.7"),
        "text table, 103 rows state it": table_quote(text, "5"),
    }
    ok = all(len(q) <= QUOTE_CHARS and q.count("\n") <= QUOTE_ROWS + 2 and "not quoted" in q for q in quotes.values())
    sizes = ", ".join(f"{k}: {len(q):,} chars" for k, q in quotes.items())
    print(f"quote: a 10,000-row table ({len(table_text(table)):,} chars whole): {sizes} -> {verdict(ok)}")
    print(f"  last line: {quotes['record, no row states it'].splitlines()[-1]}")
    return ok


# ── /v1 long chat ───────────────────────────────────────────────────────────


def chat_messages(exchanges: int) -> list[dict[str, str]]:
    reply = "The measured figure is reported in the second table of the study. " * 23
    earlier: list[dict[str, str]] = []
    for i in range(exchanges):
        earlier += [
            {"role": "user", "content": f"What did study {i} measure?"},
            {"role": "assistant", "content": reply},
        ]
    question = FACTS[2][0]
    return [{"role": "system", "content": "Be brief."}, *earlier, {"role": "user", "content": question}]


def chat(base: Path, work: Path) -> bool:
    lake = lake_copy(base, work, "lake-chat")
    outcomes = []
    with VariantServer() as llm, ExitStack() as stack:
        write_config(lake, "fake", llm.base_url)
        url, _proc = stack.enter_context(kohaku_serve_process(lake, "--config", "fake"))
        for exchanges in (40, 400, 3_000):
            body = {"model": "fake", "messages": chat_messages(exchanges)}
            size = len(json.dumps(body))
            r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
            outcomes.append((exchanges, size, r.status_code))
    ok = [s for _e, _b, s in outcomes] == [200, 200, 413]
    shown = "; ".join(f"{e} exchanges ({b / 1000:,.0f} kB): {s}" for e, b, s in outcomes)
    print(f"chat: /v1 with {shown} (cap {ServeSettings.max_chat_body_bytes / 1e6:g} MB) -> {verdict(ok)}")
    return ok


# ── feedback latency ────────────────────────────────────────────────────────


def seed_verdicts(lake: Path, n: int) -> None:
    """n verdicts on n distinct questions, in the store, and the question set built once."""
    now = datetime.now(UTC)
    with connection(Lake(lake)) as db, transaction(db):
        for i in range(n):
            question, (unit, value, doc) = FACTS[i % len(FACTS)]
            insert_feedback(
                db,
                {
                    "time": now,
                    "answer_id": f"{i:032x}",
                    "question": f"{question} [s{i}]",
                    "config": "fake",
                    "served_answer": f"{value} {unit}",
                    "served_value": value,
                    "served_unit": unit,
                    "served_refs": [doc],
                    "verdict": "right",
                },  # fmt: skip
            )
    if n:
        write_question_set(Lake(lake))


def rows_in_set(lake: Path) -> int:
    path = feedback_set_path(Lake(lake))
    return path.read_text(encoding="utf-8").count("\n") - 1 if path.exists() else 0


def feedback_at(base: Path, work: Path, n: int) -> dict[str, float]:
    lake = lake_copy(base, work, f"lake-feedback-{n}")
    seed_verdicts(lake, n)
    rebuilds = []  # the baseline: what every post cost before, a rebuild of the whole question set
    for _ in range(3):
        started = time.perf_counter()
        write_question_set(Lake(lake))
        rebuilds.append(time.perf_counter() - started)
    flags = ("--config", "fake", "--feedback-per-minute", "100000", "--feedback-per-answer", "100000")
    with VariantServer() as llm, ExitStack() as stack:
        write_config(lake, "fake", llm.base_url)
        url, _proc = stack.enter_context(kohaku_serve_process(lake, *flags))
        answers = []
        for i in range(110):
            question, (unit, _value, _doc) = FACTS[i % len(FACTS)]
            r = httpx.post(f"{url}/api/ask", json={"question": f"{question} [v{i}]", "unit": unit}, timeout=60)
            answers.append(r.json()["answer_id"])

        def post(answer_id: str) -> float:
            started = time.perf_counter()
            r = httpx.post(f"{url}/api/feedback", json={"answer_id": answer_id, "verdict": "right"}, timeout=300)
            assert r.status_code == 200, r.text
            return time.perf_counter() - started

        one_by_one = [post(a) for a in answers[:30]]
        with ThreadPoolExecutor(80) as pool:
            at_once = list(pool.map(post, answers[30:110]))
        posted = time.monotonic()
        expected = n + 110
        wait_for(lambda: rows_in_set(lake) >= expected, 300)
        caught_up = time.monotonic() - posted
    return {
        "rebuild": statistics.median(rebuilds),
        "median": statistics.median(one_by_one),
        "max": max(one_by_one),
        "burst_median": statistics.median(at_once),
        "burst_max": max(at_once),
        "file_seconds": caught_up,
        "rows": rows_in_set(lake),
        "expected": expected,
    }


def feedback(base: Path, work: Path) -> bool:
    results = {n: feedback_at(base, work, n) for n in (0, 1_000, 10_000)}
    flat = results[10_000]["median"] <= 3 * max(results[0]["median"], 0.01)
    complete = all(r["rows"] == r["expected"] for r in results.values())
    ok = flat and complete
    print(
        f"feedback: median post {results[0]['median'] * 1000:.0f} ms at 0 verdicts, "
        f"{results[10_000]['median'] * 1000:.0f} ms at 10,000; every verdict in the question set: {complete} "
        f"-> {verdict(ok)}"
    )
    print()
    print(
        "| verdicts in the store | a whole rebuild (each post's cost before) | 30 posts: median | max "
        "| 80 at once: median | max | question set complete after |"
    )
    print("|---|---|---|---|---|---|---|")
    for n, r in results.items():
        print(
            f"| {n:,} | {r['rebuild'] * 1000:.0f} ms | {r['median'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms "
            f"| {r['burst_median'] * 1000:.0f} ms "
            f"| {r['burst_max'] * 1000:.0f} ms | {r['file_seconds']:.1f} s |"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/kohaku-bench-serving-bounds")
    parser.add_argument("--lease", type=float, default=5.0, help="--job-lease of the leases scenario (seconds)")
    parser.add_argument("--only", default="leases,quote,chat,feedback")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    base = build_lake(work)
    results = []
    if "leases" in only:
        results.append(leases(base, work, args.lease))
    if "quote" in only:
        results.append(quote())
    if "chat" in only:
        results.append(chat(base, work))
    if "feedback" in only:
        results.append(feedback(base, work))
    print()
    print(f"{sum(results)} of {len(results)} held")


if __name__ == "__main__":
    main()
