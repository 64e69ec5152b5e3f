"""Figure captions: text that makes a figure's content searchable.

Two captioners share one interface. `OcrCaptioner` (the offline default) reads the words
printed in the figure with RapidOCR's bundled ONNX models: axis labels, units, tick values,
legend entries and diagram labels. `VisionLLMCaptioner` asks a vision model behind an
OpenAI-compatible `/v1/chat/completions` endpoint to describe the figure. Both return the
PDF's own caption first, then what they read or saw.

Captions are cached on disk by a content key (image digest, captioner id, PDF caption), so
a re-run, a renamed document or a second config calls neither OCR nor the model again.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
from PIL import Image, UnidentifiedImageError

from kohaku_rag.document.tree import media_hash
from kohaku_rag.errors import BackendError, DocumentError, KohakuError
from kohaku_rag.http_retry import (
    Retryable,
    RetryPolicy,
    api_url,
    call_with_retries,
    http_error,
    normalise_base_url,
    post_json,
    read_api_key,
    safe_url,
    snippet,
    url_secrets,
)
from kohaku_rag.lake.tables import write_bytes_atomic

log = logging.getLogger(__name__)

# Shaped after the KohakuRAG paper's captioning prompt: data values, axes and units, key
# elements, short enough to embed as one passage.
CAPTION_PROMPT = (
    "This image is a figure from a technical document (a chart, plot, diagram or screenshot). "
    "In 2-3 sentences, describe what it shows so that it can be found by a text search: "
    "for a chart or plot give the axis labels with their units, the series shown and the "
    "data values or ranges you can read; for a diagram name its key components and how they "
    "connect. State only what is visible in the image."
)

CaptionItem = tuple[bytes, str]  # (PNG bytes, the PDF's caption text)


@runtime_checkable
class Captioner(Protocol):
    """Turns a figure image plus its PDF caption into one searchable text.

    `captioner_id` names the engine, the model and a hash of the prompt/settings: it is part
    of the caption cache key, so changing any of them re-captions.
    """

    captioner_id: str

    def caption(self, image_png: bytes, pdf_caption: str) -> str: ...

    def caption_many(self, items: Sequence[CaptionItem]) -> list[str | Exception]: ...


def figure_source(image: bytes) -> str:
    """How errors name a figure: by the content hash it is stored under."""
    return f"figure {media_hash(image)}"


def check_image(image: bytes) -> tuple[int, int]:
    """The image's (width, height); DocumentError naming its digest if it cannot be decoded."""
    if not image:
        raise DocumentError(figure_source(image), "image is empty")
    try:
        with Image.open(io.BytesIO(image)) as img:
            img.load()
            return img.size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise DocumentError(
            figure_source(image), f"not a decodable image ({type(exc).__name__}: {exc}); re-extract the figure"
        ) from exc


def join_caption(pdf_caption: str, body: str, label: str) -> str:
    """PDF caption first (authoritative), then the machine-read part after its label."""
    parts = [p for p in (pdf_caption.strip(), f"{label}: {body.strip()}" if body.strip() else "") if p]
    return " ".join(parts)


def _settings_hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def _caption_each(captioner: Captioner, items: Sequence[CaptionItem]) -> list[str | Exception]:
    """One bad figure fails alone: its slot holds the error, the others are captioned."""
    out: list[str | Exception] = []
    for image, pdf_caption in items:
        try:
            out.append(captioner.caption(image, pdf_caption))
        except KohakuError as exc:
            log.warning("caption failed: %s", exc)
            out.append(exc)
    return out


# --- OCR ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OcrWord:
    text: str
    top: float
    bottom: float
    left: float
    right: float

    @property
    def vertical(self) -> bool:
        """A rotated label (a y-axis title) reads as its own line, not part of a row."""
        return len(self.text) > 2 and self.bottom - self.top > 2 * (self.right - self.left)


class OcrCaptioner:
    """PDF caption + the text RapidOCR reads in the figure, lines in reading order.

    The engine (bundled ONNX models, no download) loads on first use, once per instance.
    `det_side` is RapidOCR's detector input size (short side, upscaled to it): the default
    736 reads 6-pt tick labels of a 150-dpi render; 480 is ~2x faster and misses some.
    `threads` caps onnxruntime's threads (0: its default, all cores); 1 suits runs that
    caption several documents in parallel processes.
    """

    def __init__(self, *, min_score: float = 0.5, det_side: int = 736, threads: int = 0) -> None:
        if not 0 <= min_score <= 1 or det_side < 32 or threads < 0:
            raise ValueError("min_score must be in [0, 1], det_side >= 32 and threads >= 0")
        self.min_score = min_score
        self.det_side = det_side
        self.threads = threads
        version = _package_version("rapidocr")
        self.captioner_id = f"ocr:rapidocr-{version}:{_settings_hash('ocr-v1', min_score, det_side)}"
        self._engine: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OcrCaptioner({self.captioner_id!r})"

    def caption(self, image_png: bytes, pdf_caption: str) -> str:
        return join_caption(pdf_caption, " | ".join(self.read_lines(image_png)), "Text in figure")

    def caption_many(self, items: Sequence[CaptionItem]) -> list[str | Exception]:
        return _caption_each(self, items)

    def read_lines(self, image_png: bytes) -> list[str]:
        """The figure's text, one string per visual line, top to bottom, left to right."""
        check_image(image_png)
        engine = self._load()
        try:
            with self._lock:  # one ONNX session; RapidOCR is not documented thread-safe
                result = engine(image_png)
        except Exception as exc:  # an OCR crash on one image must not look like a bug here
            raise BackendError(f"{figure_source(image_png)}: OCR failed ({type(exc).__name__}: {exc})") from exc
        if result.boxes is None or not result.txts:
            return []
        words = [
            OcrWord(
                text.strip(),
                float(box[:, 1].min()),
                float(box[:, 1].max()),
                float(box[:, 0].min()),
                float(box[:, 0].max()),
            )
            for box, text, score in zip(result.boxes, result.txts, result.scores)
            if score >= self.min_score and text.strip()
        ]
        return [" ".join(w.text for w in row) for row in _rows(words)]

    def _load(self) -> Any:
        with self._lock:
            if self._engine is None:
                from rapidocr import RapidOCR

                params: dict[str, Any] = {
                    "Global.log_level": "warning",
                    "Det.limit_type": "min",
                    "Det.limit_side_len": self.det_side,
                }
                if self.threads:
                    params["EngineConfig.onnxruntime.intra_op_num_threads"] = self.threads
                self._engine = RapidOCR(params=params)
            return self._engine


def _rows(words: list[OcrWord]) -> list[list[OcrWord]]:
    """Group boxes whose vertical extents overlap by half into rows, each sorted left→right;
    rotated labels stand alone. Rows come top to bottom."""
    rows: list[list[OcrWord]] = []
    for word in sorted((w for w in words if not w.vertical), key=lambda w: (w.top + w.bottom) / 2):
        if rows:
            row = rows[-1]
            top, bottom = min(w.top for w in row), max(w.bottom for w in row)
            shared = min(bottom, word.bottom) - max(top, word.top)
            if shared >= 0.5 * min(bottom - top, word.bottom - word.top):
                row.append(word)
                continue
        rows.append([word])
    rows.extend([w] for w in words if w.vertical)
    rows.sort(key=lambda row: min(w.top for w in row))
    return [sorted(row, key=lambda w: w.left) for row in rows]


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


# --- vision LLM ---------------------------------------------------------------------------


class VisionLLMCaptioner:
    """PDF caption + a vision model's description, over an OpenAI-compatible endpoint.

    The API key is read once from the environment variable `api_key_env` (None: a local
    server that needs none); it is sent as a bearer token and never logged nor put in an
    error message. 429, 5xx, timeouts and dropped connections are retried up to
    `max_retries` times with exponential back-off and jitter, waiting at least what a
    Retry-After header asks (up to 5 minutes); at most `max_concurrent` requests run at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        prompt: str = CAPTION_PROMPT,
        max_tokens: int = 300,
        max_concurrent: int = 4,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        api_key_env: str | None = "OPENAI_API_KEY",
    ) -> None:
        if max_concurrent < 1 or timeout <= 0 or max_retries < 0:
            raise ValueError("max_concurrent must be >= 1, timeout > 0 and max_retries >= 0")
        self.base_url = normalise_base_url(base_url)
        # Credentials written into base_url (user:key@, ?api-key=) never reach a message.
        self._where = f"{model} at {safe_url(self.base_url)}"
        self._secrets = url_secrets(self.base_url)
        self.model = model
        self.max_concurrent = max_concurrent
        self.retry = RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max)
        self.max_tokens = max_tokens
        self.prompt = prompt
        self.captioner_id = f"vision:{model}:{_settings_hash(prompt, max_tokens)}"
        self._api_key = read_api_key(api_key_env, "the vision captioner")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._http = httpx.Client(headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"VisionLLMCaptioner(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    def close(self) -> None:
        self._http.close()

    def caption(self, image_png: bytes, pdf_caption: str) -> str:
        return join_caption(pdf_caption, self.describe(image_png), "Figure content")

    def caption_many(self, items: Sequence[CaptionItem]) -> list[str | Exception]:
        """Captions in input order; a failed item holds its error, the others go on."""
        if len(items) <= 1 or self.max_concurrent == 1:
            return _caption_each(self, items)
        with ThreadPoolExecutor(max_workers=min(self.max_concurrent, len(items))) as pool:
            return list(pool.map(lambda item: _caption_each(self, [item])[0], items))

    def describe(self, image_png: bytes) -> str:
        check_image(image_png)  # a corrupt image is the document's fault, not the server's
        body = self._payload(image_png)
        where = self._where
        return call_with_retries(
            lambda: self._post_once(body, image_png),
            self.retry,
            where=where,
            failed=f"{figure_source(image_png)}: captioning with {where} failed",
        )

    def _payload(self, image_png: bytes) -> dict[str, Any]:
        data_url = "data:image/png;base64," + base64.b64encode(image_png).decode("ascii")
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": self.prompt},
                        {"type": "image_url", "image_url": {"url": data_url}},
                    ],
                }
            ],
        }

    def _post_once(self, body: dict[str, Any], image_png: bytes) -> str:
        response = post_json(
            self._http, api_url(self.base_url, "chat/completions"), body, self._api_key, *self._secrets
        )
        if response.status_code >= 400:
            raise BackendError(
                f"{figure_source(image_png)}: {self._where} answered "
                f"{http_error(response, self._api_key, *self._secrets)}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError(
                f"{figure_source(image_png)}: {self._where} sent no "
                f"choices[0].message.content: {snippet(response, self._api_key, *self._secrets)}"
            ) from exc
        if not isinstance(content, str) or not content.strip():
            raise Retryable("empty description")
        return " ".join(content.split())


# --- cache --------------------------------------------------------------------------------


def cache_key(image_digest: str, captioner_id: str, pdf_caption: str) -> str:
    """Content key of one caption: the image, who captions it, and the PDF caption it joins."""
    return hashlib.sha256(json.dumps([image_digest, captioner_id, pdf_caption]).encode()).hexdigest()


@dataclass(frozen=True)
class CaptionCache:
    """One small JSON file per caption under `dir`, written atomically."""

    dir: Path

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"{key!r} is not a caption cache key (64 lowercase hex digits)")
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        path = self.path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            return record["text"] if isinstance(record.get("text"), str) else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AttributeError) as exc:
            # A damaged entry is a miss: it is recomputed and overwritten, never trusted.
            log.warning("caption cache entry %s is unreadable (%s); recomputing", path, exc)
            return None

    def put(self, key: str, text: str, **meta: str) -> None:
        record = {"text": text, **meta}
        write_bytes_atomic(self.path(key), json.dumps(record, ensure_ascii=False).encode("utf-8"))


def caption_cached(captioner: Captioner, cache: CaptionCache, image: bytes, pdf_caption: str) -> tuple[str, bool]:
    """(caption, True) from the cache, else (caption, False) after captioning and storing it."""
    key = cache_key(media_hash(image), captioner.captioner_id, pdf_caption)
    hit = cache.get(key)
    if hit is not None:
        return hit, True
    text = captioner.caption(image, pdf_caption)
    cache.put(key, text, captioner_id=captioner.captioner_id)
    return text, False


def caption_many_cached(
    captioner: Captioner, cache: CaptionCache, items: Sequence[CaptionItem]
) -> list[tuple[str, bool] | Exception]:
    """`caption_cached` for a batch: misses go to `captioner.caption_many` together (so a
    vision model sees them concurrently); each failed item holds its own error."""
    keys = [cache_key(media_hash(image), captioner.captioner_id, caption) for image, caption in items]
    cached = [cache.get(key) for key in keys]
    misses = [i for i, text in enumerate(cached) if text is None]
    fresh = dict(zip(misses, captioner.caption_many([items[i] for i in misses]) if misses else []))
    out: list[tuple[str, bool] | Exception] = []
    for i, key in enumerate(keys):
        text = cached[i]
        if text is not None:
            out.append((text, True))
            continue
        result = fresh[i]
        if isinstance(result, str):
            cache.put(key, result, captioner_id=captioner.captioner_id)
            out.append((result, False))
        else:
            out.append(result)
    return out
