"""No credential at rest: an index and an eval run with credentials written into every URL
field (the embedder, the vision captioner, the answering LLM, the planner's LLM, the hosted
reranker) leave none of them anywhere in the lake (Parquet bytes, index_config.json, the
vector store, the caches, Dagster's storage) nor in what is printed; the running process
keeps them in memory and uses them."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config, qa_config_from_mapping
from kohaku_rag.embed import EmbedderSpec
from kohaku_rag.indexing.index_config import IndexConfig, record_index_config, resolve_index_config
from kohaku_rag.lake.layout import Lake
from tests.support.embedding_server import EmbeddingServer
from tests.support.rerank_server import RerankServer

SECRETS = {
    "embedder": ("emb-user", "sk-embed-5e6f7a8b9c0d1e2f3a4b"),
    "vision": ("vis-user", "sk-vision-1a2b3c4d5e6f7a8b9c0d"),
    "llm": ("llm-user", "sk-answer-9f8e7d6c5b4a3f2e1d0c"),
    "planner": ("plan-user", "sk-planner-0a9b8c7d6e5f4a3b2c1d"),
    "reranker": ("rr-user", "sk-rerank-2b3c4d5e6f7a8b9c0d1e"),
}
TOKENS = {name: f"tok-{name}-7c6b5a4f3e2d1c0b9a8f" for name in SECRETS}


def with_credentials(root: str, name: str, path: str = "") -> str:
    """`root` (http://host:port) with user:password@ and ?api-key= written in."""
    user, password = SECRETS[name]
    scheme, rest = root.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}{path}?api-key={TOKENS[name]}"


def secret_forms() -> list[str]:
    values = [p for _, p in SECRETS.values()] + list(TOKENS.values())
    return sorted({form for v in values for form in (v, urllib.parse.quote(v, safe=""))})


def leaks(root: Path) -> list[str]:
    """Every file under `root` holding a secret, in any form, as raw bytes."""
    found = []
    forms = [s.encode() for s in secret_forms()]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {s.decode()}" for s in forms if s in data]
    return found


def test_an_index_and_an_eval_with_credentials_in_every_url_store_none_of_them(
    tmp_path, corpus, qa_server, monkeypatch, capsys
):
    lake = tmp_path / "lake"
    configs = tmp_path / "configs"  # the user's own config files, outside the lake
    configs.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(lake / ".dagster"))
    monkeypatch.setenv("KOHAKU_CONFIGS", str(configs))
    questions = tmp_path / "questions.csv"
    questions.write_text(
        "id,question,answer,answer_value,answer_unit,ref_id\n"
        "q1,How many watts did the A100 GPU draw?,400 W,400,W,['gpu']\n"
        "q2,How many tCO2e did training emit?,4.3 tCO2e,4.3,tCO2e,['carbon']\n"
    )
    embedder = EmbeddingServer().start()
    with RerankServer() as reranker:
        index_file = tmp_path / "index.json"
        index_cfg = {
            "embedder": {
                "backend": "openai",
                "model": "fake",
                "base_url": with_credentials(embedder.base_url, "embedder"),
            },
            "captioner": "vision",  # the markdown corpus has no figure: the URL is only recorded
            "vision_base_url": with_credentials(qa_server.base_url, "vision"),
            "vision_model": "fake-vision",
            "vision_api_key_env": None,
        }
        index_file.write_text(json.dumps(index_cfg))
        common = ["--lake", str(lake), "--corpus", str(corpus)]
        assert cli_main(["index", *common, "--index-config", str(index_file)]) == 0
        embedded = [r for r in embedder.requests if r.path.startswith("/v1/embeddings")]
        assert embedded and all(r.headers.get("authorization", "").startswith("Basic ") for r in embedded)

        llm = {"backend": "openai", "model": "scripted", "api_key_env": None, "max_retries": 0}
        config = {
            "questions": str(questions),
            "retrieval": {
                "use_planner": True,
                "planner_max_queries": 2,
                "planner_model": {**llm, "base_url": with_credentials(qa_server.base_url, "planner")},
                "reranker": {"backend": "http", "url": with_credentials(reranker.root, "reranker", "/v1/rerank")},
            },
            "generation": {"llm": {**llm, "base_url": with_credentials(qa_server.base_url, "llm")}},
        }
        (configs / "creds.json").write_text(json.dumps(config))
        # The process is given the index settings again (their credentials are not in the lake).
        monkeypatch.setenv("KOHAKU_INDEX_CONFIG", str(index_file))
        capsys.readouterr()
        assert cli_main(["eval", "--questions", str(questions), "--config", "creds", "--json", *common]) == 0
        assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["final"] == pytest.approx(1.0)
        assert reranker.requests and len(qa_server.requests) >= 4  # every endpoint was used
        assert cli_main(["config", "show", "creds", *common]) == 0
        out = capsys.readouterr()
    embedder.stop()

    assert leaks(lake) == []
    printed = out.out + out.err
    assert "[redacted]" in printed and not [s for s in secret_forms() if s in printed]
    recorded = json.loads((lake / "index_config.json").read_text())
    assert recorded["vision_base_url"].startswith("http://[redacted]@127.0.0.1:")
    board = (lake / "qa" / "leaderboard.parquet").read_bytes()
    assert b"[redacted]" in board  # the config is there, without its credentials


def test_hashes_leave_out_credentials_and_keep_what_configs_without_them_stored(tmp_path) -> None:
    """Credentials never reach a hash: a new key for the same endpoint reuses what the old one
    computed; a config without credentials keeps the hashes (and tables) it always had."""
    plain = QAConfig(questions="q.csv", generation=load_qa_config(_write(tmp_path, "http://127.0.0.1:9/v1")).generation)
    keyed = [
        QAConfig(questions="q.csv", generation=load_qa_config(_write(tmp_path, url)).generation)
        for url in (
            "http://u:sk-one-1234567890abcdef@127.0.0.1:9/v1",
            "http://u:sk-two-abcdef1234567890@127.0.0.1:9/v1",
        )
    ]
    assert keyed[0].generation_hash == keyed[1].generation_hash != plain.generation_hash
    # Pinned: the hashes earlier versions stored for URLs without credentials (a non-secret
    # query parameter included), so their tables are reused as before.
    llm = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1?api-version=2024", "api_key_env": None}
    reranker = {"backend": "http", "url": "http://127.0.0.1:9/v1/rerank"}
    # (The retrieval defaults of that time spelled out; the answering prompt's format moved the
    # generation and voting hashes on 2026-11-26: 71e2f5a5d1d9b62c and ffb20ff2c04d4b09 before, then
    # 9837a0093c8c78fa and 57c41247cc618dad before ANSWER_FORMAT 4, ranges read from a bare pair,
    # then 98b6c5fb402a4cd5 and 0229f2fa6d3d57f6 before ANSWER_FORMAT 5, a copied rule read as nothing,
    # then 8b3943eede9db494 and d278a378a290819b before ANSWER_FORMAT 6 and value_form, the form check,
    # then 25d30e30704e6511 and 665ed5ff1d9163f8 before CONTEXT_FORMAT 2, table items with their records.)
    old_defaults = {"use_planner": True, "budget_chars": 4000}
    cfg = qa_config_from_mapping(
        {
            "questions": "q.csv",
            "retrieval": {"reranker": reranker, **old_defaults},
            "generation": {"llm": llm, "max_retries": 2},
        }
    )
    assert cfg.retrieval_hash == "d2ac1aa42a28edd1"  # (cda549583b16fece before CONTEXT_FORMAT 2)
    assert (cfg.generation_hash, cfg.voting_hash) == ("35914a78819c2711", "657c9522e349c053")
    embedder = EmbedderSpec(backend="openai", model="e", base_url="http://127.0.0.1:9")
    pinned = IndexConfig(
        captioner="vision", vision_base_url="http://127.0.0.1:9/v1", vision_model="m", embedder=embedder
    )
    assert (pinned.caption_hash, pinned.embed_hash) == ("6e09e1905b96ea6e", "19b9ae479aad379a")
    index = IndexConfig(captioner="vision", vision_base_url="http://127.0.0.1:9/v1", vision_model="m")
    secret = IndexConfig(
        captioner="vision", vision_base_url="http://u:sk-vis-1234567890abcdef@127.0.0.1:9/v1", vision_model="m"
    )
    other_key = IndexConfig(
        captioner="vision", vision_base_url="http://u:sk-vis-abcdef1234567890@127.0.0.1:9/v1", vision_model="m"
    )
    assert secret.caption_hash == other_key.caption_hash != index.caption_hash


def test_a_lake_given_its_settings_again_uses_their_credentials_and_refuses_the_redacted_url(tmp_path) -> None:
    from kohaku_rag.embed import make_embedder

    lake = Lake(tmp_path / "lake")
    lake.root.mkdir()
    url = "http://u:sk-emb-1234567890abcdef@127.0.0.1:9"
    cfg = IndexConfig(embedder=EmbedderSpec(backend="openai", model="m", base_url=url))
    record_index_config(lake, cfg)
    assert "sk-emb" not in lake.index_config_path.read_text()
    assert resolve_index_config(lake, cfg) == cfg  # the same settings, with their credentials
    embedder = make_embedder(cfg.embedder)
    assert "sk-emb" not in repr(embedder) and "sk-emb" not in embedder.model_id  # the model id is stored
    recorded = resolve_index_config(lake, None)
    assert recorded.embedder.base_url == "http://[redacted]@127.0.0.1:9"
    with pytest.raises(ValueError, match=r"credentials were redacted when it was stored.*--index-config FILE"):
        make_embedder(recorded.embedder)


def _write(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.json"
    spec = {"backend": "openai", "model": "m", "base_url": url, "api_key_env": None}
    path.write_text(json.dumps({"questions": "q.csv", "generation": {"llm": spec}}))
    return path
