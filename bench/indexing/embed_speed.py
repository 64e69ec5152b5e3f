"""Sentences per second of the in-process embedders (MiniLM int8 ONNX, e5-small 4-bit).

Sentences come from strubell2019.txt (split with the project's splitter); when it has fewer
than --count, the other WattBot texts fill the rest, in file-name order. Each backend is
warmed up, then timed --repeats times on the whole list; the best wall time counts, since
other processes on a shared machine only ever slow a run down. CPU seconds are printed too:
they show the work done whatever the load, and the load average says how shared it was.

    python bench/indexing/embed_speed.py [--count 500] [--repeats 3] [--backends minilm e5]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from kohaku_rag.embed import EmbedderSpec, make_embedder
from kohaku_rag.embed.minilm import load_tokenizer, usable_cores
from kohaku_rag.parse.sentences import split_sentences

TEXTS = Path(__file__).resolve().parents[3] / "shared" / "wattbot" / "text"
FIRST = "strubell2019.txt"


def bench_sentences(folder: Path, count: int) -> list[str]:
    files = [folder / FIRST] + sorted(p for p in folder.glob("*.txt") if p.name != FIRST)
    sentences: list[str] = []
    for path in files:
        if not path.exists():
            raise SystemExit(f"{path}: missing; pass --texts pointing at the WattBot text folder")
        sentences += split_sentences(path.read_text(encoding="utf-8"))
        if len(sentences) >= count:
            break
    return sentences[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=Path, default=TEXTS)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["minilm", "e5"], choices=["minilm", "e5"])
    args = parser.parse_args()

    sentences = bench_sentences(args.texts, args.count)
    tokens = [len(e.ids) for e in load_tokenizer().encode_batch(sentences)]
    print(
        f"{len(sentences)} sentences, MiniLM tokens mean {sum(tokens) / len(tokens):.1f} "
        f"max {max(tokens)}; {usable_cores()} cores; load average {os.getloadavg()[0]:.2f}"
    )
    for backend in args.backends:
        embedder = make_embedder(EmbedderSpec(backend=backend))  # type: ignore[arg-type]
        embedder.embed(sentences[:16])
        best_wall, best_cpu = float("inf"), 0.0
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            embedder.embed(sentences)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if wall < best_wall:
                best_wall, best_cpu = wall, cpu
        print(
            f"{embedder.model_id:48s} {len(sentences) / best_wall:7.1f} sentences/s  "
            f"(wall {best_wall:.2f} s, cpu {best_cpu:.2f} s)"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
