"""Small things a hostile test found: each is refused, or said, with the
real reason."""

from __future__ import annotations

import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.indexing.corpus import scan_corpus
from kohaku_rag.llm.openai_compat import OpenAIChat

QUESTIONS_CSV = "id,question,answer_unit\nq1,How much water?,liters\n"


def test_a_config_named_by_a_path_is_refused_for_what_it_is(tmp_path, capsys):
    """main said "no ../outside.toml ... in <configs>" although the file exists."""
    lake = tmp_path / "lake"
    (lake / "configs").mkdir(parents=True)
    (lake / "outside.toml").write_text('questions = "q.csv"\n')
    (tmp_path / "q.csv").write_text(QUESTIONS_CSV)
    status = cli_main(["eval", "--lake", str(lake), "--config", "../outside", "--questions", str(tmp_path / "q.csv")])
    err = capsys.readouterr().err
    assert status == 2
    assert "not by a path" in err and "no ../outside.toml" not in err


def test_a_config_whose_questions_is_not_a_question_file_fails_when_it_loads(tmp_path, capsys):
    """A config whose `questions` is not a question file fails when it loads (`config show`
    says so), not later inside a run."""
    lake = tmp_path / "lake"
    (lake / "configs").mkdir(parents=True)
    (lake / "configs" / "pw.toml").write_text('questions = "/etc/passwd"\n')
    status = cli_main(["config", "show", "pw", "--lake", str(lake)])
    err = capsys.readouterr().err
    assert status == 2
    assert "pw.toml" in err and "questions" in err and "not a question file" in err


def test_a_link_to_a_folder_in_the_corpus_is_named(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nText.\n")
    elsewhere = tmp_path / "more"
    elsewhere.mkdir()
    (elsewhere / "b.md").write_text("# B\n\nText.\n")
    (corpus / "more").symlink_to(elsewhere, target_is_directory=True)
    scan = scan_corpus(corpus)
    assert list(scan.documents) == ["a"]
    assert "link to a folder" in scan.skipped["more"]


def test_url_credentials_and_an_api_key_are_not_both_taken_silently(monkeypatch):
    """main sent the URL's basic auth and silently dropped the key's Bearer header."""
    monkeypatch.setenv("KOHAKU_TEST_KEY", "sk-test-1234567890")
    with pytest.raises(ValueError, match="only one can be sent") as caught:
        OpenAIChat("http://user:secret@127.0.0.1:9/v1", "m", api_key_env="KOHAKU_TEST_KEY")
    assert "secret" not in str(caught.value) and "sk-test" not in str(caught.value)
    OpenAIChat("http://user:secret@127.0.0.1:9/v1", "m", api_key_env=None)  # the URL's alone: fine
    OpenAIChat("http://127.0.0.1:9/v1", "m", api_key_env="KOHAKU_TEST_KEY")  # the key alone: fine
