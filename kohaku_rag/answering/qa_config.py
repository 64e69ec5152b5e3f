"""A question-answering configuration as data, in three parts with their own hashes.

The parts nest: retrieval ⊂ generation ⊂ voting. `retrieval_hash` covers what decides the
context (the question file, the planner, the search settings); `generation_hash` adds what
decides an answer (the LLM, sampling, prompt order, retries); `voting_hash` adds how runs are
combined. A change to one part therefore reuses everything stored under the earlier hashes:
a new temperature reuses the retrieved contexts, a new vote mode reuses the predictions.

A config file (TOML or JSON) has top-level `questions` and `[retrieval]`, `[generation]`
(with an optional `[generation.llm]`) and `[voting]` tables; retrieval keys are the
`RetrievalConfig` keys plus `use_planner` and `planner_max_queries`. One file is one config,
named by its file stem.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kohaku_rag.config_files import CONFIG_SUFFIXES, from_mapping, read_config_data, stable_hash
from kohaku_rag.evaluation.vote import TIEBREAKS, VOTE_MODES
from kohaku_rag.lake import check_key
from kohaku_rag.llm import LLMSpec
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

QUOTE_EVIDENCE = ("off", "true_false", "all")
TRUE_FALSE_VERDICTS = ("probability", "reply")
# The answering prompt and reply schema (answer.py) as of this number: bump it when they
# change, so predictions stored under the old wording are not reused as if current.
ANSWER_FORMAT = 2


def default_questions() -> str:
    """KOHAKU_QUESTIONS, else the WattBot training set next to the repository."""
    env = os.environ.get("KOHAKU_QUESTIONS")
    if env:
        return env
    return str(Path(__file__).resolve().parents[2] / "shared" / "wattbot" / "train_QA.csv")


@dataclass(frozen=True)
class RetrievalPart:
    # The paper's planner: the LLM writes up to n search queries; the question is always one.
    use_planner: bool = True
    planner_max_queries: int = 3
    # ~4,000 characters (~1,000 tokens) of context leave room in the embedded model's 4K
    # window for the prompt, the reply, and one deepening retry (see answer.py).
    search: RetrievalConfig = field(default_factory=RetrievalConfig)

    def __post_init__(self) -> None:
        if self.planner_max_queries < 1:
            raise ValueError(f"planner_max_queries must be at least 1, got {self.planner_max_queries}")


@dataclass(frozen=True)
class GenerationPart:
    llm: LLMSpec = field(default_factory=LLMSpec)
    # Above 0 so ensemble runs (which differ only by seed) can disagree; low enough that a
    # single run stays close to greedy.
    temperature: float = 0.3
    max_tokens: int = 320
    use_reordered_prompt: bool = True  # context before the question (the paper's finding)
    # Head each snippet with its document title and section heading (from the tree).
    snippet_titles: bool = False
    # Send the images of the top img_k figure snippets with the prompt (a vision model over
    # an OpenAI-compatible endpoint; the bundled model reads text only).
    img_k: int = 0
    # On is_blank, ask again with k×2, k×3, ... context units (up to this many extra tries).
    max_retries: int = 2
    # The reply first copies one context sentence verbatim (the schema offers the context's
    # sentences): for "true_false" questions only, "all" questions, or "off".
    quote_evidence: str = "true_false"
    # Who decides a true/false statement: "probability" asks the model once more, for one
    # word, and calls the statement true only when log P(True) - log P(False) reaches
    # true_false_margin; "reply" keeps the reply's own 1/0. A 1.5B model's reply calls
    # almost every statement on the context's topic true; its probabilities still rank the
    # supported ones higher. The margin was chosen on train_QA's statements.
    true_false_verdict: str = "probability"
    true_false_margin: float = 1.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.img_k < 0:
            raise ValueError(f"img_k must be >= 0, got {self.img_k}")
        if self.img_k > 0 and self.llm.backend != "openai":
            raise ValueError(
                'img_k > 0 sends figures to a vision model: set [generation.llm] backend = "openai" '
                "with a vision-capable model; the bundled model reads text only"
            )
        if self.quote_evidence not in QUOTE_EVIDENCE:
            raise ValueError(f"quote_evidence {self.quote_evidence!r} is not one of {', '.join(QUOTE_EVIDENCE)}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature {self.temperature} is outside [0, 2]")
        if self.true_false_verdict not in TRUE_FALSE_VERDICTS:
            raise ValueError(
                f"true_false_verdict {self.true_false_verdict!r} is not one of {', '.join(TRUE_FALSE_VERDICTS)}"
            )


@dataclass(frozen=True)
class VotingPart:
    runs: int = 1
    mode: str = "answer_priority"
    ignore_blank: bool = True
    tiebreak: str = "first"

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs must be at least 1, got {self.runs}")
        if self.mode not in VOTE_MODES:
            raise ValueError(f"vote mode {self.mode!r} is not one of {', '.join(VOTE_MODES)}")
        if self.tiebreak not in TIEBREAKS:
            raise ValueError(f"tiebreak {self.tiebreak!r} is not one of {', '.join(TIEBREAKS)}")


@dataclass(frozen=True)
class QAConfig:
    questions: str = field(default_factory=default_questions)
    retrieval: RetrievalPart = field(default_factory=RetrievalPart)
    generation: GenerationPart = field(default_factory=GenerationPart)
    voting: VotingPart = field(default_factory=VotingPart)

    @property
    def retrieval_hash(self) -> str:
        payload: dict[str, Any] = {"questions": self.questions, "retrieval": dataclasses.asdict(self.retrieval)}
        if self.retrieval.use_planner:
            # The planner's queries depend on which model writes them, not on how it is reached.
            llm = self.generation.llm
            payload["planner_llm"] = [llm.backend, llm.model, llm.base_url, llm.n_ctx]
        return stable_hash(payload)

    @property
    def generation_hash(self) -> str:
        gen = dataclasses.asdict(self.generation)
        # Concurrency, timeouts and retries change throughput, never a reply.
        for key in ("max_concurrent", "n_threads", "timeout", "max_retries"):
            gen["llm"].pop(key, None)
        return stable_hash({"retrieval": self.retrieval_hash, "generation": gen, "format": ANSWER_FORMAT})

    @property
    def voting_hash(self) -> str:
        return stable_hash({"generation": self.generation_hash, "voting": dataclasses.asdict(self.voting)})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# KohakuRAG's own names for two retrieval keys.
RETRIEVAL_ALIASES = {"rerank_strategy": "rerank", "retrieval_threshold": "threshold"}


def qa_config_from_mapping(data: dict[str, Any], base_dir: Path | None = None) -> QAConfig:
    """Build a QAConfig from parsed TOML/JSON, refusing unknown keys by name.

    A relative `questions` path is taken relative to `base_dir` (the config file's folder).
    """
    data = dict(data)
    unknown = sorted(set(data) - {"questions", "retrieval", "generation", "voting"})
    if unknown:
        raise ValueError(f"unknown QAConfig keys {unknown}; known: questions, retrieval, generation, voting")
    retrieval = dict(data.get("retrieval") or {})
    for alias, key in RETRIEVAL_ALIASES.items():  # the paper's key names are accepted too
        if alias in retrieval:
            if key in retrieval:
                raise ValueError(f"retrieval: give {key} or its alias {alias}, not both")
            retrieval[key] = retrieval.pop(alias)
    planner = {k: retrieval.pop(k) for k in ("use_planner", "planner_max_queries") if k in retrieval}
    if "dense_kinds" in retrieval:
        retrieval["dense_kinds"] = tuple(retrieval["dense_kinds"])
    generation = dict(data.get("generation") or {})
    llm = from_mapping(LLMSpec, dict(generation.pop("llm", None) or {}))
    questions = str(data.get("questions") or default_questions())
    if base_dir is not None and not Path(questions).is_absolute():
        questions = str((base_dir / questions).resolve())
    return QAConfig(
        questions=questions,
        retrieval=RetrievalPart(search=from_mapping(RetrievalConfig, retrieval), **planner),
        generation=from_mapping(GenerationPart, {**generation, "llm": llm}),
        voting=from_mapping(VotingPart, dict(data.get("voting") or {})),
    )


def load_qa_config(path: Path) -> QAConfig:
    """One config file; errors name the file."""
    path = Path(path)
    if path.suffix not in CONFIG_SUFFIXES:
        raise ValueError(f"config file {path}: use a .toml or .json file")
    check_key(path.stem)
    data = read_config_data(path)
    try:
        return qa_config_from_mapping(data, path.parent)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc


def config_to_mapping(cfg: QAConfig) -> dict[str, Any]:
    """The file form of `cfg` (retrieval keys flat), which `qa_config_from_mapping` reads back."""
    data = cfg.as_dict()
    retrieval = {**{k: v for k, v in data["retrieval"].items() if k != "search"}, **data["retrieval"]["search"]}
    return {
        "questions": cfg.questions,
        "retrieval": retrieval,
        "generation": data["generation"],
        "voting": data["voting"],
    }


def dump_json(cfg: QAConfig) -> str:
    """A JSON config file holding `cfg` exactly (JSON, unlike TOML, can say null)."""
    return json.dumps(config_to_mapping(cfg), indent=2, sort_keys=True) + "\n"


def dump_toml(cfg: QAConfig) -> str:
    """A TOML config file holding `cfg` (every key written, so the file documents the defaults).
    TOML has no null: a None setting is left out and reads back as its default."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(str(v))

    def table(name: str, items: dict[str, Any]) -> list[str]:
        lines = [f"[{name}]"]
        lines += [f"{k} = {value(v)}" for k, v in items.items() if v is not None and not isinstance(v, dict)]
        return lines + [""]

    data = config_to_mapping(cfg)
    retrieval = data["retrieval"]
    generation = {k: v for k, v in data["generation"].items() if k != "llm"}
    lines = [f"questions = {value(cfg.questions)}", ""]
    lines += table("retrieval", retrieval) + table("generation", generation)
    lines += table("generation.llm", data["generation"]["llm"]) + table("voting", data["voting"])
    return "\n".join(lines)
