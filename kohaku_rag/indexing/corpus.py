"""The corpus folder: which documents exist, their content hashes, and how to load them.

A corpus folder holds documents named by id (`<id>.pdf`, `<id>.json`, `<id>.md`,
`<id>.txt`), an optional `metadata.csv` (id,title,url,...) and an optional `expansions.csv`
(the search aids' dictionary, indexing.expansions). Other files are skipped with a message;
hidden files (a name starting with a dot) silently, unless they look like a document. A document listed in
the metadata with a URL but absent locally is fetched into the lake (indexing.download:
size cap, deadline, content check, host policy).
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from kohaku_rag.document.tree import ParsedDocument
from kohaku_rag.errors import DocumentError
from kohaku_rag.indexing.download import DownloadPolicy, download
from kohaku_rag.indexing.expansions import USER_FILE as EXPANSIONS_FILE
from kohaku_rag.lake.tables import check_key
from kohaku_rag.parse import payload
from kohaku_rag.parse.payload import TableRepair
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.web_links import web_link

DocFormat = Literal["pdf", "json", "markdown", "text"]

# When one id has several files, the richest source wins.
SUFFIXES: dict[str, DocFormat] = {
    ".pdf": "pdf",
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
}
METADATA_FILE = "metadata.csv"
# Read by the indexing itself, not documents.
CORPUS_FILES = (METADATA_FILE, EXPANSIONS_FILE)


@dataclass(frozen=True)
class DocumentMeta:
    doc_id: str
    title: str = ""
    url: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceDocument:
    doc_id: str
    path: Path
    format: DocFormat
    content_hash: str
    meta: DocumentMeta

    @property
    def title(self) -> str:
        return self.meta.title or self.doc_id


@dataclass(frozen=True)
class CorpusScan:
    documents: dict[str, SourceDocument]
    missing: dict[str, DocumentMeta]  # listed with a URL but not present locally
    skipped: dict[str, str]  # file name → why it is not a document
    warnings: list[str] = field(default_factory=list)  # metadata.csv rows skipped or suspect


def read_metadata(corpus: Path) -> dict[str, DocumentMeta]:
    return read_metadata_checked(corpus)[0]


def read_metadata_checked(corpus: Path) -> tuple[dict[str, DocumentMeta], list[str]]:
    """metadata.csv's rows by id, and one message per row skipped or suspect. One bad row
    (an id that cannot be a file name, a malformed line) never stops the rest."""
    path = corpus / METADATA_FILE
    if not path.exists():
        return {}, []
    raw = path.read_bytes()
    # metadata exported from spreadsheets is sometimes Latin-1; do not fail the whole corpus on it
    text = raw.decode("utf-8-sig") if _is_utf8(raw) else raw.decode("latin-1")
    rows = csv.DictReader(text.splitlines())
    out: dict[str, DocumentMeta] = {}
    warnings: list[str] = []
    end = 1  # the header's line; a row starts on the line after the previous row's end
    for row in rows:
        start, end = end + 1, rows.line_num
        where = f"{path}, line {start}"
        if None in row:  # DictReader puts cells beyond the header under the key None
            warnings.append(f"{where}: more fields than the header ({len(rows.fieldnames or [])}); extra ones ignored")
        if end > start:
            warnings.append(f"{where}: a quoted field runs on to line {end} (unclosed quote?)")
        doc_id = (row.get("id") or "").strip()
        if not doc_id:
            continue
        try:
            check_key(doc_id)
        except ValueError as exc:
            warnings.append(f"{where}: row skipped: {exc}")
            continue
        extra = {k: (v or "").strip() for k, v in row.items() if k and k not in {"id", "title", "url"}}
        url = (row.get("url") or "").strip()
        if url and not web_link(url):  # served as a link on the ask page, and fetched: web only
            warnings.append(f"{where}: url ignored: only http:// and https:// links are kept; fix the row's url")
            url = ""
        out[doc_id] = DocumentMeta(doc_id, (row.get("title") or "").strip(), url, extra)
    return out, warnings


def link_outside(path: Path, folder: Path) -> str | None:
    """Why `path` is not read: a symbolic link (anywhere on its way) that leads outside
    `folder`; None when it stays inside. A corpus folder is often shared or synced; a link
    to /etc/passwd or a home directory must not end up indexed and searchable."""
    target = path.resolve()
    if target.is_relative_to(folder.resolve()):
        return None
    return (
        f"a symbolic link to {target}, outside the corpus folder; not followed (kohaku index --follow-links allows it)"
    )


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def file_hash(path: Path, meta: DocumentMeta | None = None) -> str:
    """Hash of the file bytes plus its metadata row, since a new title changes the tree."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if meta is not None:
        digest.update(f"\0{meta.title}\0{meta.url}".encode())
    return digest.hexdigest()


def check_corpus_folder(corpus: Path) -> None:
    """Refuse a corpus folder that does not exist (before anything is written to the lake)."""
    if not corpus.is_dir():
        raise FileNotFoundError(f"corpus folder {corpus} does not exist; pass --corpus DIR pointing at your documents")


def scan_corpus(corpus: Path, fetched_dir: Path | None = None, *, follow_links: bool = False) -> CorpusScan:
    """Find every document in `corpus` (and already fetched ones in `fetched_dir`). Links
    that leave their folder are skipped unless `follow_links`."""
    check_corpus_folder(corpus)
    metadata, warnings = read_metadata_checked(corpus)
    found: dict[str, tuple[int, Path]] = {}
    skipped: dict[str, str] = {}
    folders = [corpus] + ([fetched_dir] if fetched_dir is not None and fetched_dir.is_dir() else [])
    ranks = list(SUFFIXES)
    for folder in folders:
        for path in sorted(folder.iterdir()):
            if path.is_symlink() and path.is_dir():
                # Said, not silent: a link is made on purpose, and its documents would vanish unseen.
                skipped[path.name] = "a link to a folder; the corpus is one flat folder: link the documents themselves"
                continue
            if not path.is_file() or path.name in CORPUS_FILES:
                continue
            if path.name.startswith("."):
                # .DS_Store, .gitignore, an editor's lock file: not documents, nothing to say.
                # One named like a document (`..notes.txt`) would otherwise vanish unseen.
                if path.suffix.lower() in SUFFIXES:
                    skipped[path.name] = "a hidden file (its name starts with a dot); rename it to index it"
                continue
            if not follow_links and (why := link_outside(path, folder)) is not None:
                skipped[path.name] = why
                continue
            suffix = path.suffix.lower()
            if suffix not in SUFFIXES:
                skipped[path.name] = f"unsupported file type {suffix or '(none)'}; use .pdf, .json, .md or .txt"
                continue
            try:
                doc_id = check_key(path.stem)
            except ValueError as exc:
                skipped[path.name] = str(exc)
                continue
            rank = ranks.index(suffix)
            if doc_id not in found or rank < found[doc_id][0]:
                found[doc_id] = (rank, path)
    documents = {}
    for doc_id, (_, path) in sorted(found.items()):
        meta = metadata.get(doc_id, DocumentMeta(doc_id))
        documents[doc_id] = SourceDocument(doc_id, path, SUFFIXES[path.suffix.lower()], file_hash(path, meta), meta)
    missing = {d: m for d, m in metadata.items() if d not in documents and m.url}
    return CorpusScan(documents, missing, skipped, warnings)


def find_document(
    corpus: Path, doc_id: str, fetched_dir: Path | None = None, *, follow_links: bool = False
) -> SourceDocument | DocumentMeta | None:
    """One document by id without scanning the whole corpus: the source if a file exists,
    its metadata row if it is only listed with a URL, else None. A link leaving the corpus
    is refused (DocumentError) unless `follow_links`."""
    meta = read_metadata(corpus).get(doc_id, DocumentMeta(doc_id))
    for folder in [corpus] + ([fetched_dir] if fetched_dir is not None else []):
        for suffix, fmt in SUFFIXES.items():
            path = folder / f"{doc_id}{suffix}"
            if path.is_file():
                if not follow_links and (why := link_outside(path, folder)) is not None:
                    raise DocumentError(path, why)
                return SourceDocument(doc_id, path, fmt, file_hash(path, meta), meta)
    return meta if meta.url else None


def fetch_document(
    meta: DocumentMeta, dest_dir: Path, *, timeout: float | None = None, policy: DownloadPolicy | None = None
) -> Path:
    """Download a document listed in metadata.csv into `dest_dir` as `<id>.pdf` or `<id>.txt`
    (by content), within the size cap and deadline of `policy` (indexing.download)."""
    check_key(meta.doc_id)
    policy = policy or DownloadPolicy()
    if timeout is not None:
        policy = replace(policy, timeout=timeout)
    return download(meta.url, dest_dir / meta.doc_id, policy, meta.doc_id)


def resolve_source(
    corpus: Path, fetched_dir: Path, doc_id: str, policy: DownloadPolicy | None = None, *, follow_links: bool = False
) -> SourceDocument:
    """The document's file in the corpus folder, or fetched from its metadata URL."""
    found = find_document(corpus, doc_id, fetched_dir, follow_links=follow_links)
    if isinstance(found, SourceDocument):
        return found
    if isinstance(found, DocumentMeta):
        path = fetch_document(found, fetched_dir, policy=policy)
        return SourceDocument(doc_id, path, "pdf" if path.suffix == ".pdf" else "text", file_hash(path, found), found)
    raise DocumentError(corpus / doc_id, "is no longer in the corpus folder (and metadata.csv has no URL for it)")


def load_document(
    source: SourceDocument, *, use_outline: bool = True, tables: bool = False, repair: TableRepair | None = None
) -> ParsedDocument:
    """Parse a source document into sections and paragraphs (no ids yet); `tables`: tables
    kept as records (the index's `table_records`); `repair`: the record of a text table the
    parser could not align, from a verified repair (indexing/table_repair.py)."""
    title = source.meta.title or None
    if source.format == "pdf":
        return parse_pdf(source.path, source.doc_id, title=title, use_outline=use_outline, tables=tables)
    if source.format == "json":
        return payload.parse_payload_json(source.path, source.doc_id, title=title, tables=tables, repair=repair)
    if source.format == "markdown":
        return payload.parse_markdown(source.path, source.doc_id, title=title, tables=tables)
    return payload.parse_text(source.path, source.doc_id, title=title, tables=tables, repair=repair)
