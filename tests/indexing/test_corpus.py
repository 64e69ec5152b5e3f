"""The corpus folder: which files are documents, their metadata, ids and content hashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kohaku_rag.errors import DocumentError
from kohaku_rag.indexing.corpus import (
    DocumentMeta,
    SourceDocument,
    file_hash,
    find_document,
    resolve_source,
    scan_corpus,
)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.md").write_text("# Notes\n\nThe A100 drew 400 W.\n")
    (corpus / "plain.txt").write_text("Plain text.\n\nA second paragraph.\n")
    (corpus / "payload.json").write_text(json.dumps({"title": "Payload", "sections": []}))
    (corpus / "paper.pdf").write_bytes(b"%PDF-1.7\n% not parsed by the scan\n")
    (corpus / "paper.txt").write_text("the text export of the same paper")  # the PDF wins
    (corpus / "image.png").write_bytes(b"\x89PNG")
    (corpus / ".hidden.md").write_text("named like a document: said, not indexed")
    (corpus / "..dots.txt").write_text("named like a document: said, not indexed")
    (corpus / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # not a document: nothing to say
    (corpus / "expansions.csv").write_text("term,expansion\nPUE,power usage effectiveness\n")  # search aids
    (corpus / "metadata.csv").write_text(
        "id,title,url,year\n"
        "paper,A Paper,https://example.org/paper.pdf,2024\n"
        "remote,Remote only,http://127.0.0.1:9/remote.pdf,2023\n"
        "nourl,Listed without a URL,,2022\n"
    )
    return corpus


def test_scan_finds_each_format_with_its_metadata(folder: Path) -> None:
    scan = scan_corpus(folder)
    assert sorted(scan.documents) == ["notes", "paper", "payload", "plain"]
    formats = {d: s.format for d, s in scan.documents.items()}
    assert formats == {"notes": "markdown", "paper": "pdf", "payload": "json", "plain": "text"}
    paper = scan.documents["paper"]
    assert paper.path == folder / "paper.pdf"  # the richest source of an id wins
    assert paper.meta == DocumentMeta("paper", "A Paper", "https://example.org/paper.pdf", {"year": "2024"})
    assert paper.title == "A Paper" and scan.documents["notes"].title == "notes"
    assert paper.content_hash == file_hash(folder / "paper.pdf", paper.meta)
    # listed with a URL but absent: to fetch; listed without one: nothing to do
    assert list(scan.missing) == ["remote"] and scan.missing["remote"].title == "Remote only"
    assert sorted(scan.skipped) == ["..dots.txt", ".hidden.md", "image.png"]  # not expansions.csv: it is used
    assert "unsupported file type .png" in scan.skipped["image.png"]
    assert "a hidden file (its name starts with a dot); rename it" in scan.skipped["..dots.txt"]


def test_scan_includes_fetched_documents_and_refuses_a_missing_folder(folder: Path, tmp_path: Path) -> None:
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    (fetched / "remote.txt").write_text("Remote report.\n")
    scan = scan_corpus(folder, fetched)
    assert scan.documents["remote"].path == fetched / "remote.txt" and not scan.missing
    with pytest.raises(FileNotFoundError, match="--corpus"):
        scan_corpus(tmp_path / "nowhere")


def test_find_document_by_id(folder: Path, tmp_path: Path) -> None:
    found = find_document(folder, "paper")
    assert isinstance(found, SourceDocument) and found.format == "pdf" and found.path.name == "paper.pdf"
    assert found == scan_corpus(folder).documents["paper"]
    remote = find_document(folder, "remote")
    assert isinstance(remote, DocumentMeta) and remote.url == "http://127.0.0.1:9/remote.pdf"
    assert find_document(folder, "nourl") is None and find_document(folder, "absent") is None
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    (fetched / "remote.pdf").write_bytes(b"%PDF-1.7\n")
    assert isinstance(find_document(folder, "remote", fetched), SourceDocument)


def test_resolve_source_names_the_missing_document(folder: Path, tmp_path: Path) -> None:
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    assert resolve_source(folder, fetched, "notes").path == folder / "notes.md"
    with pytest.raises(DocumentError, match="gone") as err:
        resolve_source(folder, fetched, "gone")
    assert err.value.source == str(folder / "gone")
    assert "no longer in the corpus folder" in err.value.reason


def test_file_hash_follows_content_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "doc.md"
    path.write_text("The water usage effectiveness was 0.18 L/kWh.\n")
    first = file_hash(path)
    assert file_hash(path) == first and len(first) == 64
    path.write_text("The water usage effectiveness was 0.19 L/kWh.\n")
    changed = file_hash(path)
    assert changed != first
    assert file_hash(path, DocumentMeta("doc", "A title")) != changed  # a new title changes the tree
    assert file_hash(path, DocumentMeta("doc", "A title")) == file_hash(path, DocumentMeta("doc", "A title"))
