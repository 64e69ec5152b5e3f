"""What each field of the answering reply costs: tokens per field, from stored replies.

    python bench/answering/reply_fields.py LAKE [LAKE ...] [--rate TOKENS_PER_S]

Reads every answering call's raw reply in the lakes' debug tables (`qa/debug/*/run-*.parquet`),
splits its JSON into fields in the order they were written, and counts each field's tokens
(`"name": value,` as the bundled model's tokenizer writes them; its vocabulary is loaded
alone, no weights). Prints per field the mean tokens per reply, the share of the reply and the
seconds it costs at --rate generated tokens per second (llm_speed.py measures it: ~30 on 2
cores). Issue 44: order and shorten the reply so the reader waits for no token it skips.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq


def replies(lake: Path) -> list[dict[str, object]]:
    """The parsed JSON replies of every answering call stored in `lake`."""
    out = []
    for path in sorted(lake.glob("qa/debug/*/run-*.parquet")):
        for row in pq.read_table(path, columns=["kind", "reply"]).to_pylist():
            if not str(row["kind"]).startswith("answer"):
                continue
            try:
                data = json.loads(row["reply"])
            except (TypeError, ValueError):
                continue
            if isinstance(data, dict):
                out.append(data)
    return out


def field_tokens(data: dict[str, object], count: Callable[[str], int]) -> dict[str, int]:
    """Tokens of each `"name": value` as written in the reply, in order."""
    return {name: count(f'"{name}": {json.dumps(value, ensure_ascii=False)}, ') for name, value in data.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lakes", nargs="+", type=Path)
    parser.add_argument("--rate", type=float, default=30.0, help="generated tokens per second")
    args = parser.parse_args()
    from llama_cpp import Llama

    from kohaku_rag.llm.model_files import bundled_model

    vocab = Llama(model_path=str(bundled_model()), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    for lake in args.lakes:
        rows = replies(lake)
        if not rows:
            print(f"{lake}: no stored answering replies")
            continue
        per_field: dict[str, list[int]] = defaultdict(list)
        totals = []
        for data in rows:
            tokens = field_tokens(data, count)
            totals.append(sum(tokens.values()) + 2)  # the braces
            for name, n in tokens.items():
                per_field[name].append(n)
        mean_total = statistics.mean(totals)
        print(
            f"{lake}: {len(rows)} replies, {mean_total:.1f} tokens each ({mean_total / args.rate:.2f} s at {args.rate:g}/s)"
        )
        print(f"  {'field':<22}{'replies':>8}{'mean tok':>10}{'share':>8}{'seconds':>9}")
        for name, values in per_field.items():
            share = sum(values) / sum(totals)
            mean = sum(values) / len(rows)
            print(f"  {name:<22}{len(values):>8}{mean:>10.1f}{share:>8.1%}{mean / args.rate:>9.2f}")


if __name__ == "__main__":
    main()
