"""Embedding backends: the bundled MiniLM and e5 models, the OpenAI and Jina HTTP backends
against a real local server, the SQLite cache, and the spec/factory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kohaku_rag.embed import Embedder, EmbedderSpec, make_embedder
from kohaku_rag.embed.base import Role
from kohaku_rag.embed.cache import CachedEmbedder
from kohaku_rag.embed.e5 import E5Embedder
from kohaku_rag.embed.jina import JinaEmbedder
from kohaku_rag.embed.minilm import MiniLMEmbedder, load_session
from kohaku_rag.embed.openai_compat import OpenAIEmbedder
from kohaku_rag.errors import BackendError
from tests.support.at_once import open_at_once
from tests.support.embedding_server import DEFAULT_DIM, EmbeddingServer, expected_vector

KEY_ENV = "KOHAKU_TEST_EMBED_KEY"
KEY = "sk-test-7f3a9c-do-not-leak"

SENTENCES = [
    "Training a large transformer emitted as much CO2 as five cars over their lifetimes.",
    "The carbon footprint of training big NLP models is substantial.",
    "Bake the bread at 220 degrees for forty minutes.",
    "GPUs drew 300 W each during the experiment, measured with nvidia-smi.",
    "A short one.",
    "Energy use of neural network training depends on hardware, region and duration of the run, "
    "and reporting it helps researchers compare the cost of models fairly.",
]


def unit_rows(vectors: np.ndarray) -> bool:
    return bool(np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5))


def expected_rows(texts: Sequence[str], task: str | None, dim: int) -> np.ndarray:
    rows = np.stack([expected_vector(t, task, dim) for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# ---- bundled models ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=4)


def test_minilm_gives_384_d_unit_vectors(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    assert minilm.dim == 384 and unit_rows(vectors)


def test_minilm_similar_sentences_are_closer(minilm: MiniLMEmbedder) -> None:
    co2, footprint, bread = minilm.embed(SENTENCES[:3])
    assert co2 @ footprint > co2 @ bread + 0.2
    # Published all-MiniLM-L6-v2 similarities (sentence-transformers model card): int8 stays close.
    happy, very_happy, dog, sunny = minilm.embed(
        ["That is a happy person", "That is a very happy person", "That is a happy dog", "Today is a sunny day"]
    )
    assert happy @ very_happy == pytest.approx(0.943, abs=0.02)
    assert happy @ dog == pytest.approx(0.695, abs=0.02)
    assert happy @ sunny == pytest.approx(0.257, abs=0.02)


def test_minilm_batch_order_independent(minilm: MiniLMEmbedder) -> None:
    together = minilm.embed(SENTENCES)  # batch_size 4: two length-sorted, padded batches
    one_by_one = np.vstack([minilm.embed([s]) for s in SENTENCES])
    reversed_back = minilm.embed(SENTENCES[::-1])[::-1]
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    np.testing.assert_allclose(together, reversed_back, atol=1e-5)


def test_minilm_truncates_long_text_and_handles_empty(minilm: MiniLMEmbedder) -> None:
    long = " ".join(["energy"] * 2000)
    vectors = minilm.embed([long, long + " extra words at the very end", ""])
    assert unit_rows(vectors[:2])
    # Only the first 256 tokens count, so what follows them changes nothing.
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_session_loaded_once_per_process() -> None:
    first, second = MiniLMEmbedder(), MiniLMEmbedder(batch_size=8)
    assert first._session is second._session
    assert load_session.cache_info().currsize == 1


def test_embed_refuses_a_bare_string_and_unknown_role(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="wrap it in a list"):
        minilm.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role must be"):
        CachedEmbedder(minilm, tmp_path).embed(["x"], role="document")  # type: ignore[arg-type]


def test_e5_unit_vectors_similarity_and_roles() -> None:
    e5 = E5Embedder(batch_size=4)
    passages = e5.embed(SENTENCES)
    assert passages.shape == (len(SENTENCES), 384) and unit_rows(passages)
    (query,) = e5.embed(["how much CO2 does training a transformer emit"], role="query")
    assert query @ passages[0] > query @ passages[2] + 0.05
    # The query prefix changes the vector: roles are not interchangeable.
    (as_passage,) = e5.embed(["how much CO2 does training a transformer emit"], role="passage")
    assert not np.allclose(query, as_passage, atol=1e-3)
    one_by_one = np.vstack([e5.embed([s]) for s in SENTENCES])
    np.testing.assert_allclose(passages, one_by_one, atol=1e-5)
    assert "e5" in e5.model_id and E5Embedder().model_id == e5.model_id


# ---- HTTP backends against a real local server -------------------------------------------


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    srv = EmbeddingServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def test_openai_survives_429_500_and_timeout(server: EmbeddingServer, api_key: str) -> None:
    server.faults.extend(["429", "500", "slow"])
    texts = [f"sentence number {i}" for i in range(10)]
    embedder = OpenAIEmbedder(
        server.base_url + "/v1/",
        "test-embed-small",
        api_key_env=KEY_ENV,
        batch_size=4,
        timeout=0.5,
        concurrency=1,
        backoff_base=0.05,
    )
    vectors = embedder.embed(texts)

    np.testing.assert_allclose(vectors, expected_rows(texts, None, DEFAULT_DIM), atol=1e-6)
    assert embedder.dim == DEFAULT_DIM  # learned from the first response
    # 3 batches + one retry for each of the three faults.
    assert len(server.requests) == 6
    first, after_429 = server.requests[0], server.requests[1]
    assert after_429.at - first.at >= 0.95, "Retry-After: 1 was not honoured"
    for req in server.requests:
        assert req.path == "/v1/embeddings"
        assert req.headers["authorization"] == f"Bearer {api_key}"
        assert req.body["model"] == "test-embed-small" and "dimensions" not in req.body
    # The three faults all hit the first batch; the retries resent exactly it.
    assert all(req.body["input"] == texts[:4] for req in server.requests[:4])
    assert [t for req in server.requests[3:] for t in req.body["input"]] == texts


def test_openai_sends_dimensions_and_accepts_bare_base_url(server: EmbeddingServer, api_key: str) -> None:
    embedder = OpenAIEmbedder(server.base_url, "m", api_key_env=KEY_ENV, dimensions=8, batch_size=3)
    texts = [f"t{i}" for i in range(7)]
    vectors = embedder.embed(texts)  # 3 batches, run concurrently
    np.testing.assert_allclose(vectors, expected_rows(texts, None, 8), atol=1e-6)
    assert {req.body["dimensions"] for req in server.requests} == {8}
    assert embedder.dim == 8 and "dim=8" in embedder.model_id


def test_openai_without_key_env_sends_no_authorization(server: EmbeddingServer) -> None:
    OpenAIEmbedder(server.base_url, "m", api_key_env=None).embed(["x"])
    assert "authorization" not in server.requests[0].headers


def test_openai_gives_up_with_a_clear_error(server: EmbeddingServer, api_key: str) -> None:
    server.faults.extend(["500"] * 3)
    embedder = OpenAIEmbedder(server.base_url, "m", api_key_env=KEY_ENV, max_retries=2, backoff_base=0.01)
    with pytest.raises(BackendError) as caught:
        embedder.embed(["a", "b"])
    message = str(caught.value)
    assert f"{server.base_url}/v1/embeddings" in message and "HTTP 500" in message and "3 attempts" in message
    assert api_key not in message


def test_openai_does_not_leak_an_echoed_key(server: EmbeddingServer, api_key: str) -> None:
    server.faults.append("401-echo")
    embedder = OpenAIEmbedder(server.base_url, "m", api_key_env=KEY_ENV)
    with pytest.raises(BackendError, match="HTTP 401") as caught:
        embedder.embed(["a"])
    assert api_key not in str(caught.value) and api_key not in repr(embedder)
    assert len(server.requests) == 1  # a 401 is not retried


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_retried_then_named(unused_port: int, api_key: str) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    embedder = OpenAIEmbedder(url, "m", api_key_env=KEY_ENV, max_retries=1, backoff_base=0.01)
    with pytest.raises(BackendError, match=r"127\.0\.0\.1.*connection error"):
        embedder.embed(["a"])


def test_jina_request_format_and_roles(server: EmbeddingServer, api_key: str) -> None:
    server.faults.extend(["429", "slow"])
    jina = JinaEmbedder(
        dimensions=16,
        base_url=server.base_url,
        api_key_env=KEY_ENV,
        batch_size=2,
        timeout=0.5,
        backoff_base=0.05,
    )
    passages = jina.embed(SENTENCES[:3])
    (query,) = jina.embed(["what is the footprint"], role="query")

    np.testing.assert_allclose(passages, expected_rows(SENTENCES[:3], "retrieval.passage", 16), atol=1e-6)
    np.testing.assert_allclose(query, expected_rows(["what is the footprint"], "retrieval.query", 16)[0], atol=1e-6)
    for req in server.requests:
        assert req.headers["authorization"] == f"Bearer {api_key}"
        body = req.body
        assert body["model"] == "jina-embeddings-v3" and body["dimensions"] == 16
        assert body["normalized"] is True and body["embedding_type"] == "float"
    assert server.requests[-1].body["task"] == "retrieval.query"
    assert {r.body["task"] for r in server.requests[:-1]} == {"retrieval.passage"}
    assert "retrieval.passage" in jina.model_id and jina.dim == 16


@pytest.mark.parametrize("backend", ["jina", "openai"])
def test_missing_key_variable_names_it(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    spec = EmbedderSpec(backend=backend, base_url="http://127.0.0.1:9", api_key_env=KEY_ENV)  # type: ignore[arg-type]
    with pytest.raises(BackendError, match=f"set the environment variable {KEY_ENV}"):
        make_embedder(spec)


def test_jina_default_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JINA_API_KEY", raising=False)
    with pytest.raises(BackendError, match="JINA_API_KEY"):
        make_embedder(EmbedderSpec(backend="jina"))


# ---- cache ---------------------------------------------------------------------------------


class Counting:
    """Wraps a real embedder and records what it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts, role=role)


def test_cache_second_call_is_all_hits(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    counting = Counting(minilm)
    cached = CachedEmbedder(counting, tmp_path)
    texts = SENTENCES + [SENTENCES[0], SENTENCES[1]]  # duplicates within one call

    first = cached.embed(texts)
    assert counting.calls == [SENTENCES]  # each distinct text once
    assert (cached.hits, cached.misses) == (0, len(SENTENCES))
    np.testing.assert_allclose(first, minilm.embed(texts), atol=1e-6)

    second = cached.embed(texts)
    assert len(counting.calls) == 1, "a fully cached call must not reach the inner embedder"
    assert (cached.hits, cached.misses) == (len(SENTENCES), len(SENTENCES))
    np.testing.assert_array_equal(first, second)

    cached.embed(["a brand new sentence", SENTENCES[2]])
    assert counting.calls[-1] == ["a brand new sentence"]


def test_cache_keys_include_role_and_model(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    counting = Counting(minilm)
    cached = CachedEmbedder(counting, tmp_path)
    cached.embed(SENTENCES[:2], role="passage")
    cached.embed(SENTENCES[:2], role="query")
    assert len(counting.calls) == 2 and cached.misses == 4
    e5 = Counting(E5Embedder())
    CachedEmbedder(e5, tmp_path).embed(SENTENCES[:2])
    assert e5.calls == [SENTENCES[:2]]


def test_cache_is_shared_across_processes(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from kohaku_rag.embed import EmbedderSpec, make_embedder\n"
        "e = make_embedder(EmbedderSpec(), cache_dir=Path(sys.argv[1]))\n"
        "e.embed(sys.argv[2:]); print(e.misses)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), *SENTENCES[:4]],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert run.stdout.strip() == "4"

    counting = Counting(MiniLMEmbedder())
    cached = CachedEmbedder(counting, tmp_path)
    vectors = cached.embed(SENTENCES[:4])
    assert counting.calls == [] and cached.hits == 4
    np.testing.assert_allclose(vectors, MiniLMEmbedder().embed(SENTENCES[:4]), atol=1e-6)


def test_cache_with_http_backend_skips_the_server(tmp_path: Path, server: EmbeddingServer, api_key: str) -> None:
    spec = EmbedderSpec(backend="openai", model="m", base_url=server.base_url, api_key_env=KEY_ENV)
    first = make_embedder(spec, cache_dir=tmp_path).embed(["x", "y"])
    again = make_embedder(spec, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.embed(["y", "x"]), first[::-1])
    assert len(server.requests) == 1


# ---- spec and factory -----------------------------------------------------------------------


def test_spec_builds_each_backend(tmp_path: Path) -> None:
    assert isinstance(make_embedder(EmbedderSpec()), MiniLMEmbedder)
    assert isinstance(make_embedder(EmbedderSpec(backend="e5", model="original")), E5Embedder)
    cached = make_embedder(EmbedderSpec(), cache_dir=tmp_path)
    assert isinstance(cached, CachedEmbedder) and isinstance(cached, Embedder)
    assert cached.model_id == "minilm-l6-v2-int8" and cached.dim == 384


def test_spec_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="unknown"):
        EmbedderSpec(backend="word2vec")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no dimensions"):
        EmbedderSpec(backend="minilm", dimensions=128)
    with pytest.raises(ValueError, match="batch_size"):
        EmbedderSpec(batch_size=0)
    with pytest.raises(ValueError, match="only has"):
        make_embedder(EmbedderSpec(model="bge-large"))
    with pytest.raises(ValueError, match="e5 variant"):
        make_embedder(EmbedderSpec(backend="e5", model="large"))
    with pytest.raises(ValueError, match="http"):
        OpenAIEmbedder("localhost:8000", "m", api_key_env=None)


def test_slow_server_timeout_is_bounded(server: EmbeddingServer) -> None:
    server.faults.extend(["slow"] * 2)
    embedder = OpenAIEmbedder(server.base_url, "m", api_key_env=None, timeout=0.3, max_retries=1, backoff_base=0.01)
    started = time.monotonic()
    with pytest.raises(BackendError, match="timed out"):
        embedder.embed(["a"])
    assert time.monotonic() - started < 1.5
    assert len(server.requests) == 2


class _InstantEmbedder:
    """Vectors at once, so the cache's opening is the only thing the threads race on."""

    model_id = "instant"
    dim = 4

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        return np.ones((len(texts), self.dim), dtype=np.float32) / 2


def test_processes_opening_a_new_embedding_cache_at_once_all_start(tmp_path: Path) -> None:
    """Connections opening the same new embedding cache at once all start: the switch to WAL
    waits for the lock instead of answering "database is locked" (two processes starting on
    one lake). Each thread here has its own connection, as each process has."""

    def open_cache(folder: Path) -> float:
        cache = CachedEmbedder(_InstantEmbedder(), folder)
        total = float(cache.embed(["hello"]).sum())
        cache.close()
        return total

    assert all(totals == [2.0] * 6 for totals in open_at_once(tmp_path, open_cache, rounds=100))
