"""The LLM client's endpoint: cached replies are keyed by it, its timeout and retries are
config keys, and credentials written into it (or a key pasted into api_key_env) never
reach an error, a log line or a repr."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import replace
from pathlib import Path

import pytest

from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import dump_toml, load_qa_config
from kohaku_rag.errors import BackendError, RetriesExhausted
from kohaku_rag.http_retry import read_api_key, redact, safe_url, url_secrets
from kohaku_rag.indexing.captions import VisionLLMCaptioner
from kohaku_rag.llm import LLMSpec, make_chat_model
from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.cache import CachedChat
from kohaku_rag.llm.openai_compat import OpenAIChat
from tests.support.chat_server import ChatServer, Fault, hang

PASTED_KEY = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a"
URL_USER_KEY = "sk-userinfo-77aa88bb99cc"
URL_QUERY_KEY = "qk-0f1e2d3c4b5a69788796"


def ask(text: str) -> ChatRequest:
    return ChatRequest((Message("user", text),))


def test_two_endpoints_with_one_model_name_do_not_share_cached_replies(tmp_path: Path) -> None:
    with ChatServer() as one, ChatServer() as two:
        first = CachedChat(OpenAIChat(one.base_url, "same-model", api_key_env=None), tmp_path)
        assert first.complete(ask("hi")).text == "echo: hi"
        second = CachedChat(OpenAIChat(two.base_url, "same-model", api_key_env=None), tmp_path)
        reply = second.complete(ask("hi"))
        assert not reply.cached and len(two.requests) == 1  # the other server was asked
        # The same endpoint spelled differently (trailing /v1/, credentials) is the same endpoint.
        port = two.base_url.rsplit(":", 1)[1]
        again = CachedChat(
            OpenAIChat(f"http://u:{URL_USER_KEY}@127.0.0.1:{port}/v1/", "same-model", api_key_env=None), tmp_path
        )
        assert again.complete(ask("hi")).cached and len(two.requests) == 1
        # The model id names the endpoint, never its credentials.
        assert URL_USER_KEY not in again.model_id and f"127.0.0.1:{port}/v1" in again.model_id
        # An older cache (keyed without the endpoint) is read without error: a miss, not a crash.
        assert CachedChat(OpenAIChat(one.base_url, "other-model", api_key_env=None), tmp_path).misses == 0


def test_timeout_and_max_retries_are_config_keys(tmp_path: Path) -> None:
    config = tmp_path / "fast.toml"
    config.write_text(
        dump_toml(QAConfig(questions="q.csv"))
        .replace(
            "[generation.llm]\n",
            '[generation.llm]\nbase_url = "http://127.0.0.1:9"\n',
        )
        .replace('backend = "llama"', 'backend = "openai"')
        .replace("timeout = 120.0", "timeout = 0.3")
        .replace("max_retries = 5", "max_retries = 1")
    )
    cfg = load_qa_config(config)
    spec = cfg.generation.llm
    assert (spec.timeout, spec.max_retries) == (0.3, 1)
    # Throughput settings: the stored predictions stay valid when they change.
    default = load_qa_config(config).generation_hash
    slow = replace(cfg, generation=replace(cfg.generation, llm=replace(spec, timeout=9.0, max_retries=7)))
    assert slow.generation_hash == default and slow.retrieval_hash == cfg.retrieval_hash
    with pytest.raises(ValueError, match="timeout"):
        LLMSpec(timeout=0)
    with pytest.raises(ValueError, match="max_retries"):
        LLMSpec(max_retries=-1)
    with ChatServer() as srv:
        srv.script("slow", hang(2.0), hang(2.0), hang(2.0))
        chat = make_chat_model(replace(spec, base_url=srv.base_url, api_key_env=None), tmp_path)
        started = time.monotonic()
        with pytest.raises(RetriesExhausted, match=r"gave up after 2 attempts; last error: no reply within 0.3s"):
            chat.complete(ask("slow"))
        assert len(srv.attempts("slow")) == 2 and time.monotonic() - started < 1.9


def test_credentials_in_base_url_never_reach_errors_logs_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    with ChatServer() as srv:
        port = srv.base_url.rsplit(":", 1)[1]
        url = f"http://apikey:{URL_USER_KEY}@127.0.0.1:{port}/v1?api-version=2024&api-key={URL_QUERY_KEY}"
        echo = f"bad credentials {URL_USER_KEY} / {URL_QUERY_KEY}"  # a server that echoes them
        srv.script("x", Fault(status=503, error=echo), Fault(status=503, error=echo))
        chat = OpenAIChat(url, "m", api_key_env=None, max_retries=1, backoff_base=0.01, backoff_max=0.02)
        with caplog.at_level(logging.WARNING), pytest.raises(BackendError) as info:
            chat.complete(ask("x"))
        # They were sent: basic auth from user:key@, the query string kept after the API path.
        sent = srv.attempts("x")[0]
        assert base64.b64decode(sent.headers["authorization"].split()[1]).decode() == f"apikey:{URL_USER_KEY}"
        assert srv.paths[0] == f"/v1/chat/completions?api-version=2024&api-key={URL_QUERY_KEY}"
        spec = LLMSpec(backend="openai", model="m", base_url=url, api_key_env=None)
        shown = [str(info.value), caplog.text, repr(chat), chat.model_id, repr(spec), str(spec)]
        for text in shown:
            assert URL_USER_KEY not in text and URL_QUERY_KEY not in text, text
        assert "[redacted]" in str(info.value) and "api-version=2024" in repr(spec)
        captioner = VisionLLMCaptioner(url, "v", api_key_env=None, max_retries=0)
        assert URL_USER_KEY not in repr(captioner) and URL_QUERY_KEY not in repr(captioner)
    assert safe_url(url) == "http://[redacted]@127.0.0.1:" + port + "/v1?api-version=2024&api-key=[redacted]"
    assert redact(f"x {URL_QUERY_KEY} y", None, *url_secrets(url)) == "x [redacted] y"
    with pytest.raises(ValueError) as bad:
        OpenAIChat(f"ftp://u:{URL_USER_KEY}@h/v1", "m", api_key_env=None)
    assert URL_USER_KEY not in str(bad.value)


def test_a_key_pasted_into_api_key_env_is_refused_without_being_echoed(tmp_path: Path) -> None:
    for pasted in (PASTED_KEY, "jina_0123456789abcdefghijKLMNOPqrstu"):
        with pytest.raises(ValueError) as info:
            LLMSpec(backend="openai", base_url="http://127.0.0.1:9", api_key_env=pasted)
        assert pasted not in str(info.value) and "name of the environment variable" in str(info.value)
        with pytest.raises(ValueError) as info:
            read_api_key(pasted, "the chat model")
        assert pasted not in str(info.value)
        config = tmp_path / "pasted.json"
        config.write_text(
            '{"generation": {"llm": {"backend": "openai", "base_url": "http://127.0.0.1:9", '
            f'"api_key_env": "{pasted}"}}}}'
        )
        with pytest.raises(ValueError) as info:
            load_qa_config(config)
        assert pasted not in str(info.value) and "pasted.json" in str(info.value)
    assert read_api_key(None) is None
    assert LLMSpec(api_key_env="AZURE_OPENAI_API_KEY_2").api_key_env == "AZURE_OPENAI_API_KEY_2"
