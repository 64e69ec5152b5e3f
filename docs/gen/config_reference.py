"""The configuration reference, generated from the declarations the loader checks.

Every key of every config file is a field of a frozen dataclass read by
`kohaku_rag.config_files.from_mapping`: its type hint (Literal sets, bool/int/float/str,
tuples, optional values, nested tables) and its `Range` are what a file's value is checked
against, its default is the dataclass default, and the comment beside it in the source says
what it does. This module walks those dataclasses, so the reference lists exactly the keys
the loader accepts.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.ensemble_spec import EnsembleSpec
from kohaku_rag.answering.qa_config import GenerationPart, RetrievalPart, ScoringPart, VotingPart
from kohaku_rag.answering.qa_config_file import CONFIG_VERSION, INDEX_TIME_KEYS, KOHAKU_ALIASES
from kohaku_rag.config_files import Range
from kohaku_rag.experiments.sweep import SWEEP_KEYS
from kohaku_rag.indexing.index_config import IndexConfig


@dataclass(frozen=True)
class Key:
    """One config key as the reference shows it."""

    table: str  # "" for the top level, else "retrieval", "generation.llm", ...
    name: str
    type: str
    default: str
    allowed: str  # the Literal set or the Range, "" when any value of the type goes
    doc: str

    @property
    def dotted(self) -> str:
        return f"{self.table}.{self.name}" if self.table else self.name


@dataclass(frozen=True)
class Table:
    """A config table: the dataclass read for it and the keys that are not its fields."""

    name: str
    cls: type
    skip: tuple[str, ...] = ()  # fields read from elsewhere (RetrievalPart.search: the same table)


def _unwrap(hint: Any) -> tuple[Any, list[Range]]:
    if typing.get_origin(hint) is typing.Annotated:
        inner, *meta = typing.get_args(hint)
        return inner, [m for m in meta if isinstance(m, Range)]
    return hint, []


def _options(hint: Any) -> tuple[Any, bool]:
    """(the hint without None, whether None is allowed)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), optional  # noqa: UP007
    return hint, False


def nested_table(hint: Any) -> type | None:
    """The dataclass a field holds as its own table, if any (`llm: LLMSpec`, `reranker: RerankerSpec | None`)."""
    inner, _ = _options(_unwrap(hint)[0])
    return inner if dataclasses.is_dataclass(inner) and isinstance(inner, type) else None


def type_text(hint: Any) -> str:
    hint, _ranges = _unwrap(hint)
    inner, optional = _options(hint)
    inner, _ranges = _unwrap(inner)  # `Annotated[int, Range(...)] | None`
    origin = typing.get_origin(inner)
    if origin is typing.Literal:
        text = "string" if all(isinstance(a, str) for a in typing.get_args(inner)) else "value"
    elif origin is tuple:
        args = [a for a in typing.get_args(inner) if a is not Ellipsis]
        text = f"list of {type_text(args[0])}" if args else "list"
    elif origin in (typing.Union, types.UnionType):
        text = " or ".join(type_text(a) for a in typing.get_args(inner))
    elif dataclasses.is_dataclass(inner) and isinstance(inner, type):
        text = f"table ({inner.__name__})"
    else:
        text = {bool: "bool", int: "int", float: "float", str: "string"}.get(
            inner, getattr(inner, "__name__", str(inner))
        )
    return f"{text} or none" if optional else text


def _literals(hint: Any) -> tuple[Any, ...]:
    inner, _ = _options(_unwrap(hint)[0])
    if typing.get_origin(inner) is typing.Literal:
        return typing.get_args(inner)
    if typing.get_origin(inner) is tuple:
        args = [a for a in typing.get_args(inner) if a is not Ellipsis]
        return _literals(args[0]) if args else ()
    return ()


def _number(x: float) -> str:
    return f"{int(x):,}".replace(",", "_") if float(x).is_integer() else repr(x)


def allowed_text(hint: Any) -> str:
    literals = _literals(hint)
    if literals:
        return ", ".join(json.dumps(v) for v in literals)
    inner, ranges = _unwrap(hint)
    ranges = ranges or _unwrap(_options(inner)[0])[1]  # `Annotated[int, Range(...)] | None`
    parts = []
    for r in ranges:
        low = "" if r.low is None else f"{_number(r.low)} {'<' if r.low_open else '≤'} "
        high = "" if r.high is None else f" ≤ {_number(r.high)}"
        parts.append(f"{low}value{high}")
    return "; ".join(parts)


def default_text(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "its table's defaults"
    if value is None:
        return "none"
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)


def field_comments(cls: type) -> dict[str, str]:
    """field name -> the comment beside it in the class source (trailing, or the comment
    lines right above it)."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    out: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        name = stripped.split(":", 1)[0].strip()
        if name not in names or name in out or not line.startswith("    ") or line.startswith("     "):
            continue
        above: list[str] = []
        k = number - 1
        while k >= 1 and lines[k - 1].strip().startswith("#"):
            above.insert(0, comments.get(k, ""))
            k -= 1
        text = re.sub(r"──.*?──", "", " ".join(above)).strip()  # a section rule above the first field
        trailing = comments.get(number, "") if "#" in line else ""
        out[name] = " ".join(t for t in (text, trailing) if t)
    return out


def table_keys(table: Table) -> Iterator[Key]:
    hints = typing.get_type_hints(table.cls, include_extras=True)
    docs = field_comments(table.cls)
    for f in dataclasses.fields(table.cls):
        if f.name in table.skip or nested_table(hints[f.name]) is not None:
            continue
        hint = hints[f.name]
        yield Key(table.name, f.name, type_text(hint), default_text(f), allowed_text(hint), docs.get(f.name, ""))


def nested_tables(table: Table) -> list[Table]:
    """The tables under `table` (e.g. `[generation.llm]`), recursively."""
    hints = typing.get_type_hints(table.cls, include_extras=True)
    found = []
    for f in dataclasses.fields(table.cls):
        inner = nested_table(hints[f.name])
        if inner is None:
            continue
        child = Table(f"{table.name}.{f.name}" if table.name else f.name, inner)
        if f.name in table.skip:
            # RetrievalPart.search: its keys are written in the same [retrieval] table
            child = Table(table.name, inner)
        found += [child, *nested_tables(child)]
    return found


# What each kind of file is read into (the roots the loader starts from).
QA_TABLES = (
    Table("retrieval", RetrievalPart, skip=("search",)),
    Table("generation", GenerationPart),
    Table("voting", VotingPart),
    Table("scoring", ScoringPart),
)
INDEX_TABLES = (Table("", IndexConfig),)
ENSEMBLE_TABLES = (Table("", EnsembleSpec),)


def all_tables(roots: tuple[Table, ...]) -> list[Table]:
    out: list[Table] = []
    for root in roots:
        out.append(root)
        out += nested_tables(root)
    return out


def qa_keys() -> list[Key]:
    """Every key of a QA config file, with the top-level ones first."""
    top = [
        Key("", "questions", "string (a path)", "the WattBot train file", "", "The question file (WattBot CSV)."),
        Key("", "config_version", "int", str(CONFIG_VERSION), f"1 ≤ value ≤ {CONFIG_VERSION}", "The file format."),
    ]
    keys = list(top)
    for table in all_tables(QA_TABLES):
        keys += table_keys(table)
    return keys


def index_keys() -> list[Key]:
    return [k for t in all_tables(INDEX_TABLES) for k in table_keys(t)]


def ensemble_keys() -> list[Key]:
    return [k for t in all_tables(ENSEMBLE_TABLES) for k in table_keys(t)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_table(keys: list[Key]) -> str:
    order = list(dict.fromkeys(k.table for k in keys))  # one section per table, in order of appearance
    keys = sorted(keys, key=lambda k: order.index(k.table))
    lines: list[str] = []
    current = None
    for key in keys:
        if key.table != current:
            current = key.table
            title = f"`[{key.table}]`" if key.table else "Top level"
            lines += [
                "",
                f"### {title}",
                "",
                "| key | type | default | allowed | what it does |",
                "|---|---|---|---|---|",
            ]
        lines.append(
            f"| `{key.name}` | {_cell(key.type)} | `{_cell(key.default)}` | {_cell(key.allowed)} | {_cell(key.doc)} |"
        )
    return "\n".join(lines)


def page() -> str:
    aliases = "\n".join(f"| `{alias}` | `[{table}] {key}` |" for alias, (table, key) in KOHAKU_ALIASES.items())
    return f"""# Configuration reference

Generated from the dataclasses the config loader reads (`kohaku_rag.config_files.from_mapping`):
the type, the default and the allowed values are the ones a file's value is checked against,
and "what it does" is the comment beside the field in the source. A value of the wrong type,
outside its allowed set or range, or an unknown key, is refused when the file is loaded, with
the file, the line and the key. `kohaku config show NAME` prints a config with every key.

## QA config files

`data_lake/configs/<name>.toml` (or `.json`): one answering configuration, named by its file
stem. `[retrieval]` holds the planner's keys and the search settings
(`RetrievalConfig`) in one table.
{key_table(qa_keys())}

### KohakuRAG's key names

Accepted as aliases, at the top level (KohakuRAG's configs are flat) or in their table:

| alias | means |
|---|---|
{aliases}

Keys that decide what the index holds are refused in a QA config, with a pointer to the index
config: {", ".join(f"`{k}`" for k in INDEX_TIME_KEYS)}.

## Index config files

`kohaku index --index-config FILE` (TOML or JSON): everything that changes what the index
holds. The lake records it in `data_lake/index_config.json`.
{key_table(index_keys())}

## Ensemble spec files

`data_lake/configs/ensembles/<name>.toml`: several configs voted together.
{key_table(ensemble_keys())}

## Sweep files

`data_lake/configs/sweeps/<name>.toml`: a base config, a grid (or list) of overrides and the
seeds. Its keys: {", ".join(f"`{k}`" for k in SWEEP_KEYS)}; every override names a QA config key
above (dotted, or bare when one table has it). See [configs and sweeps](../how-to/configs-and-sweeps.md).
"""
