"""Opening the built index for retrieval, shared by the CLI, the benchmark and answering."""

from __future__ import annotations

from kohaku_rag.config import IndexConfig
from kohaku_rag.embed import make_embedder
from kohaku_rag.embed.base import Embedder
from kohaku_rag.index.bm25 import BM25Index
from kohaku_rag.index.vectors import VectorStore
from kohaku_rag.lake import Lake
from kohaku_rag.retrieve import Retriever


def open_retriever(lake: Lake, cfg: IndexConfig) -> Retriever:
    if not lake.vectors_path.exists():
        raise FileNotFoundError(f"no index in {lake.root}: run `kohaku index --lake {lake.root}` first")
    embedder = make_embedder(cfg.embedder, lake.cache_dir / "embeddings")
    store = open_vector_store(lake, embedder)
    bm25 = BM25Index.load(lake.bm25_path) if lake.bm25_path.exists() else None
    return Retriever(embedder, store, bm25)


def open_vector_store(lake: Lake, embedder: Embedder) -> VectorStore:
    """The lake's vector store, checked against the embedder that queries it."""
    return VectorStore(lake.vectors_path, embedder.dim, model_id=embedder.model_id)
