"""KohakuRAG's hierarchical RAG as a plain library (no Dagster import).

The folders follow the method's stages: `parse/` (PDF, JSON, Markdown → sections, tables),
`indexing/` (the per-document steps, captions, embeddings, table repairs, assembly), `embed/`,
`stores/` (sqlite-vec, BM25), `retrieval/` (search and the context items), `llm/` (chat
models), `answers/` (questions, answers, values, votes), `answering/` (from a question to a
prediction: prompt, run, computed and table-cell answers, citations, configs, stored runs),
`evaluation/` (metrics, scores, leaderboard), `experiments/` (sweeps, costs), `serving/`
(`kohaku serve`) and `samples/` (the demo corpus). Under them all: `document/` (the tree and
a table's record) and `lake/` (the lake on disk: layout, tables, the index manifest, locks,
atomic writes). At the root: `api` (the three-line entry point re-exported here), `doctor`,
`model_pool`, `errors` and the small shared helpers. docs/explanation/architecture.md is the
map."""

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
