"""Table repairs by the bundled model (index setting `table_repair`): of the WattBot corpus's
text tables the parser leaves unaligned, how many a repair turns into a checked record, why
the others stay text, the time per table, and whether a repaired table's cells are right
against the hand-checked cells of bench/indexing/tables.py (TRUTH, HELD_OUT when present).

    python bench/indexing/table_repair.py [--wattbot ../shared/wattbot] [--limit 12] [--docs a,b] [--captioned]

Run it alone: its seconds are the model's on this machine. The checks make an invented cell
impossible by construction (every cell is a run of the table's tokens); "invented" counts the
accepted cells whose number does not appear in the block, to show it stays 0.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.indexing import tables as truth_tables  # noqa: E402
from kohaku_rag.document.table_record import TableRecord, caption_label  # noqa: E402
from kohaku_rag.indexing.corpus import DocumentMeta, SourceDocument  # noqa: E402
from kohaku_rag.indexing.table_repair import repair_block, unaligned_blocks  # noqa: E402
from kohaku_rag.llm import LLMSpec, make_chat_model  # noqa: E402

SHARED = Path(os.environ.get("KOHAKU_SHARED", Path(__file__).resolve().parents[3] / "shared"))
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wattbot", type=Path, default=SHARED / "wattbot")
    ap.add_argument("--limit", type=int, default=12, help="blocks to ask (in document order)")
    ap.add_argument("--docs", default="", help="only these documents (comma-separated)")
    ap.add_argument(
        "--captioned", action="store_true", help="only blocks under a 'Table N' caption (real tables, not chart text)"
    )
    args = ap.parse_args()
    paths = sorted((args.wattbot / "corpus_json").glob("*.json"))
    wanted = {d for d in args.docs.split(",") if d}
    blocks = []
    for path in paths:
        if wanted and path.stem not in wanted:
            continue
        source = SourceDocument(path.stem, path, "json", "bench", DocumentMeta(path.stem))
        blocks += [(path.stem, b) for b in unaligned_blocks(source) if b.caption or not args.captioned]
    print(f"unaligned text tables: {len(blocks)}; asking {min(len(blocks), args.limit)}")
    if args.limit <= 0:
        return
    chat = make_chat_model(LLMSpec(n_ctx=4096), Path.cwd())
    truth = [*truth_tables.TRUTH, *getattr(truth_tables, "HELD_OUT", ())]
    accepted: list[tuple[str, TableRecord]] = []
    seconds: list[float] = []
    invented = 0
    started = time.perf_counter()
    for doc, block in blocks[: args.limit]:
        repair = repair_block(block, chat, "bench")
        seconds.append(repair.seconds)
        label = caption_label(block.caption) or "(no caption)"
        if repair.record is None:
            print(f"  -- {doc:22s} {label:10s} {repair.seconds:6.1f}s  stays text: {repair.reason[:90]}")
            continue
        accepted.append((doc, repair.record))
        source_numbers = set(_NUMBER.findall(" ".join(block.lines)))
        for row in repair.record.rows:
            invented += sum(n not in source_numbers for c in row.cells for n in _NUMBER.findall(c))
        shape = f"{len(repair.record.rows)}x{len(repair.record.columns)}"
        print(f"  ok {doc:22s} {label:10s} {repair.seconds:6.1f}s  {shape} columns {list(repair.record.columns)[:4]}")
    close = getattr(chat, "close", None)
    if close is not None:
        close()
    asked = len(seconds)
    print(f"repaired: {len(accepted)}/{asked}; invented numbers in accepted cells: {invented}")
    if seconds:
        print(f"seconds per table: mean {sum(seconds) / asked:.1f}, max {max(seconds):.1f}; "
              f"all {time.perf_counter() - started:.0f}s; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    checked = right = 0
    for doc, record in accepted:
        for cell in truth:
            if cell.doc != doc or (cell.table and cell.table != record.label):
                continue
            got = truth_tables.lookup([record], cell)
            checked += 1
            right += got is not None and got.strip() == cell.value
            print(f"  hand-checked {doc} {cell.table} {cell.row!r} {cell.column!r}: want {cell.value!r} got {got!r}")
    print(f"hand-checked cells in repaired tables: {right}/{checked} right")


if __name__ == "__main__":
    main()
