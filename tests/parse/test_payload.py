"""JSON payloads, Markdown and text become sensible paragraphs; bad files fail clearly."""

import json

import pytest

from kohaku_rag.document.tree import Attachment, NodeKind, build_tree
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse.payload import paragraphs_from_lines, parse_markdown, parse_payload_json, parse_text
from kohaku_rag.parse.sentences import split_sentences


def test_payload_drops_image_placeholders_and_repairs_hyphens(tmp_path):
    page = (
        "Recent progress in hardware and methodol-\nogy for training neural networks has ushered\n"
        "in a new generation of large networks.\nShort end.\n"
        "[Image page=1 idx=1 name=X39.png] Size: 10x10, Data: 67 bytes\n"
    )
    payload = {
        "document_id": "x",
        "title": "X",
        "sections": [
            {
                "title": "Page 1",
                "metadata": {"page": 1},
                "paragraphs": [
                    {"text": page, "metadata": {"page": 1}},
                    {
                        "text": "[Image page=1 idx=2 name=Y.png] Size: 1x1, Data: 67 bytes",
                        "metadata": {"page": 1, "attachment_type": "image"},
                    },
                ],
            }
        ],
    }
    path = tmp_path / "x.json"
    path.write_text(json.dumps(payload))
    doc = parse_payload_json(path, "x")
    text = " ".join(p.text for s in doc.sections for p in s.paragraphs)
    assert "methodology" in text and "[Image" not in text
    assert doc.sections[0].page == 1


def test_markdown_and_text_drop_image_placeholders(tmp_path):
    body = "Intro text that is long enough to stand alone as a paragraph.\n[Image page=2 idx=1 name=Z.png] Size: 9x9\n\nMore text follows here, also long enough.\n"
    (tmp_path / "m.md").write_text("# Title\n\n" + body)
    (tmp_path / "t.txt").write_text(body)
    for doc in (parse_markdown(tmp_path / "m.md", "m"), parse_text(tmp_path / "t.txt", "t")):
        text = " ".join(p.text for s in doc.sections for p in s.paragraphs)
        assert "[Image" not in text and "Size: 9x9" not in text and "More text follows" in text


def test_long_blocks_are_cut_at_sentences():
    text = " ".join(f"Sentence number {i} says something about energy." for i in range(100))
    paras = paragraphs_from_lines(text, limit=500)
    assert all(len(p) <= 500 for p in paras) and len(paras) > 5
    assert all(p.endswith(".") for p in paras)


def test_markdown_sections_and_tables(tmp_path):
    path = tmp_path / "m.md"
    path.write_text(
        "# Title\n\nIntro text here that is long enough.\n\n## 1 Method\n\n| GPU | Watts |\n|---|---|\n| A100 | 400 |\n\nBody.\n"
    )
    doc = parse_markdown(path, "m")
    assert doc.title == "Title"
    assert [s.title for s in doc.sections] == ["Title", "1 Method"]
    table = doc.sections[1].paragraphs[0]
    assert table.attachment is Attachment.TABLE and table.text == "(rows: GPU)\nA100 · Watts: 400"
    assert table.table is not None and table.table.columns == ("Watts",) and table.table.rows[0].cells == ("400",)
    nodes = build_tree(doc, split_sentences)
    assert [n.node_id for n in nodes if n.kind is NodeKind.SECTION] == ["m:sec1", "m:sec2"]


def test_empty_and_undecodable_files_fail_with_their_name(tmp_path):
    empty = tmp_path / "e.txt"
    empty.write_text("   \n")
    with pytest.raises(DocumentError, match="e.txt: empty"):
        parse_text(empty, "e")
    latin = tmp_path / "l.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(DocumentError, match="l.txt: not UTF-8"):
        parse_text(latin, "l")
    broken = tmp_path / "b.json"
    broken.write_text("{not json")
    with pytest.raises(DocumentError, match="b.json"):
        parse_payload_json(broken, "b")
