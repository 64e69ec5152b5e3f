"""KohakuRAG's hierarchical RAG as a plain library (no Dagster import).

The folders follow the method's stages: `parse/` (PDF, JSON, Markdown → section tree),
`indexing/` (corpus, captions, embeddings, propagation, assembly), `embed/`, `stores/`
(sqlite-vec and BM25), `retrieval/`, `llm/`, `answering/` (planner, prompt and answer,
configs, stored runs, ensembles, leaderboard) and `evaluation/` (records, WattBot CSV,
normalisation, score, vote). `api` is the three-line entry point re-exported here.
"""

from kohaku_rag.api import AskResult, Rag, index, open
from kohaku_rag.errors import BackendError, DocumentError, KohakuError
from kohaku_rag.indexing.index_config import IndexConfig, IndexConfigConflict
from kohaku_rag.indexing.pipeline import IndexSummary
from kohaku_rag.retrieval.context import ContextItem

__all__ = [
    "AskResult",
    "BackendError",
    "ContextItem",
    "DocumentError",
    "IndexConfig",
    "IndexConfigConflict",
    "IndexSummary",
    "KohakuError",
    "Rag",
    "index",
    "open",
]
