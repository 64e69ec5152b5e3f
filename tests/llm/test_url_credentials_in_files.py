"""A `user:pass@` URL is usable from a config file: TOML has no null, so
`api_key_env = ""` says "no key", and a dumped config keeps saying it."""

from __future__ import annotations

from pathlib import Path

from kohaku_rag.answering.qa_config_file import dump_toml, load_qa_config
from kohaku_rag.llm import ChatRequest, Message, make_chat_model
from tests.support.chat_server import ChatServer


def test_a_toml_config_sends_the_urls_own_credentials(tmp_path: Path, chat_server: ChatServer) -> None:
    # `api_key_env = ""` is TOML's way to say "no key variable" (TOML has no None): the URL's
    # own credentials are sent.
    questions = tmp_path / "q.csv"
    questions.write_text("id,question,answer_unit\nq1,What?,is_blank\n")
    url = chat_server.base_url.replace("http://", "http://kohaku:s3cret@")
    path = tmp_path / "basic.toml"
    path.write_text(
        f'questions = "{questions}"\n\n[generation.llm]\nbackend = "openai"\nmodel = "m"\n'
        f'base_url = "{url}"\napi_key_env = ""\nmax_retries = 0\n'
    )
    cfg = load_qa_config(path)
    assert cfg.generation.llm.api_key_env is None
    chat = make_chat_model(cfg.generation.llm, tmp_path / "lake")
    reply = chat.complete(ChatRequest((Message("user", "hello"),), temperature=0.0, max_tokens=8, seed=0))
    assert "hello" in reply.text
    (request,) = chat_server.requests
    assert request.headers.get("authorization", "").startswith("Basic ")  # the URL's credentials went
    # written back out, the file still says "no key" (a left-out key read back as OPENAI_API_KEY)
    again = tmp_path / "again.toml"
    again.write_text(dump_toml(cfg))
    assert load_qa_config(again).generation.llm.api_key_env is None
