"""Non-PDF inputs: KohakuRAG JSON payloads, Markdown and plain text → ParsedDocument.

The WattBot JSON payloads hold one section per page whose "paragraphs" are whole
columns (median ~3,000 characters) of pypdf-style text with hard line breaks and
hyphenation. Those are poor retrieval units, so paragraphs are rebuilt from the line
layout: a short line that ends a sentence closes a paragraph, and long paragraphs are
cut at sentence boundaries.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from kohaku_rag.document.table_record import TableRecord, TableRow, table_text
from kohaku_rag.document.tree import Attachment, ParsedDocument, ParsedParagraph, ParsedSection
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse import limits
from kohaku_rag.parse.pdf_layout import merge_lines_text
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.parse.text_tables import TextTable, split_tables

# The record a verified repair gives a table block the parser left unaligned (None: none).
TableRepair = Callable[[TextTable], TableRecord | None]

# KohakuRAG's pdf_utils writes these for every embedded image; they carry no content.
IMAGE_PLACEHOLDER = re.compile(r"^\s*\[Image page=\d+ idx=\d+[^\]]*\].*$")
_SENTENCE_END = re.compile(r"[.:?!]['\")\]]?$")
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")

MAX_PARAGRAPH_CHARS = 1000
MIN_PARAGRAPH_CHARS = 120


def join_lines(lines: list[str]) -> str:
    """Join hard-wrapped lines with the PDF parser's hyphenation repair ("emis-" + "sions")."""
    return merge_lines_text(lines)


def _split_long(text: str, limit: int) -> list[str]:
    if len(text) <= limit:
        return [text]
    chunks: list[str] = []
    current = ""
    for sent in split_sentences(text):
        if current and len(current) + 1 + len(sent) > limit:
            chunks.append(current)
            current = sent
        else:
            current = f"{current} {sent}" if current else sent
    if current:
        chunks.append(current)
    return chunks


def _merge_short(paragraphs: list[str], minimum: int, limit: int) -> list[str]:
    """Fold fragments (table rows, captions, headings) into their successor so no unit
    is too small to carry meaning on its own."""
    merged: list[str] = []
    carry = ""
    for para in paragraphs:
        para = f"{carry} {para}".strip() if carry else para
        carry = ""
        if len(para) < minimum:
            carry = para
            continue
        merged.append(para)
    if carry:
        if merged and len(merged[-1]) + len(carry) <= limit * 1.5:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    return merged


def paragraphs_from_lines(
    text: str, *, limit: int = MAX_PARAGRAPH_CHARS, minimum: int = MIN_PARAGRAPH_CHARS
) -> list[str]:
    """Rebuild paragraphs from hard-wrapped text. A paragraph ends at a blank line, or at a
    line that ends a sentence while being clearly shorter than the block's typical line."""
    lines = [ln for ln in text.splitlines() if not IMAGE_PLACEHOLDER.match(ln)]
    lengths = [len(ln.strip()) for ln in lines if len(ln.strip()) > 20]
    typical = statistics.median(lengths) if lengths else 60.0
    blocks: list[list[str]] = [[]]
    for line in lines:
        stripped = line.strip()
        if not stripped:
            if blocks[-1]:
                blocks.append([])
            continue
        blocks[-1].append(stripped)
        if _SENTENCE_END.search(stripped) and len(stripped) < 0.75 * typical:
            blocks.append([])
    paragraphs = [join_lines(b) for b in blocks if b]
    pieces = [piece for para in paragraphs for piece in _split_long(para, limit)]
    return _merge_short(pieces, minimum, limit)


def parse_payload_json(
    path: Path, doc_id: str, *, title: str | None = None, tables: bool = True, repair: TableRepair | None = None
) -> ParsedDocument:
    """KohakuRAG's `pdf_to_document_payload` JSON: {document_id, title, text, metadata, sections}."""
    text = _read_text(path)
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(path, f"not a readable JSON payload ({exc})") from exc
    except RecursionError:
        raise DocumentError(path, "not a usable JSON payload: nested too deeply") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("sections"), list):
        raise DocumentError(path, "JSON payload has no 'sections' list (expected KohakuRAG's document payload format)")
    _check_payload_shape(path, payload)
    sections = [_payload_section(sec, index, tables, repair) for index, sec in enumerate(payload["sections"], start=1)]
    meta = payload.get("metadata") or {}
    doc_title = title or str(payload.get("title") or doc_id)
    return _checked(
        path,
        ParsedDocument(
            doc_id=doc_id,
            title=doc_title,
            sections=[s for s in sections if s.paragraphs],
            metadata={k: str(v) for k, v in meta.items() if isinstance(v, str | int | float)},
        ),
    )


def _check_payload_shape(path: Path, payload: dict) -> None:
    """Each part where the payload format expects it (objects, lists, text), so a wrong
    file fails here with the path of the odd part, not with an AttributeError later."""

    def expect(value: object, kinds: type | tuple[type, ...], where: str, what: str) -> None:
        if value is not None and not isinstance(value, kinds):
            raise DocumentError(
                path, f"not KohakuRAG's payload format: {where} is {type(value).__name__}, expected {what}"
            )

    expect(payload.get("metadata"), dict, "'metadata'", "an object")
    for i, section in enumerate(payload["sections"]):
        where = f"sections[{i}]"
        expect(section, dict, where, "an object")
        expect(section.get("metadata"), dict, f"{where}.metadata", "an object")
        expect(section.get("title"), (str, int, float), f"{where}.title", "text")
        expect(section.get("paragraphs"), list, f"{where}.paragraphs", "a list")
        for j, para in enumerate(section.get("paragraphs") or []):
            expect(para, dict, f"{where}.paragraphs[{j}]", "an object")
            expect(para.get("metadata"), dict, f"{where}.paragraphs[{j}].metadata", "an object")
            expect(para.get("text"), str, f"{where}.paragraphs[{j}].text", "text")


def _payload_section(
    section: dict, index: int, tables: bool = True, repair: TableRepair | None = None
) -> ParsedSection:
    meta = section.get("metadata") or {}
    page = _as_int(meta.get("page")) or index
    texts: list[str] = []
    for para in section.get("paragraphs") or []:
        pmeta = para.get("metadata") or {}
        if pmeta.get("attachment_type") == "image" and IMAGE_PLACEHOLDER.match(para.get("text", "")):
            continue
        texts.append(str(para.get("text") or ""))
    return ParsedSection(
        title=str(section.get("title") or f"Page {page}"),
        page=page,
        paragraphs=paragraphs_with_tables("\n\n".join(texts), page, tables, repair),
    )


def paragraphs_with_tables(
    text: str, page: int | None = None, tables: bool = True, repair: TableRepair | None = None
) -> list[ParsedParagraph]:
    """The text's paragraphs, its aligned tables taken out of the running text first
    (text_tables.py): each becomes a table paragraph holding its record. A table that cannot
    be aligned stays in the running text, as without `tables` (the index's `table_records`
    off): as a block of its own lines it crowded the passage that answered out of the
    context (docs/benchmarks/settings.md, "Tables as records"). `repair`: the record a
    verified repair gives a table the parser could not align (indexing/table_repair.py), if any."""
    if not tables:
        return [ParsedParagraph(text=p, page=page) for p in paragraphs_from_lines(text)]
    lines = [ln for ln in text.splitlines() if not IMAGE_PLACEHOLDER.match(ln)]
    out: list[ParsedParagraph] = []
    cursor = 0
    for found in split_tables(lines, page):
        table = found if found.record is not None or repair is None else replace(found, record=repair(found))
        if table.record is None:
            continue  # its lines join the running text around it
        out += [
            ParsedParagraph(text=p, page=page) for p in paragraphs_from_lines("\n".join(lines[cursor : table.start]))
        ]
        out.append(
            ParsedParagraph(text=table_text(table.record), page=page, attachment=Attachment.TABLE, table=table.record)
        )
        cursor = table.end
    out += [ParsedParagraph(text=p, page=page) for p in paragraphs_from_lines("\n".join(lines[cursor:]))]
    return out


def _as_int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def parse_markdown(path: Path, doc_id: str, *, title: str | None = None, tables: bool = True) -> ParsedDocument:
    text = _read_text(path)
    sections: list[ParsedSection] = []
    current_title = ""
    body: list[str] = []
    doc_title = title

    def flush() -> None:
        paras = list(_markdown_paragraphs(body, tables))
        if paras:
            sections.append(ParsedSection(title=current_title or (doc_title or doc_id), paragraphs=paras))

    for line in text.splitlines():
        heading = _MD_HEADING.match(line)
        if heading:
            level, heading_text = len(heading.group(1)), heading.group(2)
            if level == 1 and doc_title is None:
                doc_title = heading_text
                continue
            flush()
            current_title, body = heading_text, []
        else:
            body.append(line)
    flush()
    return _checked(path, ParsedDocument(doc_id=doc_id, title=doc_title or doc_id, sections=sections))


def _markdown_paragraphs(lines: list[str], tables: bool = True) -> Iterator[ParsedParagraph]:
    block: list[str] = []
    for line in [*lines, ""]:
        if IMAGE_PLACEHOLDER.match(line):
            continue  # placeholders name an image; they carry no text
        if line.strip():
            block.append(line)
            continue
        if not block:
            continue
        if all(ln.strip().startswith("|") for ln in block):
            yield _markdown_table(block, tables)
        else:
            for piece in _split_long(join_lines(block), MAX_PARAGRAPH_CHARS):
                yield ParsedParagraph(text=piece)
        block = []


def _markdown_table(block: list[str], tables: bool = True) -> ParsedParagraph:
    """A pipe table: its first row names the columns (the first column's name is the row
    labels'); a table whose rows do not all have the header's width is kept as its lines."""
    rows = [ln for ln in block if not _MD_TABLE_RULE.match(ln)]
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in rows]
    if tables and len(cells) >= 2 and len(cells[0]) >= 2 and all(len(r) == len(cells[0]) for r in cells):
        header, body = cells[0], cells[1:]
        record = TableRecord(
            label="",
            caption="",
            label_header=header[0],
            columns=tuple(header[1:]),
            rows=tuple(TableRow(label=r[0], cells=tuple(r[1:])) for r in body),
        )
        return ParsedParagraph(text=table_text(record), attachment=Attachment.TABLE, table=record)
    return ParsedParagraph(text="\n".join(" | ".join(r) for r in cells), attachment=Attachment.TABLE)


def parse_text(
    path: Path, doc_id: str, *, title: str | None = None, tables: bool = True, repair: TableRepair | None = None
) -> ParsedDocument:
    text = _read_text(path)
    paragraphs = paragraphs_with_tables(text, tables=tables, repair=repair)
    doc_title = title or next((ln.strip() for ln in text.splitlines() if ln.strip()), doc_id)[:200]
    return _checked(
        path,
        ParsedDocument(
            doc_id=doc_id, title=doc_title, sections=[ParsedSection(title=doc_title, paragraphs=paragraphs)]
        ),
    )


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > limits.MAX_FILE_BYTES:
            raise DocumentError(
                path, f"{size:,} bytes, over the limit of {limits.MAX_FILE_BYTES:,} for a text file; split it"
            )
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start}); re-save it as UTF-8") from exc
    except OSError as exc:
        raise DocumentError(path, f"cannot be read ({exc.strerror})") from exc
    if len(text) > limits.MAX_TEXT_CHARS:
        raise DocumentError(path, f"{len(text):,} characters, over the limit of {limits.MAX_TEXT_CHARS:,}; split it")
    return text


def _checked(path: Path, doc: ParsedDocument) -> ParsedDocument:
    if not any(p.text.strip() for s in doc.sections for p in s.paragraphs):
        raise DocumentError(path, "empty: no text to index")
    return doc
