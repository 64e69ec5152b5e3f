"""A QA config file: read (TOML or JSON, KohakuRAG's key names accepted) into a checked
`QAConfig`, and written back as TOML or JSON.

A config file has top-level `questions` and `[retrieval]`, `[generation]` (with an optional
`[generation.llm]`), `[voting]` and `[scoring]` tables; retrieval keys are the
`RetrievalConfig` keys plus the `RetrievalPart` keys (`use_planner`, `planner_max_queries`,
the content routing and the diverse rerank). One file is one config, named by its file stem.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from kohaku_rag.answering.qa_config import (
    GenerationPart,
    QAConfig,
    RetrievalPart,
    ScoringPart,
    VotingPart,
    default_questions,
)
from kohaku_rag.answers.question_files import question_file_problem
from kohaku_rag.config_files import (
    CONFIG_SUFFIXES,
    ConfigKeyError,
    from_mapping,
    locate,
    named_files,
    read_config_data,
)
from kohaku_rag.lake.tables import check_key
from kohaku_rag.llm import LLMSpec
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

# A question set by name (`questions = "feedback"`): no folder, no suffix.
_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def questions_path(base_dir: Path, questions: str) -> Path:
    """A config's `questions` relative to its folder; a bare name that is no file there is
    one of the lake's question sets, `<lake>/qa/question_sets/<name>.csv` (the configs
    folder being `<lake>/configs`): `questions = "feedback"` is the set users' verdicts build."""
    path = (base_dir / questions).resolve()
    if _SET_NAME.match(questions) and not path.exists():
        return (base_dir.parent / "qa" / "question_sets" / f"{questions}.csv").resolve()
    return path


# The config file format: 2 since rerank "combined" means KohakuRAG's published formula
# (before, it named what is now "combined_max"). `dump_toml`/`dump_json` write it.
CONFIG_VERSION = 2
TOP_KEYS = ("questions", "config_version", "retrieval", "generation", "voting", "scoring")

# KohakuRAG's key names that mean what ours mean: alias -> (table, our key). They are read
# at the top level (KohakuRAG's configs are flat) or inside their table.
KOHAKU_ALIASES: dict[str, tuple[str, str]] = {
    "rerank_strategy": ("retrieval", "rerank"),
    "retrieval_threshold": ("retrieval", "threshold"),
    "deduplicate_retrieval": ("retrieval", "dedup"),
    "top_k_final": ("retrieval", "top_k_final"),
    "top_k": ("retrieval", "top_k"),
    "planner_model": ("retrieval", "planner_model"),
    "planner_max_queries": ("retrieval", "planner_max_queries"),
    "max_retries": ("generation", "max_retries"),
    "use_reordered_prompt": ("generation", "use_reordered_prompt"),
    "max_concurrent": ("generation.llm", "max_concurrent"),
}
RETRIEVAL_ALIASES = {k: key for k, (table, key) in KOHAKU_ALIASES.items() if table == "retrieval" and k != key}
# KohakuRAG's rerank_strategy values in our names ("score" there sums the scores).
KOHAKU_RERANKS = {"combined": "combined", "frequency": "frequency", "score": "score_sum", "none": "none"}
# KohakuRAG keys that decide what the index holds: they belong to the index config.
INDEX_TIME_KEYS = (
    "embedding_model",
    "embedding_dim",
    "embedding_task",
    "db",
    "table_prefix",
    "paragraph_embedding_mode",
)


def _kohaku_value(alias: str, value: Any) -> Any:
    """A KohakuRAG value in our terms (only where the spelling differs)."""
    if alias == "rerank_strategy":
        if value is None:
            return "none"
        if not isinstance(value, str) or value.lower() not in KOHAKU_RERANKS:
            raise ConfigKeyError(
                f"retrieval.{alias}",
                f"{json.dumps(value)} is not one of KohakuRAG's rerank strategies: {', '.join(KOHAKU_RERANKS)}",
            )
        return KOHAKU_RERANKS[value.lower()]
    if alias == "deduplicate_retrieval":
        if not isinstance(value, bool):
            raise ConfigKeyError(f"retrieval.{alias}", f"expected true or false, got {json.dumps(value)}")
        return "node_id" if value else "none"
    if alias == "planner_model" and isinstance(value, str):
        return {"model": value}  # KohakuRAG names the model; the backend is the answerer's
    return value


def qa_config_from_mapping(data: dict[str, Any], base_dir: Path | None = None) -> QAConfig:
    """Build a QAConfig from parsed TOML/JSON, refusing unknown keys by name and wrong values
    by key (`ConfigKeyError`, a ValueError, names the dotted key).

    A relative `questions` path is taken relative to `base_dir` (the config file's folder).
    """
    data = dict(data)
    raw = {name: data.pop(name, None) or {} for name in ("retrieval", "generation", "voting", "scoring")}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise ConfigKeyError(name, f"expected a table, got {type(table).__name__}")
    tables: dict[str, dict[str, Any]] = {name: dict(table) for name, table in raw.items()}
    tables["generation.llm"] = dict(tables["generation"].pop("llm", None) or {})
    for where, table in [("", data), *tables.items()]:
        for key in INDEX_TIME_KEYS:
            if key in table:
                raise ConfigKeyError(
                    f"{where}.{key}" if where else key,
                    f"{key} decides what the index holds: set it in the index config (`kohaku index "
                    "--index-config FILE`, e.g. [embedder] model = ...), not in a QA config",
                )
    # KohakuRAG's names, at the top level or in their own table.
    used_alias: dict[tuple[str, str], str] = {}
    for alias, (table, key) in KOHAKU_ALIASES.items():
        for source in (data, tables[table]):
            if alias not in source or (source is tables[table] and alias == key):
                continue
            if key in tables[table] or (table, key) in used_alias:
                raise ConfigKeyError(f"{table}.{key}", f"give {key} or its alias {alias}, not both")
            tables[table][key] = _kohaku_value(alias, source.pop(alias))
            used_alias[(table, key)] = alias
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigKeyError(unknown[0], f"unknown QAConfig keys {unknown}; known: {', '.join(TOP_KEYS)}")
    version = data.get("config_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= CONFIG_VERSION:
        raise ConfigKeyError("config_version", f"expected 1 or {CONFIG_VERSION}, got {json.dumps(version)}")
    retrieval = tables["retrieval"]
    if version < 2 and retrieval.get("rerank") == "combined" and ("retrieval", "rerank") not in used_alias:
        raise ConfigKeyError(
            "retrieval.rerank",
            '"combined" now means KohakuRAG\'s published rerank (0.4 x freq/max freq + 0.6 x summed '
            'score/max); this file predates it, when "combined" meant what is now "combined_max" (the '
            'default). Write rerank = "combined_max" to keep what the file meant, or add '
            f"config_version = {CONFIG_VERSION} at the top to mean the published formula",
        )
    part_keys = [f.name for f in dataclasses.fields(RetrievalPart) if f.name != "search"]
    planner: dict[str, Any] = {k: retrieval.pop(k) for k in part_keys if k in retrieval}
    search = from_mapping(RetrievalConfig, retrieval, "retrieval")
    llm = from_mapping(LLMSpec, tables["generation.llm"], "generation.llm")
    questions = data.get("questions") or default_questions()
    if not isinstance(questions, str):
        raise ConfigKeyError("questions", f"expected a path, got {type(questions).__name__}")
    if base_dir is not None and not Path(questions).is_absolute():
        questions = str(questions_path(base_dir, questions))
    if (problem := question_file_problem(questions)) is not None:
        raise ConfigKeyError("questions", problem)
    return QAConfig(
        questions=questions,
        retrieval=from_mapping(RetrievalPart, {**planner, "search": search}, "retrieval"),
        generation=from_mapping(GenerationPart, {**tables["generation"], "llm": llm}, "generation"),
        voting=from_mapping(VotingPart, tables["voting"], "voting"),
        scoring=from_mapping(ScoringPart, tables["scoring"], "scoring"),
    )


# Our key -> KohakuRAG's name, to find the line of a key a file gave under its alias.
ALIAS_NAMES = {key: alias for alias, (_table, key) in KOHAKU_ALIASES.items() if alias != key}


def load_qa_config(path: Path) -> QAConfig:
    """One config file; errors name the file, the line and the key."""
    path = Path(path)
    if path.suffix not in CONFIG_SUFFIXES:
        raise ValueError(f"config file {path}: use a .toml or .json file")
    check_key(path.stem)
    data = read_config_data(path)
    if DERIVED_KEY in data:
        return _load_derived(path, data)
    try:
        return qa_config_from_mapping(data, path.parent)
    except ConfigKeyError as exc:
        raise ValueError(locate(path, exc, ALIAS_NAMES)) from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc


# A derived config (`kohaku eval --questions OTHER.csv` on config `a` writes `a--OTHER.json`)
# names the config it re-aims instead of copying it: a copy would hold the credentials of
# its URLs (`user:key@host`, `?api-key=`) in a second file nobody wrote, and go stale when
# the source is edited.
DERIVED_KEY = "derived_from"


def dump_derived(base: str, questions: Path) -> str:
    """The file of the config `base` (a config beside it) on the question file `questions`."""
    return json.dumps({DERIVED_KEY: check_key(base), "questions": str(questions)}, indent=2, sort_keys=True) + "\n"


def derived_base(path: Path) -> str | None:
    """The config a derived config file re-aims; None for a config of its own."""
    base = read_config_data(path).get(DERIVED_KEY)
    return str(base) if base is not None else None


def _load_derived(path: Path, data: dict[str, Any]) -> QAConfig:
    """A derived config: the config it names (beside it, not itself derived, so no chain or
    loop) with `questions` replaced."""
    base, questions = data.get(DERIVED_KEY), data.get("questions")
    if set(data) - {DERIVED_KEY, "questions"} or not isinstance(base, str) or not isinstance(questions, str):
        raise ValueError(
            f"config file {path}: a derived config holds only {DERIVED_KEY} (the name of the config it "
            "re-aims) and questions (a question file); delete it for `kohaku eval` to write it again, or "
            "write a whole config"
        )
    base_path = named_files(path.parent, "config").get(base)
    if base_path is None or base_path == path or DERIVED_KEY in read_config_data(base_path):
        raise ValueError(
            f"config file {path}: {DERIVED_KEY} {base!r}: no config of its own named {base} beside it "
            f"({base}.toml or {base}.json, not itself derived); restore it, or delete {path.name}"
        )
    cfg = load_qa_config(base_path)  # its errors name its own file
    if not Path(questions).is_absolute():
        questions = str(questions_path(path.parent, questions))
    if (problem := question_file_problem(questions)) is not None:
        raise ValueError(f"config file {path}: questions: {problem}")
    return dataclasses.replace(cfg, questions=questions)


def config_to_mapping(cfg: QAConfig) -> dict[str, Any]:
    """The file form of `cfg` (retrieval keys flat), which `qa_config_from_mapping` reads back."""
    data = cfg.as_dict()
    retrieval = {**{k: v for k, v in data["retrieval"].items() if k != "search"}, **data["retrieval"]["search"]}
    return {
        "config_version": CONFIG_VERSION,
        "questions": cfg.questions,
        "retrieval": retrieval,
        "generation": data["generation"],
        "voting": data["voting"],
        "scoring": data["scoring"],
    }


def dump_json(cfg: QAConfig) -> str:
    """A JSON config file holding `cfg` exactly (JSON, unlike TOML, can say null)."""
    return json.dumps(config_to_mapping(cfg), indent=2, sort_keys=True) + "\n"


# Settings whose None is written as "none" in TOML (no null there); others are left out.
NONE_AS_TEXT = ("top_k_final",)
# Settings whose None is written as "" (a string setting, so "none" would be read as text):
# a left-out api_key_env would read back as the default variable, and a key be required.
NONE_AS_EMPTY = ("api_key_env",)


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
        for k, v in items.items():
            if isinstance(v, dict):
                continue
            if v is None:
                if k in NONE_AS_TEXT:  # read back as None ("none" where a string is not allowed)
                    lines.append(f'{k} = "none"')
                elif k in NONE_AS_EMPTY:
                    lines.append(f'{k} = ""')
                continue
            lines.append(f"{k} = {value(v)}")
        return lines + [""]

    data = config_to_mapping(cfg)
    retrieval = data["retrieval"]
    generation = {k: v for k, v in data["generation"].items() if k != "llm"}
    lines = [f"config_version = {CONFIG_VERSION}", f"questions = {value(cfg.questions)}", ""]
    lines += table("retrieval", retrieval)
    if retrieval.get("planner_model"):
        lines += table("retrieval.planner_model", retrieval["planner_model"])
    if retrieval.get("reranker"):
        lines += table("retrieval.reranker", retrieval["reranker"])
    lines += table("generation", generation)
    lines += table("generation.llm", data["generation"]["llm"]) + table("voting", data["voting"])
    lines += table("scoring", data["scoring"])
    return "\n".join(lines)
