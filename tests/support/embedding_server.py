"""A real HTTP embeddings server on 127.0.0.1 for the OpenAI and Jina backend tests.

Speaks `/v1/embeddings` (both dialects: it reads `dimensions` and Jina's `task`), returns
deterministic, deliberately un-normalised vectors in *reversed* order (so clients must
sort by `index`), records every request, and replays a queue of one-shot faults.

Jina v4's typed items are understood too: `{"text": ...}` embeds like a plain string and
`{"image": "data:image/<type>;base64,..."}` must be a well-formed data URL of a decodable
image (else HTTP 422, as a real server refuses it); an image's vector is seeded by its
sha256, or, when `image_like` maps its sha256 to a text, is that text's *query* vector (a
figure that "shows" what a question asks). `fail_images` answers 422 to every request
holding an image (an endpoint that cannot take them), until it is cleared. Faults:

    "429"      rate limited, with Retry-After: 1
    "500"      internal error
    "422"      input refused (not retried by clients)
    "slow"     sleeps past the client's timeout before answering
    "401-echo" unauthorised, echoing the Authorization header back in the body
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from tests.support.local_http import JsonHandler, LocalServer

DEFAULT_DIM = 24
SLOW_SECONDS = 2.0


def expected_vector(text: str, task: str | None, dim: int) -> np.ndarray:
    """What the server returns for `text`, before the client normalises it."""
    seed = int.from_bytes(hashlib.sha256(f"{task}|{text}".encode()).digest()[:8], "little")
    return 3.0 * np.random.default_rng(seed).standard_normal(dim)


QUERY_TASK = "retrieval.query"


def expected_image_vector(image: bytes, task: str | None, dim: int) -> np.ndarray:
    """What the server returns for an image that `image_like` does not map."""
    return expected_vector(f"image:{hashlib.sha256(image).hexdigest()}", task, dim)


def decode_data_url(url: object) -> bytes:
    """The image of a `data:image/...;base64,` URL; ValueError saying what is wrong."""
    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        raise ValueError(f"image is not a data:image/...;base64, URL: {str(url)[:40]!r}")
    media, payload = url[len("data:") :].split(";base64,", 1)
    try:
        image = base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 in the data URL: {exc}") from exc
    try:
        with Image.open(io.BytesIO(image)) as img:
            fmt = (img.format or "").lower()
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"the data URL holds no decodable image: {exc}") from exc
    if media.split("/", 1)[1] != fmt:
        raise ValueError(f"the data URL says {media} but holds {fmt}")
    return image


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    size: int = 0  # bytes of the request body

    @property
    def images(self) -> list[bytes]:
        """The images this request carried (Jina v4 items), decoded."""
        items = self.body.get("input") or []
        return [decode_data_url(i["image"]) for i in items if isinstance(i, dict) and "image" in i]


@dataclass
class EmbeddingServer(LocalServer):
    faults: deque[str] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    image_like: dict[str, str] = field(default_factory=dict)  # image sha256 -> a query text
    fail_images: bool = False

    def vector(self, item: object, task: str | None, dim: int) -> np.ndarray:
        """The (un-normalised) vector of one input item; ValueError for a malformed one."""
        if isinstance(item, str):
            return expected_vector(item, task, dim)
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            return expected_vector(item["text"], task, dim)
        if isinstance(item, dict) and "image" in item:
            image = decode_data_url(item["image"])
            like = self.image_like.get(hashlib.sha256(image).hexdigest())
            return (
                expected_vector(like, QUERY_TASK, dim) if like is not None else expected_image_vector(image, task, dim)
            )
        raise ValueError(f"input item is neither a string, {{text}} nor {{image}}: {str(item)[:60]}")

    @property
    def base_url(self) -> str:
        return self.root

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)


def _handler(server: EmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            raw = self.read_body()
            body = json.loads(raw or b"{}")
            with server.lock:
                server.requests.append(Recorded(self.path, self.lower_headers(), body, time.monotonic(), len(raw)))
                fault = server.faults.popleft() if server.faults else None
                fail_images = server.fail_images
            if self.path.split("?")[0] != "/v1/embeddings":  # a query string (?api-key=) is allowed
                return self._reply(404, {"error": f"no route {self.path}"})
            if fault == "429":
                return self._reply(429, {"error": "rate limited"}, {"Retry-After": "1"})
            if fault == "500":
                return self._reply(500, {"error": "internal error"})
            if fault == "422":
                return self._reply(422, {"detail": "input refused"})
            if fault == "401-echo":
                return self._reply(401, {"error": f"bad key {self.headers.get('Authorization')}"})
            if fault == "slow":
                time.sleep(SLOW_SECONDS)
            dim = int(body.get("dimensions") or DEFAULT_DIM)
            task = body.get("task")
            if fail_images and any(isinstance(i, dict) and "image" in i for i in body["input"]):
                return self._reply(422, {"detail": "images cannot be processed right now"})
            try:
                vectors = [server.vector(item, task, dim) for item in body["input"]]
            except ValueError as exc:
                return self._reply(422, {"detail": str(exc)})
            data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            self._reply(200, {"object": "list", "model": body.get("model"), "data": data[::-1]})

        def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            try:
                self.send_json(status, payload, (headers or {}).items())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test); nothing to answer

    return Handler
