"""Figure captions as a per-document asset, between the tree and the embeddings.

Changing the captioner changes only this asset's version, so only captions and what
depends on them recompute; the tree (and its parse) is reused.
"""

import base64
import time

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from kohaku_assets.indexing import document_tree
from kohaku_assets.partitions import INDEXING_GROUP, documents
from kohaku_assets.settings import KohakuSettings
from kohaku_rag import indexing as ix

THUMBNAILS = 3


def _thumbnails(settings: KohakuSettings, hashes: list[str]) -> str:
    """A few figures inline in the UI, shrunk so the metadata stays small."""
    import io

    from PIL import Image

    parts = []
    for digest in hashes[:THUMBNAILS]:
        try:
            with Image.open(settings.lake.blob(digest)) as img:
                img.thumbnail((240, 240))
                buf = io.BytesIO()
                img.convert("RGB").save(buf, format="JPEG", quality=70)
        except (OSError, ValueError) as exc:  # an unreadable image is already reported with its caption
            parts.append(f"(figure {digest[:8]} unreadable: {exc})")
            continue
        parts.append(f"![figure {digest[:8]}](data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()})")
    return "\n\n".join(parts) or "(no figures)"


@asset(partitions_def=documents, group_name=INDEXING_GROUP, deps=[document_tree], code_version="1",
       description="Figure captions: PDF caption + OCR text (offline) or a vision model's description.")
def captions(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    doc_id, lake, cfg = context.partition_key, settings.lake, settings.index_config()
    nodes = ix.read_tree(lake, doc_id)
    version = ix.captions_version(ix.read_source(lake, doc_id)["content_hash"], cfg)
    captioner = settings.captioner()
    try:
        stats = ix.caption_figures(lake, doc_id, nodes, captioner, version)
    finally:
        if hasattr(captioner, "close"):
            captioner.close()  # the vision captioner's HTTP client
    for node_id, why in stats.errors.items():
        context.log.warning(f"{doc_id}: figure {node_id} kept its PDF caption only: {why}")
    hashes = [n.media_hash for n in nodes if n.media_hash]
    return MaterializeResult(
        metadata={
            "figures": stats.figures,
            "cache_hits": stats.cache_hits,
            "caption_chars": stats.caption_chars,
            "captioner_chars": stats.captioner_chars,
            "errors": MetadataValue.json(stats.errors),
            "captioner": captioner.captioner_id if captioner else "none",
            "seconds": round(time.perf_counter() - started, 3),
            "thumbnails": MetadataValue.md(_thumbnails(settings, hashes)) if hashes else "(no figures)",
        },
        data_version=DataVersion(version),
    )
