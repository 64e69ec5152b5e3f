"""Figure vectors from the figures' own images, when the embedder can embed images (Jina v4).

A figure paragraph is searched by its vector like any paragraph. With a text-only embedder
that vector comes from its caption (the PDF caption plus what OCR or a vision model read).
With a multimodal one (`IndexConfig.figure_vectors`):

* "image" (the default): the figure's vector is its image's vector, in the same space as
  the questions, so a question reaches a chart whose caption shares none of its words;
* "image+caption": the mean of the image vector and the caption's text vector, the image
  counted at the caption's length (the length-weighted mean `propagate` takes), so the
  caption's words still count and the figure's weight in its section is unchanged;
* "caption": today's caption vectors, the images are never sent.

Page renderings (the `page_images` index option, parse.pdf_pages) are embedded the same
way, whatever the mode: an image vector is all they have.

The caption's sentences keep their text vectors either way, and the section above the
figure is propagated from the pinned figure vector as from any paragraph.

Image vectors are cached by image hash, model and width (embed/cache.py): a re-indexed
document sends only its new or changed figures. A figure whose image cannot be read or
embedded keeps its caption vector and is reported; its document is then stored as
incomplete, so the next index run asks again (as for a failed caption).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from kohaku_rag.document.tree import Attachment, Node, NodeKind
from kohaku_rag.embed.base import Embedder, ImageEmbedder, image_embedder
from kohaku_rag.errors import KohakuError
from kohaku_rag.indexing.propagate import combine

FigureMode = Literal["image", "image+caption", "caption"]
FIGURE_MODES: tuple[FigureMode, ...] = ("image", "image+caption", "caption")
# Images per `embed_images` call: a failed request loses at most this many, and those
# before it are already in the cache.
IMAGE_CHUNK = 16

ReadImage = Callable[[str], bytes]  # media hash -> image bytes (OSError if unreadable)


@dataclass(frozen=True)
class FigureVectors:
    vectors: dict[str, np.ndarray]  # figure (or page) paragraph id -> its vector (pinned in propagation)
    errors: dict[str, str]  # figure paragraph id -> why it keeps its caption vector
    figures: int  # figures with an image that were to be embedded


def figure_nodes(nodes: Sequence[Node], mode: FigureMode = "image") -> list[Node]:
    """The paragraphs to give image vectors: figures with an image in the lake (unless
    `mode` is "caption") and page renderings (the `page_images` option: always, they have
    no other vector)."""
    kinds = {Attachment.PAGE} | ({Attachment.IMAGE} if mode != "caption" else set())
    return [n for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment in kinds and n.media_hash]


def embed_in_chunks(
    embedder: ImageEmbedder, images: Sequence[bytes], chunk: int = IMAGE_CHUNK
) -> list[np.ndarray | Exception]:
    """One vector per image, or the error of the request that held it: a failed chunk
    fails alone and the others are embedded (and cached)."""
    out: list[np.ndarray | Exception] = []
    for start in range(0, len(images), chunk):
        part = list(images[start : start + chunk])
        try:
            out.extend(embedder.embed_images(part))
        except (KohakuError, ValueError) as exc:
            out.extend([exc] * len(part))
    return out


def caption_vector(node: Node, nodes: Sequence[Node], text_vectors: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The figure's text vector: its own (paragraph text embedded) or its sentences' mean."""
    if node.node_id in text_vectors:
        return text_vectors[node.node_id]
    sentences = [n for n in nodes if n.parent_id == node.node_id and n.node_id in text_vectors]
    if not sentences:
        return None
    return combine([text_vectors[s.node_id] for s in sentences], [max(s.length, 1) for s in sentences])


def figure_vectors(
    nodes: Sequence[Node],
    embedder: Embedder,
    read_image: ReadImage,
    mode: FigureMode,
    text_vectors: Mapping[str, np.ndarray],
) -> FigureVectors:
    """The vectors to pin on the document's figure paragraphs (none for a text-only
    embedder or mode "caption"). `text_vectors`: the document's leaf vectors by node id."""
    images_embedder = image_embedder(embedder)
    figures = figure_nodes(nodes, mode)
    if images_embedder is None or not figures:
        return FigureVectors({}, {}, 0)
    errors: dict[str, str] = {}
    readable: list[tuple[Node, bytes]] = []
    for node in figures:
        try:
            readable.append((node, read_image(node.media_hash or "")))
        except OSError as exc:  # a lake blob deleted by hand: this figure fails alone
            errors[node.node_id] = f"image unreadable ({type(exc).__name__}: {exc})"
    results = embed_in_chunks(images_embedder, [image for _, image in readable])
    vectors: dict[str, np.ndarray] = {}
    for (node, _), result in zip(readable, results, strict=True):
        if isinstance(result, Exception):
            errors[node.node_id] = f"{type(result).__name__}: {result}"
            continue
        image = np.asarray(result, dtype=np.float32)
        caption = caption_vector(node, nodes, text_vectors) if mode == "image+caption" else None
        weight = max(node.length, 1)
        vectors[node.node_id] = image if caption is None else combine([image, caption], [weight, weight])
    return FigureVectors(vectors, errors, len(figures))
