"""No derived file holds a credential: `kohaku eval --questions OTHER.csv` on a config whose
base_url carries a key (`user:key@host`, `?api-key=`) writes `<name>--<stem>.json` naming the
config it re-aims instead of copying it, and the eval still reaches the server with the key.
A real eval against the fake OpenAI-compatible server (tests/support/qa_server.py)."""

from __future__ import annotations

import base64
import json
import shutil
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answering.config_folder import config_of, configs_dir
from kohaku_rag.answering.qa_config_file import load_qa_config

USER_KEY = "sk-userinfo-7f3a9c21"
QUERY_KEY = "qk-query-5b8e2d40"


def _secret_forms(secret: str) -> list[bytes]:
    return [secret.encode(), urllib.parse.quote(secret, safe="").encode(), base64.b64encode(f"u:{secret}".encode())]


def _files_holding(root: Path, secrets: list[str], but: Path) -> list[str]:
    """Every file under `root` (but the user's own config) holding a secret, in any form."""
    forms = [form for secret in secrets for form in _secret_forms(secret)]
    return [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*"))
        if path.is_file() and path != but and any(form in path.read_bytes() for form in forms)
    ]


def test_a_derived_config_holds_no_credential_and_the_eval_still_works(env, capsys) -> None:
    """A derived config (configs/a--questions.json) names its source instead of copying it, so
    no key in the source's base_url lands in a second file."""
    settings, server, questions = env
    lake = settings.lake
    folder = configs_dir(lake)
    folder.mkdir(exist_ok=True)
    own = shutil.copy(questions, folder.parent / "own-questions.csv")  # the config's own question file
    host = urllib.parse.urlsplit(server.base_url).netloc
    url = f"http://u:{USER_KEY}@{host}/v1?api-version=1&api-key={QUERY_KEY}"
    llm = {"backend": "openai", "model": "scripted", "base_url": url, "api_key_env": None, "max_retries": 0}
    source = folder / "a.json"
    source.write_text(json.dumps({"questions": str(own), "generation": {"llm": llm}}))

    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    code = cli_main(["eval", "--questions", str(questions), "--config", "a", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out.strip().splitlines()[-1])["final"] == pytest.approx(1.0)

    # the server was reached with both keys
    assert server.requests and all(f"api-key={QUERY_KEY}" in p for p in server.paths), server.paths
    basic = "Basic " + base64.b64encode(f"u:{USER_KEY}".encode()).decode()
    assert all(r.headers.get("authorization") == basic for r in server.requests)

    derived = folder / "a--questions.json"
    assert derived.exists()
    assert _files_holding(lake.root, [USER_KEY, QUERY_KEY], but=source) == []
    # the derived config is the source's, on the other question file
    assert config_of(lake, "a--questions") == replace(load_qa_config(source), questions=str(questions.resolve()))


def test_a_derived_config_names_a_config_of_its_own(tmp_path: Path) -> None:
    questions = tmp_path / "q.csv"
    questions.write_text("id,question\nq1,What?\n")
    (tmp_path / "a.json").write_text(json.dumps({"questions": str(questions)}))
    (tmp_path / "b.json").write_text(json.dumps({"derived_from": "a", "questions": "q.csv"}))
    assert load_qa_config(tmp_path / "b.json").questions == str(questions.resolve())
    (tmp_path / "c.json").write_text(json.dumps({"derived_from": "b", "questions": "q.csv"}))
    with pytest.raises(ValueError, match=r"c.json: derived_from 'b': no config of its own named b beside it"):
        load_qa_config(tmp_path / "c.json")
    (tmp_path / "d.json").write_text(json.dumps({"derived_from": "gone", "questions": "q.csv"}))
    with pytest.raises(ValueError, match=r"d.json: derived_from 'gone': no config of its own"):
        load_qa_config(tmp_path / "d.json")
    (tmp_path / "e.json").write_text(json.dumps({"derived_from": "a", "questions": "q.csv", "voting": {}}))
    with pytest.raises(ValueError, match=r"e.json: a derived config holds only derived_from"):
        load_qa_config(tmp_path / "e.json")
