"""One bad metadata.csv row or a link out of the corpus folder never stops or leaks the rest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kohaku_rag.errors import DocumentError
from kohaku_rag.indexing.corpus import find_document, read_metadata_checked, scan_corpus


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.md").write_text("# Notes\n\nThe A100 drew 400 W.\n")
    return corpus


def test_an_unusable_id_skips_its_row_with_file_line_and_reason(folder):
    (folder / "metadata.csv").write_text(
        "id,title,url\n"
        "notes,Notes,\n"
        "../outside,Escape,http://127.0.0.1:9/x.pdf\n"
        "has space,Spaced,http://127.0.0.1:9/y.pdf\n"
        "remote,Remote,http://127.0.0.1:9/r.pdf\n"
    )
    scan = scan_corpus(folder)
    assert set(scan.documents) == {"notes"} and set(scan.missing) == {"remote"}
    assert scan.documents["notes"].meta.title == "Notes"
    assert len(scan.warnings) == 2
    escape, spaced = scan.warnings
    assert "metadata.csv, line 3: row skipped" in escape and "'../outside' is not a usable id" in escape
    assert "metadata.csv, line 4: row skipped" in spaced and "'has space'" in spaced


def test_malformed_rows_warn_with_their_line(folder):
    (folder / "metadata.csv").write_text(
        'id,title,url\nnotes,Notes,,surplus\nother,Other,\nbad,"unclosed quote,\nlast,Last,\n'
    )
    meta, warnings = read_metadata_checked(folder)
    assert meta["notes"].title == "Notes" and meta["other"].title == "Other"
    assert any("line 2: more fields than the header" in w for w in warnings)
    assert any("line 4: a quoted field runs on to line 5 (unclosed quote?)" in w for w in warnings)
    assert all("metadata.csv" in w for w in warnings)


def test_a_link_leaving_the_corpus_is_skipped_unless_allowed(folder, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the password file\n")
    os.symlink(secret, folder / "passwd.txt")
    os.symlink(folder / "notes.md", folder / "alias.md")  # a link inside the folder is fine
    scan = scan_corpus(folder)
    assert set(scan.documents) == {"alias", "notes"}
    assert "outside the corpus folder" in scan.skipped["passwd.txt"]
    assert "--follow-links" in scan.skipped["passwd.txt"]
    with pytest.raises(DocumentError, match="outside the corpus folder"):
        find_document(folder, "passwd")
    assert "passwd" in scan_corpus(folder, follow_links=True).documents
    assert find_document(folder, "passwd", follow_links=True) is not None
