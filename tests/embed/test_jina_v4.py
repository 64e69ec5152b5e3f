"""jina-embeddings-v4 against a real local server: typed text items, images as base64 data
URLs, task and Matryoshka width in every request, and the image cache (image hash, model,
width)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from kohaku_rag.embed import EmbedderSpec, image_embedder, make_embedder
from kohaku_rag.embed.cache import CachedEmbedder
from kohaku_rag.embed.jina import JinaEmbedder
from kohaku_rag.errors import BackendError
from tests.support.embedding_server import EmbeddingServer, decode_data_url, expected_image_vector, expected_vector

KEY_ENV = "KOHAKU_TEST_JINA_KEY"
V4 = "jina-embeddings-v4"


def png(seed: int, side: int = 24) -> bytes:
    """A small, distinct PNG (PyMuPDF renders it; no fixture files)."""
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, side, side), False)
    pix.clear_with(255 - seed)
    return pix.tobytes("png")


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddingServer]:
    monkeypatch.setenv(KEY_ENV, "jina-test-key")
    srv = EmbeddingServer().start()
    yield srv
    srv.stop()


def v4(server: EmbeddingServer, **kwargs: object) -> JinaEmbedder:
    settings: dict[str, object] = {"dimensions": 256, "base_url": server.base_url, "api_key_env": KEY_ENV}
    return JinaEmbedder(V4, **{**settings, **kwargs})  # type: ignore[arg-type]


def test_v4_text_and_image_requests(server: EmbeddingServer) -> None:
    jina = v4(server, image_batch_size=2, concurrency=1)
    images = [png(k) for k in range(3)]
    passages = jina.embed(["a passage"])
    (query,) = jina.embed(["a question"], role="query")
    figures = jina.embed_images(images)

    np.testing.assert_allclose(passages[0], unit(expected_vector("a passage", "retrieval.passage", 256)), atol=1e-6)
    np.testing.assert_allclose(query, unit(expected_vector("a question", "retrieval.query", 256)), atol=1e-6)
    for row, image in zip(figures, images, strict=True):
        np.testing.assert_allclose(row, unit(expected_image_vector(image, "retrieval.passage", 256)), atol=1e-6)
    text_request, query_request, *image_requests = server.requests
    assert text_request.body["input"] == [{"text": "a passage"}] and text_request.body["task"] == "retrieval.passage"
    assert query_request.body["task"] == "retrieval.query"
    assert [len(r.body["input"]) for r in image_requests] == [2, 1]  # image_batch_size
    for request in server.requests:
        assert request.body["model"] == V4 and request.body["dimensions"] == 256
        assert request.headers["authorization"] == "Bearer jina-test-key"
    for request in image_requests:
        assert request.body["task"] == "retrieval.passage"
        assert all(item["image"].startswith("data:image/png;base64,") for item in request.body["input"])
    assert [decode_data_url(i["image"]) for r in image_requests for i in r.body["input"]] == images
    assert jina.embeds_images and jina.dim == 256


def test_v3_is_text_only_and_sends_plain_strings(server: EmbeddingServer) -> None:
    v3 = JinaEmbedder(dimensions=16, base_url=server.base_url, api_key_env=KEY_ENV)
    v3.embed(["plain"])
    assert server.requests[0].body["input"] == ["plain"]
    assert image_embedder(v3) is None and not v3.embeds_images
    with pytest.raises(ValueError, match="embeds text only"):
        v3.embed_images([png(1)])


@pytest.mark.parametrize("width", [64, 4096])
def test_v4_width_outside_matryoshka_range_is_refused(width: int) -> None:
    with pytest.raises(ValueError, match="128 to 2048"):
        EmbedderSpec(backend="jina", model=V4, dimensions=width)
    assert EmbedderSpec(backend="jina", model=V4, dimensions=2048).embeds_images
    assert not EmbedderSpec(backend="jina").embeds_images


def test_not_an_image_fails_before_any_request(server: EmbeddingServer) -> None:
    with pytest.raises(ValueError, match="not a PNG, JPEG"):
        v4(server).embed_images([b"%PDF-1.7 not an image"])
    assert server.requests == []


def test_server_refusal_is_a_backend_error(server: EmbeddingServer) -> None:
    server.fail_images = True
    with pytest.raises(BackendError, match="HTTP 422"):
        v4(server).embed_images([png(1)])


def test_image_cache_keyed_by_image_model_and_width(tmp_path: Path, server: EmbeddingServer) -> None:
    spec = EmbedderSpec(backend="jina", model=V4, dimensions=128, base_url=server.base_url, api_key_env=KEY_ENV)
    cached = make_embedder(spec, tmp_path)
    assert isinstance(cached, CachedEmbedder) and image_embedder(cached) is cached
    first = cached.embed_images([png(1), png(2), png(1)])
    assert len(server.requests) == 1 and len(server.requests[0].body["input"]) == 2  # the repeat is sent once
    again = make_embedder(spec, tmp_path).embed_images([png(2), png(1)])  # a new process, same file
    np.testing.assert_array_equal(again, first[[1, 0]])
    assert len(server.requests) == 1
    make_embedder(spec, tmp_path).embed_images([png(3), png(1)])  # only the new image goes out
    assert [decode_data_url(i["image"]) for i in server.requests[-1].body["input"]] == [png(3)]
    wider = EmbedderSpec(backend="jina", model=V4, dimensions=256, base_url=server.base_url, api_key_env=KEY_ENV)
    assert make_embedder(wider, tmp_path).embed_images([png(1)]).shape == (1, 256)  # another width: a miss
    assert len(server.requests) == 3
    # A text cached under the same model never answers for an image of the same bytes' hash.
    digest = hashlib.sha256(png(1)).hexdigest()
    assert cached.embed([digest]).shape == (1, 128) and len(server.requests) == 4


def test_cache_in_front_of_a_text_only_model_has_no_image_capability(tmp_path: Path, server: EmbeddingServer) -> None:
    cached = make_embedder(EmbedderSpec(backend="jina", base_url=server.base_url, api_key_env=KEY_ENV), tmp_path)
    assert image_embedder(cached) is None
    with pytest.raises(ValueError, match="does not embed images"):
        cached.embed_images([png(1)])  # type: ignore[attr-defined]
