"""The Python API: open a built lake, search it, ask it; index a corpus without Dagster.

import kohaku_rag as kr
rag = kr.open("data_lake")                       # the built index, its own settings
rag.search("What was the PUE?", budget_chars=4000)   # snippets with node ids, pages, scores
rag.ask("What was the PUE?", config="default")       # answer, value, unit, refs, cited nodes
kr.index("path/to/docs", "data_lake")            # build or update the lake
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kohaku_rag.answering.answer import answer_question
from kohaku_rag.answering.config_folder import config_of
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answers.records import Question
from kohaku_rag.errors import BackendError
from kohaku_rag.indexing.index_config import IndexConfig, resolve_index_config
from kohaku_rag.indexing.pipeline import IndexSummary, Progress, index_corpus
from kohaku_rag.lake.layout import Lake
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

__all__ = ["AskResult", "Rag", "index", "open"]


@dataclass(frozen=True)
class AskResult:
    """One answer: the WattBot fields, the snippets that support it, and the full record."""

    question: str
    answer: str
    value: str
    unit: str
    refs: tuple[str, ...]
    explanation: str
    is_blank: bool
    cited: tuple[ContextItem, ...]  # node ids, pages and text of the supporting snippets
    prediction: Prediction  # attempts, tokens, seconds, the whole context

    @property
    def cells(self) -> list[str]:
        """A value read from a table: "Table 2 · text generation · mean" (table, row, column)."""
        return self.prediction.cited_cells()

    @classmethod
    def of(cls, question: str, pred: Prediction) -> AskResult:
        a = pred.answer
        return cls(
            question,
            a.answer,
            a.answer_value,
            a.answer_unit,
            a.ref_id,
            a.explanation,
            a.is_blank,
            tuple(pred.cited()),
            pred,
        )


class Rag:
    """A built lake, opened for questions. Models load on first use and stay loaded."""

    def __init__(self, lake: Lake, index_config: IndexConfig, models: ModelPool | None = None) -> None:
        self.lake = lake
        self.index_config = index_config
        self.models = models or ModelPool()

    def search(
        self,
        question: str,
        *,
        budget_chars: int | None = None,
        k: int | None = None,
        config: RetrievalConfig | None = None,
    ) -> list[ContextItem]:
        """The context an answerer would see: ranked snippets within `budget_chars`."""
        cfg = config or RetrievalConfig()
        if budget_chars is not None:
            cfg = dataclasses.replace(cfg, budget_chars=budget_chars)
        if k is not None:
            cfg = dataclasses.replace(cfg, top_k_final=k)
        return self.models.retriever(self.lake, self.index_config).search([question], cfg)

    def ask(
        self,
        question: str,
        *,
        config: str | Path | QAConfig | None = None,
        unit: str = "is_blank",
        seed: int = 0,
        progress: Callable[[str], None] | None = None,
    ) -> AskResult:
        """Plan, retrieve and answer one question with one run. `config` is a config name in
        the lake's configs folder, a config file, a QAConfig, or None for the defaults.
        `progress` hears each stage as it starts ("planning" when the planner runs, "retrieving",
        "answering")."""
        cfg = self.config(config)
        pred = answer_question(
            Question(id="ask", question=question, answer_unit=unit),
            self.models.retriever(self.lake, self.index_config),
            self.models.chat(cfg.generation.llm, self.lake),
            cfg,
            seed=seed,
            images=lambda h: self.lake.blob(h).read_bytes(),
            planner_chat=self.models.chat(cfg.planner_llm, self.lake) if cfg.retrieval.planner_model else None,
            progress=progress,
        )
        if pred.error:  # a failed LLM call is not an answer
            raise BackendError(pred.error)
        return AskResult.of(question, pred)

    def config(self, config: str | Path | QAConfig | None) -> QAConfig:
        """The QAConfig `ask` would use for `config` (a name, a file, a QAConfig or None)."""
        if config is None:
            return QAConfig()
        if isinstance(config, QAConfig):
            return config
        path = Path(config)
        if path.suffix in (".toml", ".json") and path.exists():
            return load_qa_config(path)
        return config_of(self.lake, str(config))


def open(lake: str | Path = "data_lake", *, index_config: IndexConfig | None = None) -> Rag:  # noqa: A001
    """Open a built lake with the index settings it records (a different `index_config`
    is refused: an index is searched with the embedder it was built with)."""
    where = Lake(Path(lake).resolve())
    if not where.vectors_path.exists():
        raise FileNotFoundError(
            f"no index in {where.root}: build one with kohaku_rag.index(corpus, lake) "
            f"or `kohaku index --lake {where.root}`"
        )
    return Rag(where, resolve_index_config(where, index_config, "index_config"))


def index(
    corpus: str | Path,
    lake: str | Path = "data_lake",
    *,
    index_config: IndexConfig | None = None,
    progress: Progress = print,
    retry_failed: bool = False,
    follow_links: bool = False,
) -> IndexSummary:
    """Build or update the lake from a corpus folder, recomputing only what changed
    (without Dagster; `kohaku index` does the same through Dagster runs). A document that
    failed is tried again when it changes, or with `retry_failed=True`."""
    return index_corpus(
        Path(corpus).resolve(),
        Lake(Path(lake).resolve()),
        index_config,
        progress=progress,
        retry_failed=retry_failed,
        follow_links=follow_links,
    )
