"""A question-answering configuration as data, in three parts with their own hashes.

The parts nest: retrieval ⊂ generation ⊂ voting. `retrieval_hash` covers what decides the
context (the question file, the planner, the search settings); `generation_hash` adds what
decides an answer (the LLM, sampling, prompt order, retries); `voting_hash` adds how runs are
combined. A change to one part therefore reuses everything stored under the earlier hashes:
a new temperature reuses the retrieved contexts, a new vote mode reuses the predictions.

Reading and writing config files is `qa_config_file.py`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from kohaku_rag.answering.planner import PLAN_FORMAT
from kohaku_rag.answers.vote import TIEBREAKS, VOTE_MODES, Tiebreak, VoteMode
from kohaku_rag.config_files import (
    ConfigKeyError,
    Range,
    stable_hash,
)
from kohaku_rag.http_retry import redact_urls
from kohaku_rag.llm import LLMSpec
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

# The metrics a config may score with (`[scoring] metric`); the scorers are evaluation/metrics.py.
Metric = Literal["wattbot2025", "wattbot2026"]
METRICS: tuple[str, ...] = get_args(Metric)
DEFAULT_METRIC: Metric = "wattbot2025"


def check_metric(name: str) -> Metric:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}")
    return name  # type: ignore[return-value]


QUOTE_EVIDENCE = ("off", "true_false", "all")
TRUE_FALSE_VERDICTS = ("probability", "reply")
CITES = ("reply", "source")
COMPUTES = ("off", "expression", "asked")
ABSTAINS = ("off", "unfounded", "unsupported")
CHOOSES = ("off", "candidates")
# The answering prompt and reply schema (answer.py) as of this number: bump it when they
# change, so predictions stored under the old wording are not reused as if current (4: a
# bare number pair answering a range question is read as the range; 5: a reply field that
# copies its rule's words is read as empty, a copied value as an abstention; "$800M" read
# as 800000000; 6: a value not of the asked form is an abstention with its reason,
# scientific notation "(3.3,10^18)" is read).
ANSWER_FORMAT = 6
# The question-type detector and routes (question_types.py) and the stage prompt rules
# (stages.py) as of this number; hashed only by a config that routes or answers in two stages.
STAGE_FORMAT = 1
# The diverse rerank's prompts (diverse_rerank.py) as of this number; hashed only when on.
DIVERSE_FORMAT = 1
# Bump when a stored context item changes shape: 2, a table item carries its record, which
# retrievals stored before it lack (they are recomputed, not read without their tables).
CONTEXT_FORMAT = 2
ROUTINGS = ("off", "question_type")
TEMPERATURE = Range(0.0, 2.0)
UNITS = Range(1, 4096)  # context units in a prompt (the retrieval's MAX_HITS)


# The sample corpus's own labelled questions, shipped as package data (kohaku_rag/samples/):
# a new lake's `default.toml` must name a file every install has, not a folder beside a clone.
SAMPLE_QUESTIONS = Path(__file__).resolve().parents[1] / "samples" / "sample_QA.csv"


def default_questions() -> str:
    """KOHAKU_QUESTIONS, else the sample corpus's labelled questions shipped with the package."""
    env = os.environ.get("KOHAKU_QUESTIONS")
    if env:
        return env
    return str(SAMPLE_QUESTIONS)


@dataclass(frozen=True)
class RetrievalPart:
    # The paper's planner: the LLM writes up to n search queries; the question is always one.
    # Off by default since 2026-11-26: its call is ~2.3 s of a 14 s answer on 2 cores; on
    # WattBot train the bundled 1.5B model's queries (weighted 0.25) found no more evidence than
    # the question alone, and train + dev answers score no lower without it
    # (bench/answering/time_to_answer.py, docs/explanation/time-to-answer.md).
    use_planner: bool = False
    planner_max_queries: Annotated[int, Range(1, 20)] = 3
    # Issue 25: the planner writes one query per model, paper or source a question compares
    # or combines (planner.SPLIT_RULE); pair with `query_share` so each keeps its evidence.
    planner_split_entities: bool = False
    # Issue 34: "rules" adds one query per entity a question compares or combines, split from
    # its own words without the LLM (entity_split.py; "which of A and B", "X than Y", "between
    # A and B", two "et al." names); pair with the search's `query_share`. "off": none.
    entity_queries: Literal["off", "rules"] = "off"
    # The planner's own LLM (KohakuRAG's planner_model); None: the answering LLM.
    planner_model: LLMSpec | None = None
    # ~3,000 characters (~750 tokens) of context leave room in the embedded model's 4K
    # window for the prompt, the reply, and one deepening retry (see answer.py).
    search: RetrievalConfig = field(default_factory=RetrievalConfig)
    # HERO's text-only vs hybrid routing: "question_type" searches text nodes only for term
    # and general questions and text + table/figure nodes for the others (question_types.py),
    # overriding `content` per question; "off" uses `content` for every question.
    content_routing: Literal["off", "question_type"] = "off"
    # Marikarp's knowledge-aware diverse rerank (diverse_rerank.py): the planner's LLM reads
    # the reranker's top `diverse_n_know` candidates (each cut to `diverse_passage_chars`),
    # names two complementary sets of knowledge the question needs, and the context
    # interleaves the reranker's two rankings of the top `diverse_candidates` units for them.
    diverse_rerank: bool = False
    # Who ranks: "bm25" (the index's BM25 weights) or "embedding" (the index's embedder),
    # both offline. On WattBot train with MiniLM, ranking the candidates by the question
    # alone keeps evidence recall @4K at 0.806 with bm25, 0.613 with embedding (0.839 before).
    # "cross_encoder": the `[retrieval.reranker]` spec (a hosted /rerank endpoint, the LLM).
    diverse_reranker: Literal["bm25", "embedding", "cross_encoder"] = "bm25"
    diverse_candidates: Annotated[int, Range(1, 1000)] = 30
    diverse_n_know: Annotated[int, Range(1, 100)] = 5
    diverse_passage_chars: Annotated[int, Range(100, 100_000)] = 1000

    def __post_init__(self) -> None:
        if self.planner_max_queries < 1:
            raise ValueError(f"planner_max_queries must be at least 1, got {self.planner_max_queries}")
        if self.entity_queries not in ("off", "rules"):
            raise ValueError(f'entity_queries {self.entity_queries!r} is not "off" or "rules"')
        if self.content_routing not in ROUTINGS:
            raise ValueError(f"content_routing {self.content_routing!r} is not one of {', '.join(ROUTINGS)}")
        for name in ("diverse_candidates", "diverse_n_know"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.diverse_passage_chars < 100:
            raise ValueError(f"diverse_passage_chars must be at least 100, got {self.diverse_passage_chars}")

    @property
    def uses_llm(self) -> bool:
        """Whether retrieving needs the planner's LLM (the planner or the diverse rerank)."""
        return self.use_planner or self.diverse_rerank


@dataclass(frozen=True)
class GenerationPart:
    llm: LLMSpec = field(default_factory=LLMSpec)
    # Above 0 so ensemble runs (which differ only by seed) can disagree; low enough that a
    # single run stays close to greedy.
    temperature: Annotated[float, TEMPERATURE] = 0.3
    max_tokens: Annotated[int, Range(1, 131_072)] = 320
    use_reordered_prompt: bool = True  # context before the question (the paper's finding)
    # Head each snippet with its document title and section heading (from the tree).
    snippet_titles: bool = False
    # Send the images of the top img_k figure snippets with the prompt (a vision model over
    # an OpenAI-compatible endpoint; the bundled model reads text only).
    img_k: Annotated[int, Range(0, 64)] = 0
    # On is_blank, ask again with k×2, k×3, ... context units (up to this many extra tries;
    # KohakuRAG's retry). Off by default: with the bundled 1.5B model a first abstention was
    # right 8 times in 9 (train + dev, four configs), and each retry turned it into a wrong
    # value; none found an answer the first attempt missed (docs/benchmarks/settings.md,
    # "The is_blank retry"). A larger model, or HERO's two_stage, may want it back.
    max_retries: Annotated[int, Range(0, 20)] = 0
    # The reply first copies one context sentence verbatim (the schema offers the context's
    # sentences): for "true_false" questions only, "all" questions, or "off".
    quote_evidence: Literal["off", "true_false", "all"] = "true_false"
    # Who decides a true/false statement: "probability" asks the model once more, for one
    # word, and calls the statement true only when log P(True) - log P(False) reaches
    # true_false_margin; "reply" keeps the reply's own 1/0. A 1.5B model's reply calls
    # almost every statement on the context's topic true; its probabilities still rank the
    # supported ones higher. The margin was chosen on train_QA's statements.
    true_false_verdict: Literal["probability", "reply"] = "probability"
    true_false_margin: Annotated[float, Range(-100.0, 100.0)] = 1.5
    # Each reply's confidence from the model's token probabilities (the mean probability of
    # its tokens, Answer.confidence), which the vote's highest_confidence tiebreak reads.
    reply_confidence: bool = False
    # HERO's question-type routing of the prompt: "question_type" adds the detected type's
    # instruction and cuts the context to the type's units (question_types.py, stages.py).
    prompt_routing: Literal["off", "question_type"] = "off"
    # HERO's two-stage generation: the first attempt is strict (stage1_k units, or the
    # type's; stage1_temperature; "is_blank if the evidence is not enough"), the retries
    # after an abstention relaxed (stage2_k units, or the type's, from the deeper search;
    # an answer inferred from partial evidence is allowed). Needs max_retries >= 1.
    two_stage: bool = False
    stage1_temperature: Annotated[float, TEMPERATURE] = 0.1
    stage1_k: Annotated[int, UNITS] = 3
    stage2_k: Annotated[int, UNITS] = 10
    # Which documents an answer cites: "reply", every document the reply lists; "source",
    # one: the first listed whose snippets state the answer's value or hold its quoted
    # evidence sentence, else the first listed. WattBot's gold names one document for 37 of
    # its 39 answerable train questions, and the bundled 1.5B model often lists 2-3 where one
    # states the answer (1 run on train: reference score 0.776 -> 0.866, final 0.632 ->
    # 0.646; bench/answering/answer_settings.py).
    cite: Literal["reply", "source"] = "source"
    # Computed answers (compute.py): for a question with a unit, "expression" has the reply
    # quote its operands (value, unit, ref_id) and write the arithmetic over them; every
    # operand is checked against the context, put in the question's unit, and the
    # expression evaluated by an AST whitelist; the result replaces the reply's value and the
    # answer cites every operand's document. "asked": the same, only for a question whose
    # wording asks for a computation (a ratio, factor, difference, percentage change, total
    # or what-if: answers/answer_forms.py). "off": the reply's own number.
    compute: Literal["off", "expression", "asked"] = "off"
    # Abstention: "unfounded" turns an answer whose operands are not stated in the context
    # (compute = "expression") into a blank, after the deepest retry too; "unsupported" asks
    # the model once more, for one word, whether the context states the answer, and blanks
    # it when log P(Yes) - log P(No) is below abstain_margin (support_check.py); "off" keeps it.
    abstain: Literal["off", "unfounded", "unsupported"] = "off"
    abstain_margin: Annotated[float, Range(-100.0, 100.0)] = 0.0
    # A value not of the form the question asks (a number in its unit, true/false, a name the
    # passages use: answers/value_form.py) is never an answer: "abstain" makes it an
    # abstention that says why; "off" keeps whatever the reply wrote.
    value_form: Literal["off", "abstain"] = "abstain"
    # Choose, don't generate (choose.py): for a question with a unit, "candidates" makes
    # answer_value a choice among the values the context's marked sentences state in that
    # unit (converted to it), "other", and with compute "computed"; "off": a free string.
    choose: Literal["off", "candidates"] = "off"
    # Answers over a table (table_query.py): "sql" has the model write one DuckDB SELECT over
    # a context table kept as a record, for a question whose wording counts, compares or takes
    # an extreme; a single value it returns replaces the reply's and cites the table. The
    # query sees that table alone (no files, no extensions, 2 s, 50 rows). "off": the reply's.
    table_query: Literal["off", "sql"] = "off"
    # Answers read from table cells (table_cells.py): "named" offers the reply, when the
    # context holds a table kept as a record, up to two cells named by row and column (the
    # tables' own names) and how the answer follows from them; the code reads the cells,
    # converts the column's unit to the question's and computes. "required": the reply must
    # name one (the bundled model left the list empty whenever it could). "off": the reply's number.
    # Off by default: with the bundled 1.5B model on 48 train + dev questions (2026-11-28),
    # "named" 0.585 -> 0.598 (it named no cell) and "required" -> 0.576 (it named neighbours).
    table_cells: Literal["off", "named", "required"] = "off"
    # The reply's field order (prompt.answer_schema): "explain_first" writes a quoting
    # explanation (up to 120 characters) before the answer; "value_first" writes the value and
    # its references first, then the answer words and a one-sentence explanation (up to 60):
    # the reader sees the value sooner and the reply has fewer tokens (bench/answering/reply_fields.py).
    reply_order: Literal["explain_first", "value_first"] = "explain_first"
    # The reply's field rules that no question changes (explanation, answer, ref_id) in the
    # system prompt instead of after the context: every answering prompt then opens with the
    # same ~100 tokens, evaluated once per machine (llm/prefix_states.py) instead of once per
    # question. The question, its unit and value rule still follow the context.
    rules_in_system: bool = False

    def __post_init__(self) -> None:
        if self.table_cells not in ("off", "named", "required"):
            raise ValueError(f"table_cells {self.table_cells!r} is not one of off, named, required")
        if self.table_query not in ("off", "sql"):
            raise ValueError(f"table_query {self.table_query!r} is not one of off, sql")
        if self.reply_order not in ("explain_first", "value_first"):
            raise ValueError(f"reply_order {self.reply_order!r} is not one of explain_first, value_first")
        if self.compute not in COMPUTES:
            raise ValueError(f"compute {self.compute!r} is not one of {', '.join(COMPUTES)}")
        if self.abstain not in ABSTAINS:
            raise ValueError(f"abstain {self.abstain!r} is not one of {', '.join(ABSTAINS)}")
        if self.choose not in CHOOSES:
            raise ValueError(f"choose {self.choose!r} is not one of {', '.join(CHOOSES)}")
        if self.abstain == "unfounded" and self.compute == "off":
            raise ValueError('abstain = "unfounded" judges the operands: it needs compute = "expression" or "asked"')
        if self.cite not in CITES:
            raise ValueError(f"cite {self.cite!r} is not one of {', '.join(CITES)}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.prompt_routing not in ROUTINGS:
            raise ValueError(f"prompt_routing {self.prompt_routing!r} is not one of {', '.join(ROUTINGS)}")
        if self.two_stage and self.max_retries < 1:
            raise ValueError(
                "two_stage needs max_retries >= 1 (e.g. max_retries = 2 in [generation]): stage 2 is "
                "the retry after stage 1 abstains"
            )
        for name in ("stage1_k", "stage2_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.stage1_temperature <= 2.0:
            raise ValueError(f"stage1_temperature {self.stage1_temperature} is outside [0, 2]")
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
    # Each run asks every question once more: 100 runs of 300 questions is 30,000 LLM calls.
    runs: Annotated[int, Range(1, 100)] = 1
    mode: VoteMode = "answer_priority"
    ignore_blank: bool = True
    tiebreak: Tiebreak = "first"

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs must be at least 1, got {self.runs}")
        if self.mode not in VOTE_MODES:
            raise ValueError(f"vote mode {self.mode!r} is not one of {', '.join(VOTE_MODES)}")
        if self.tiebreak not in TIEBREAKS:
            raise ValueError(f"tiebreak {self.tiebreak!r} is not one of {', '.join(TIEBREAKS)}")


@dataclass(frozen=True)
class ScoringPart:
    # Which WattBot metric scores the answers (evaluation/metrics.py): "wattbot2025" or
    # "wattbot2026". Scoring only: it is in no hash, so switching it re-scores stored answers.
    metric: Metric = DEFAULT_METRIC

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric {self.metric!r} is not one of {', '.join(METRICS)}")


@dataclass(frozen=True)
class QAConfig:
    questions: str = field(default_factory=default_questions)
    retrieval: RetrievalPart = field(default_factory=RetrievalPart)
    generation: GenerationPart = field(default_factory=GenerationPart)
    voting: VotingPart = field(default_factory=VotingPart)
    scoring: ScoringPart = field(default_factory=ScoringPart)

    def __post_init__(self) -> None:
        if self.voting.tiebreak == "highest_confidence" and not self.generation.reply_confidence:
            raise ConfigKeyError(
                "voting.tiebreak",
                '"highest_confidence" needs a confidence per run: set [generation] reply_confidence = true '
                "(the mean token probability of each reply)",
            )

    @property
    def retrieval_hash(self) -> str:
        # Hashed without the credentials written into URLs (as stored): a new key for the same
        # endpoint reuses what the old one computed, and no hash is made from a secret.
        cfg = redact_urls(self)
        retrieval = hashed_fields(cfg.retrieval)
        retrieval["search"] = hashed_fields(cfg.retrieval.search)
        payload: dict[str, Any] = {"questions": cfg.questions, "retrieval": retrieval, "context_format": CONTEXT_FORMAT}
        if cfg.retrieval.uses_llm:
            # The planner's queries depend on which model writes them, not on how it is reached.
            llm = cfg.planner_llm
            payload["planner_llm"] = [llm.backend, llm.model, llm.base_url, llm.n_ctx]
        if cfg.retrieval.use_planner:
            payload["plan_format"] = PLAN_FORMAT
        if cfg.retrieval.diverse_rerank:
            payload["diverse_format"] = DIVERSE_FORMAT
        if cfg.retrieval.content_routing != "off":
            payload["stage_format"] = STAGE_FORMAT
        payload["retrieval"].pop("planner_model", None)
        reranker = payload["retrieval"]["search"].get("reranker")
        for key in ("max_concurrent", "timeout", "max_retries", "batch_size", "api_key_env"):
            (reranker or {}).pop(key, None)  # how the reranker is reached, not what it scores
        return stable_hash(payload)

    @property
    def planner_llm(self) -> LLMSpec:
        """The LLM that writes the search queries."""
        return self.retrieval.planner_model or self.generation.llm

    @property
    def generation_hash(self) -> str:
        gen = hashed_fields(redact_urls(self.generation))  # as retrieval_hash: no credential
        # Concurrency, timeouts and retries change throughput, never a reply.
        for key in ("max_concurrent", "n_threads", "timeout", "max_retries"):
            gen["llm"].pop(key, None)
        payload = {"retrieval": self.retrieval_hash, "generation": gen, "format": ANSWER_FORMAT}
        if self.generation.prompt_routing != "off" or self.generation.two_stage:
            payload["stage_format"] = STAGE_FORMAT
        return stable_hash(payload)

    @property
    def voting_hash(self) -> str:
        return stable_hash({"generation": self.generation_hash, "voting": dataclasses.asdict(self.voting)})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def stored_dict(self) -> dict[str, Any]:
        """`as_dict` with the credentials in URLs redacted: what a table or a report may hold."""
        return dataclasses.asdict(redact_urls(self))


# Keys added after configs and their stored tables existed, per config part, each with the
# value that reproduces the behaviour from before it existed. A key at that value is left
# out of the hash, so a config that does not use it keeps its hashes (and the retrievals and
# predictions stored under them). A key whose default is not its legacy value (a better
# default found later) changes the default config's hash, so what the old default stored is
# recomputed rather than passed off as the new default's.
def _defaults(part: type, *keys: str) -> dict[str, Any]:
    """The keys' defaults: the legacy value of a key added with today's behaviour as default."""
    fields = {f.name: f for f in dataclasses.fields(part)}
    out: dict[str, Any] = {}
    for key in keys:
        f = fields[key]
        out[key] = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[operator]
    return out


ADDED_KEYS: dict[type, dict[str, Any]] = {
    RetrievalPart: _defaults(
        RetrievalPart,
        "content_routing",
        "diverse_rerank",
        "diverse_reranker",
        "diverse_candidates",
        "diverse_n_know",
        "diverse_passage_chars",
        "planner_split_entities",
        "entity_queries",
    ),
    RetrievalConfig: _defaults(
        RetrievalConfig,
        "content",
        "fusion",
        "type_weight_text",
        "type_weight_table",
        "type_weight_figure",
        "metadata_boost",
        "metadata_fields",
        "query_expansion",
        "reranker",
        "rerank_top_n",
        "rerank_passage_chars",
        "pack",
        "window_sentences",
        "window_neighbours",
        "window_min_chars",
        "field_weight",
        "passage_weight",
        "passage_tokens",
        "passage_overlap",
        "rm3_terms",
        "rm3_docs",
        "rm3_query_weight",
        "query_share",
        "figure_search",
        "top_k_images",
        "table_chars",
    ),
    GenerationPart: {
        **_defaults(
            GenerationPart,
            "prompt_routing",
            "two_stage",
            "stage1_temperature",
            "stage1_k",
            "stage2_k",
            "compute",
            "abstain",
            "abstain_margin",
            "choose",
            "table_query",
            "table_cells",
            "reply_order",
            "rules_in_system",
        ),
        # Added with a new default: before it, every document a reply listed was cited.
        "cite": "reply",
    },
}


def hashed_fields(part: Any) -> dict[str, Any]:
    """A config part as hashed: its fields, less the added keys at their legacy value."""
    data = dataclasses.asdict(part)
    for key, legacy in ADDED_KEYS.get(type(part), {}).items():
        if key in data and getattr(part, key) == legacy:
            del data[key]
    return data
