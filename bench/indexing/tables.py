"""Tables kept as records (issue 41): how many the parsers recover, and whether their cells
sit under the right row and column, against cells checked by hand.

    python bench/indexing/tables.py [--wattbot ../shared/wattbot] [--pdfs ../shared/pdfs]

Prints, on the WattBot JSON corpus: the "Table N" captions in the text, the table blocks
found, those aligned (a name per column) and those with a caption; then the hand-checked
cells of 20 tables (TRUTH, read off the corpus's text files by hand, including tables the
parser is known to miss): cells right, per table. Then the same for the three shared PDFs
(PDF_TRUTH, read off the rendered pages). On main before this issue no table had a record:
0 cells right on both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kohaku_rag.parse.payload import parse_payload_json  # noqa: E402
from kohaku_rag.parse.pdf import parse_pdf  # noqa: E402
from kohaku_rag.parse.text_tables import split_tables  # noqa: E402
from kohaku_rag.table_record import TableRecord  # noqa: E402
from kohaku_rag.tree import ParsedDocument  # noqa: E402

SHARED = Path(os.environ.get("KOHAKU_SHARED", Path(__file__).resolve().parents[3] / "shared"))
_CAPTION = re.compile(r"^\s*Table\s+(\d+)\s*[:.]")


@dataclass(frozen=True)
class Cell:
    doc: str
    table: str  # "Table 2"
    row: str  # text the row's label contains
    column: str  # text the column's name contains
    value: str
    first: str | None = None  # the row's first cell, where several rows share a label


# 20 tables of the WattBot corpus, cells read off text/<doc>.txt by hand (2026-11-27). Some
# are laid out so the parser keeps them as text (li2025a Tables 1-2, chen2024 Table 3,
# griggs2024 Table 2, han2024 Table 1): their cells count as missed.
TRUTH = (
    Cell("luccioni2024", "Table 2", "text generation", "mean", "0.047"),
    Cell("luccioni2024", "Table 2", "image generation", "std", "3.31"),
    Cell("luccioni2024", "Table 5", "Training energy", "BLOOMz-7B", "51,686"),
    Cell("luccioni2024", "Table 5", "Cost parity", "BLOOMz-560M", "204,592,592"),
    Cell("li2025a", "Table 3", "net tCO2e", "FLM-101B", "26"),
    Cell("li2025a", "Table 3", "Energy", "GPT-3", "1171"),
    Cell("li2025a", "Table 7", "FLM-101B", "Cost", "28.22"),
    Cell("li2025a", "Table 2", "", "Utilization", "52.88%", first="101"),
    Cell("li2025a", "Table 1", "", "Learning Rate", "2e−4", first="101"),
    Cell("morrison2025", "Table 4", "Llama 3.2 1B", "GPU Power Usage", "0.036", first="8"),
    Cell("morrison2025", "Table 4", "OLMo 2 7B", "Water", "0.533", first="1"),
    Cell("dodge2022", "Table 1", "Fraction", "GPU", "74%"),
    Cell("dodge2022", "Table 2", "kWh", "BERT pretrain", "37.3"),
    Cell("dodge2022", "Table 2", "Hours", "6B Transf.", "192"),
    Cell("chen2024", "Table 3", "LLaMA-65B", "d", "8192"),
    Cell("chen2024", "Table 4", "Azure-Conv", "lp", "1154.7"),
    Cell("fernandez2025", "Table 1", "Azure Chat", "Median", "928"),
    Cell("fernandez2025", "Table 2", "BurstGPT", "99th", "478"),
    Cell("strubell2019", "Table 3", "ELMo", "Hours", "336"),
    Cell("strubell2019", "Table 1", "Transformer (big)", "CO", "192"),
    Cell("luccioni2025c", "Table 1", "GPT-3", "Energy Consumption", "1,287"),
    Cell("erben2023", "Table 6", "CONV", "8xT4", "261.9"),
    Cell("han2024", "Table 5", "2023", "SO2", "717409.25"),
    Cell("han2024", "Table 1", "2023", "Electricity (TWh)", "176.39"),
    Cell("griggs2024", "Table 2", "1", "Arena, SLO=40ms", "0.177"),
)

# The three shared PDFs, cells read off their pages by hand.
PDF_TRUTH = (
    Cell("he2015_resnet_1512.03385", "Table 2", "34 layers", "ResNet", "25.03"),
    Cell("he2015_resnet_1512.03385", "Table 2", "18 layers", "plain", "27.94"),
    Cell("he2015_resnet_1512.03385", "Table 5", "ResNet (ILSVRC", "top-5 err", "3.57"),
    Cell("he2015_resnet_1512.03385", "Table 6", "ResNet", "error", "6.43 (6.61±0.16)", first="110"),
    Cell("he2015_resnet_1512.03385", "Table 8", "ResNet-101", "mAP@.5", "48.4"),
    Cell("he2015_resnet_1512.03385", "Table 12", "our ensemble", "test", "62.1"),
    Cell("he2015_resnet_1512.03385", "Table 14", "ours", "test", "9.0"),
    Cell("vaswani2017_attention_1706.03762", "Table 4", "Transformer (4 layers)", "F1", "91.3"),
    Cell("vaswani2017_attention_1706.03762", "Table 2", "Transformer (big)", "BLEU", "28.4"),
    Cell("wattbot2025_attentionplease_slides", "", "Text-Only (Clean)", "MRR", "0.8974"),
    Cell("wattbot2025_attentionplease_slides", "", "Hybrid (Noise)", "nDCG@10", "0.8617"),
)


def records(doc: ParsedDocument) -> list[TableRecord]:
    return [p.table for s in doc.sections for p in s.paragraphs if p.table is not None]


def lookup(tables: Iterable[TableRecord], cell: Cell) -> str | None:
    """The value the parse holds at the cell's row and column (None: no such cell)."""
    for table in tables:
        if cell.table and table.label != cell.table:
            continue
        cols = [j for j, name in enumerate(table.columns) if cell.column.lower() in name.lower()]
        for row in table.rows:
            if cell.row.lower() not in row.label.lower():
                continue
            if cell.first is not None and (not row.cells or row.cells[0] != cell.first):
                continue
            for j in cols:
                if row.cells[j]:
                    return row.cells[j]
    return None


def score(parsed: dict[str, ParsedDocument], truth: Iterable[Cell]) -> None:
    right = total = 0
    per_table: dict[tuple[str, str], list[bool]] = {}
    for cell in truth:
        got = lookup(records(parsed[cell.doc]), cell)
        ok = got is not None and got.strip() == cell.value
        right += ok
        total += 1
        per_table.setdefault((cell.doc, cell.table), []).append(ok)
        mark = "ok " if ok else "-- "
        print(f"  {mark}{cell.doc:36s} {cell.table or '(no caption)':9s} {cell.row[:24]:24s} {cell.column[:20]:20s} "
              f"want {cell.value!r:18s} got {got!r}")  # fmt: skip
    tables_right = sum(all(v) for v in per_table.values())
    print(f"  cells right: {right}/{total}; tables with every checked cell right: {tables_right}/{len(per_table)}")


def corpus_counts(wattbot: Path) -> None:
    captions = found = aligned = captioned = 0
    for path in sorted((wattbot / "corpus_json").glob("*.json")):
        payload = json.loads(path.read_text(encoding="utf-8"))
        labels: set[str] = set()
        for section in payload["sections"]:
            text = "\n\n".join(str(p.get("text") or "") for p in section.get("paragraphs") or [])
            lines = text.splitlines()
            labels |= {m.group(1) for ln in lines if (m := _CAPTION.match(ln))}
            for table in split_tables(lines):
                found += 1
                aligned += table.record is not None
                captioned += bool(table.caption)
        captions += len(labels)
    print(f"  'Table N' captions in the text: {captions} (distinct per document)")
    print(f"  table blocks found: {found}; aligned (a name per column): {aligned}; with their caption: {captioned}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wattbot", type=Path, default=SHARED / "wattbot")
    ap.add_argument("--pdfs", type=Path, default=SHARED / "pdfs")
    args = ap.parse_args()
    print("WattBot JSON corpus")
    corpus_counts(args.wattbot)
    docs = {c.doc for c in TRUTH}
    parsed = {d: parse_payload_json(args.wattbot / "corpus_json" / f"{d}.json", d) for d in sorted(docs)}
    print(f"hand-checked cells of {len({(c.doc, c.table) for c in TRUTH})} tables:")
    score(parsed, TRUTH)
    print("shared PDFs")
    pdfs = {p.stem: parse_pdf(p, p.stem) for p in sorted(args.pdfs.glob("*.pdf"))}
    n = sum(len(records(d)) for d in pdfs.values())
    print(f"  tables kept as records: {n}")
    score(pdfs, PDF_TRUTH)


if __name__ == "__main__":
    main()
