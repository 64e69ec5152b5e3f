"""A table the parser could not align, repaired by a model and kept only when the code can
check the repair (the index's `table_repair`).

text_tables.py aligns a block of lines into rows and columns by rules, and never by guess:
a block it cannot read stays in the running text, where a small model reading it takes a
neighbouring number. Here a model writes such a block's columns and rows once, at index
time, and the repair is accepted only when:

* the shape holds: at least two rows, every row with one cell per column;
* every row label and cell is a run of the block's own tokens, in reading order (row by
  row, or column by column for a table printed one column after the other), and every
  column name is made of the block's words: nothing is reworded;
* no number appears that the block lacks, and the cells keep at least `MIN_COVERAGE` of the
  block's numbers (a repair that drops rows is not the table).

Otherwise the table stays text, and the reason is kept. Repairs are kept per document
(`table_repairs/<doc>.parquet`), keyed by a digest of the block's lines, so a document
whose text did not change is never asked again; the tree reads them at its next build
(`repairs_digest` is part of the tree's version), so search works from the first run and
the tables improve when the repairs are in.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.document.table_record import (
    TABLE_TYPE,
    TableRecord,
    TableRow,
    caption_label,
    record_from_arrow,
    record_to_arrow,
)
from kohaku_rag.errors import BackendError
from kohaku_rag.indexing.corpus import SourceDocument, load_document
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_parquet_atomic
from kohaku_rag.llm import ChatModel, ChatRequest, Message
from kohaku_rag.llm.base import UnusableReply, extract_json, loads_json
from kohaku_rag.parse.text_tables import TextTable

__all__ = [
    "REPAIRS",
    "Repair",
    "block_key",
    "RepairStats",
    "read_repairs",
    "repair_block",
    "repair_document",
    "repair_lookup",
    "repair_request",
    "repairs_digest",
    "unaligned_blocks",
    "verify_repair",
    "write_repairs",
]

REPAIRS = "table_repairs"  # the lake folder (one Parquet file per document)
REPAIR_VERSION = "1"  # bump when the prompt or the checks change: every block is asked again
MAX_BLOCK_CHARS = 2500  # a longer block is not asked (its reply would not fit the model's budget)
MIN_COVERAGE = 0.8
MAX_COLUMNS = 16
MAX_ROWS = 60
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

SYSTEM = "You copy a table from extracted text into JSON. Copy every name and cell exactly as written."
INSTRUCTIONS = (
    "Write this table as JSON: columns = the names of the value columns (not the row-name column); "
    "rows = one per table row, each with label = the row's name and cells = its cells, one per "
    'column, "" where a cell is empty. Copy the text exactly; never compute, round or add a value.'
)


@dataclass(frozen=True)
class Repair:
    """One block's repair: the record when it was accepted, else why not."""

    key: str
    page: int | None
    record: TableRecord | None
    reason: str  # "" when accepted
    seconds: float = 0.0


def block_key(block: TextTable, model: str = "") -> str:
    """A block's identity: its lines, the repair's version and the model asked (another model
    asks again)."""
    text = "\n".join(block.lines)
    return hashlib.sha256(f"{REPAIR_VERSION}\n{model}\n{text}".encode()).hexdigest()[:24]


def unaligned_blocks(source: SourceDocument, use_outline: bool = True) -> list[TextTable]:
    """The text tables of a document that the parser left unaligned, found by the parse the
    tree is built with (so their keys are the ones the tree's build looks up)."""
    found: list[TextTable] = []

    def collect(block: TextTable) -> None:
        found.append(block)

    load_document(source, use_outline=use_outline, tables=True, repair=collect)
    return found


@dataclass(frozen=True)
class RepairStats:
    blocks: int
    asked: int  # blocks asked this time (the others were repaired or refused before)
    accepted: int
    refused: dict[str, str]  # block key -> why
    seconds: float


def repair_document(
    lake: Lake,
    source: SourceDocument,
    chat: ChatModel,
    model: str,
    use_outline: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> RepairStats:
    """Repair every unaligned block of a document not asked before; keep all its repairs."""
    blocks = unaligned_blocks(source, use_outline)
    known = read_repairs(lake, source.doc_id)
    repairs: list[Repair] = []
    asked = 0
    for i, block in enumerate(blocks, 1):
        kept = known.get(block_key(block, model))
        if kept is None:
            kept = repair_block(block, chat, model)
            asked += 1
        repairs.append(kept)
        if progress is not None:
            progress(i, len(blocks))
    write_repairs(lake, source.doc_id, repairs)
    return RepairStats(
        blocks=len(blocks),
        asked=asked,
        accepted=sum(r.record is not None for r in repairs),
        refused={r.key: r.reason for r in repairs if r.record is None},
        seconds=sum(r.seconds for r in repairs),
    )


def _body(block: TextTable) -> list[str]:
    return [ln for ln in block.lines if ln.strip() and ln.strip() != block.caption]


def repair_schema() -> dict[str, object]:
    cell = {"type": "string", "maxLength": 60}
    row = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "maxLength": 80},
            "cells": {"type": "array", "items": cell, "maxItems": MAX_COLUMNS},
        },
        "required": ["label", "cells"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "columns": {"type": "array", "items": cell, "minItems": 1, "maxItems": MAX_COLUMNS},
            "rows": {"type": "array", "items": row, "minItems": 2, "maxItems": MAX_ROWS},
        },
        "required": ["columns", "rows"],
        "additionalProperties": False,
    }


def repair_request(block: TextTable) -> ChatRequest:
    """The one request a block gets: its caption and lines, the JSON to write."""
    body = "\n".join(_body(block))
    user = f"{block.caption}\n{body}\n\n{INSTRUCTIONS}" if block.caption else f"{body}\n\n{INSTRUCTIONS}"
    return ChatRequest(
        (Message("system", SYSTEM), Message("user", user)),
        temperature=0.0,
        # a JSON copy is about as long as the block in tokens, plus its quotes and brackets
        max_tokens=min(2048, 64 + len(body)),
        seed=0,
        json_schema=repair_schema(),
    )


def _tokens(text: str) -> list[str]:
    return text.split()


def _find_run(source: Sequence[str], run: Sequence[str], start: int) -> int | None:
    """The end of the first occurrence of `run` in `source` at or after `start`."""
    n = len(run)
    for i in range(start, len(source) - n + 1):
        if list(source[i : i + n]) == list(run):
            return i + n
    return None


def _in_order(source: Sequence[str], pieces: Sequence[str]) -> bool:
    """Whether every piece is a run of `source`'s tokens, each after the one before."""
    cursor = 0
    for piece in pieces:
        end = _find_run(source, _tokens(piece), cursor)
        if end is None:
            return False
        cursor = end
    return True


def verify_repair(block: TextTable, data: object) -> TableRecord | str:
    """The repaired record, or why the repair is refused (the checks of the module's doc)."""
    if not isinstance(data, dict):
        return "the reply is not a JSON object"
    columns = data.get("columns")
    rows = data.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list) or not columns:
        return "no columns or rows"
    columns = [" ".join(str(c).split()) for c in columns]
    label_header = ""
    widths = {len(r.get("cells") or []) for r in rows if isinstance(r, dict)}
    if len(columns) > 1 and widths == {len(columns) - 1}:
        # every row one cell short: the first name is the row names' column ("Model"), which
        # the model listed with the value columns
        label_header, columns = columns[0], columns[1:]
    parsed: list[TableRow] = []
    for k, row in enumerate(rows, 1):
        cells = row.get("cells") if isinstance(row, dict) else None
        if not isinstance(cells, list):
            return f"row {k} has no cells"
        if len(cells) != len(columns):
            return f"row {k} has {len(cells)} cells for {len(columns)} columns"
        label = " ".join(str(row.get("label", "")).split())
        parsed.append(TableRow(label=label, cells=tuple(" ".join(str(c).split()) for c in cells)))
    if len(parsed) < 2:
        return "fewer than two rows"
    source = _tokens("\n".join(_body(block)))
    words = set(source)
    unknown = [c for c in columns if not c or any(w not in words for w in _tokens(c))]
    if unknown:
        return f"column name(s) not in the table's text: {unknown[:3]}"
    by_row = [piece for r in parsed for piece in (r.label, *r.cells) if piece]
    by_column = [r.label for r in parsed if r.label] + [
        r.cells[j] for j in range(len(columns)) for r in parsed if r.cells[j]
    ]
    if not _in_order(source, by_row) and not _in_order(source, by_column):
        stray = [p for p in by_row if _find_run(source, _tokens(p), 0) is None]
        return f"cell(s) not copied from the table's text: {stray[:3]}" if stray else "cells out of the text's order"
    have = [m.group() for r in parsed for piece in (r.label, *r.cells) for m in _NUMBER.finditer(piece)]
    wanted = [m.group() for m in _NUMBER.finditer(" ".join(source))]
    if wanted and len(have) < MIN_COVERAGE * len(wanted):
        return f"the cells keep {len(have)} of the table's {len(wanted)} numbers"
    return TableRecord(
        label=caption_label(block.caption),
        caption=block.caption,
        label_header=label_header,
        columns=tuple(columns),
        rows=tuple(parsed),
    )


def repair_block(block: TextTable, chat: ChatModel, model: str = "", page: int | None = None) -> Repair:
    """Ask the model for one block's rows and columns, and check the reply."""
    key = block_key(block, model)
    if len("\n".join(block.lines)) > MAX_BLOCK_CHARS:
        return Repair(key, page, None, f"longer than {MAX_BLOCK_CHARS} characters: not asked")
    started = time.perf_counter()
    try:
        result = chat.complete(repair_request(block))
    except (BackendError, UnusableReply) as exc:
        return Repair(key, page, None, f"the model failed: {exc}", time.perf_counter() - started)
    raw = extract_json(result.text)
    data = loads_json(raw) if raw is not None else None
    checked = verify_repair(block, data)
    seconds = time.perf_counter() - started
    if isinstance(checked, str):
        return Repair(key, page, None, checked, seconds)
    return Repair(key, page, checked, "", seconds)


REPAIR_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("page", pa.int32()),
        pa.field("record", TABLE_TYPE),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),
    ]
)


def write_repairs(lake: Lake, doc_id: str, repairs: Sequence[Repair]) -> None:
    rows = [
        {
            "key": r.key,
            "page": r.page,
            "record": record_to_arrow(r.record) if r.record is not None else None,
            "reason": r.reason,
            "seconds": round(r.seconds, 3),
        }
        for r in repairs
    ]
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=REPAIR_SCHEMA), lake.table(REPAIRS, doc_id))


def read_repairs(lake: Lake, doc_id: str) -> dict[str, Repair]:
    """The document's repairs by block key ({} when it has none)."""
    path = lake.table(REPAIRS, doc_id)
    if not path.exists():
        return {}
    out = {}
    for r in pq.read_table(path).to_pylist():
        record = record_from_arrow(r["record"], r["page"])
        out[r["key"]] = Repair(r["key"], r["page"], record, r["reason"], r["seconds"])
    return out


def repairs_digest(lake: Lake, doc_id: str) -> str:
    """What the document's tree reads of its repairs: a digest of the accepted records ("" when
    there are none, so a lake without repairs keeps its trees' versions)."""
    accepted = sorted((k, r.record) for k, r in read_repairs(lake, doc_id).items() if r.record is not None)
    if not accepted:
        return ""
    text = json.dumps([[k, record_to_arrow(rec)] for k, rec in accepted if rec is not None], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def repair_lookup(repairs: Mapping[str, Repair], model: str) -> Callable[[TextTable], TableRecord | None]:
    """The parser's hook: the accepted record of a block, by its key."""

    def lookup(block: TextTable) -> TableRecord | None:
        found = repairs.get(block_key(block, model))
        return found.record if found is not None else None

    return lookup
