"""The generated reference lists what the code knows, no more and no less (docs/gen/).

Failed before this issue: the README's hand-written key tables left keys out (e.g. every
`[retrieval.reranker]` key, `figure_search`, `vector_search`) and no page listed them all."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any

import cli_reference
import config_reference
import http_reference

from kohaku_assets.cli import build_parser
from kohaku_rag.answering.ensemble_spec import EnsembleSpec, load_ensemble_spec
from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart
from kohaku_rag.answering.qa_config_file import config_to_mapping, load_qa_config
from kohaku_rag.config_files import load_config_file
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.llm import LLMSpec
from kohaku_rag.retrieval.rerankers import RerankerSpec
from kohaku_rag.serving.openapi import SCHEMA


def documented(page: str, section: str) -> set[str]:
    """Dotted keys of the reference's `## section`: `### [table]` headings and `| `key` |` rows."""
    body = page.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    table = ""
    for line in body.splitlines():
        heading = re.match(r"### (?:`\[(.+)\]`|Top level)", line)
        if heading:
            table = heading.group(1) or ""
            continue
        row = re.match(r"\| `([^`]+)` \|", line)
        if row and line.count("|") == 6:
            keys.add(f"{table}.{row.group(1)}" if table else row.group(1))
    return keys


def dotted(data: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in data.items():
        if isinstance(value, dict):
            out |= dotted(value, f"{prefix}{key}.")
        else:
            out.add(prefix + key)
    return out


def full_qa_config() -> QAConfig:
    """A config with every optional table present (a planner model, a reranker)."""
    base = QAConfig()
    search = dataclasses.replace(base.retrieval.search, reranker=RerankerSpec(backend="embedding"))
    retrieval: RetrievalPart = dataclasses.replace(base.retrieval, search=search, planner_model=LLMSpec())
    return dataclasses.replace(base, retrieval=retrieval)


def test_every_qa_config_key_the_loader_knows_is_in_the_reference(tmp_path) -> None:
    mapping = config_to_mapping(full_qa_config())
    # The file form the loader writes is one it reads back: these are keys it knows.
    path = tmp_path / "full.json"
    path.write_text(json.dumps(mapping))
    assert load_qa_config(path).retrieval.search.reranker == RerankerSpec(backend="embedding")
    keys = dotted(mapping)
    listed = documented(config_reference.page(), "QA config files")
    assert keys - listed == set(), f"keys missing from the reference: {sorted(keys - listed)}"
    assert listed - keys == set(), f"keys in the reference the loader does not know: {sorted(listed - keys)}"


def test_every_index_and_ensemble_key_is_in_the_reference(tmp_path) -> None:
    page = config_reference.page()
    index_keys = dotted(dataclasses.asdict(IndexConfig()))
    path = tmp_path / "index.json"
    path.write_text(json.dumps(dataclasses.asdict(IndexConfig())))
    assert load_config_file(path, IndexConfig) == IndexConfig()
    assert documented(page, "Index config files") == index_keys

    spec = EnsembleSpec(configs=("a", "b"))
    spec_path = tmp_path / "pair.json"
    spec_path.write_text(json.dumps(spec.as_dict()))
    assert load_ensemble_spec(spec_path) == spec
    assert documented(page, "Ensemble spec files") == set(spec.as_dict())


def test_allowed_values_and_ranges_come_from_the_declarations() -> None:
    page = config_reference.page()
    rerank = next(line for line in page.splitlines() if line.startswith("| `rerank` |"))
    assert '"combined", "combined_max", "frequency", "score", "score_sum", "none"' in rerank
    runs = next(line for line in page.splitlines() if line.startswith("| `runs` |"))
    assert "1 ≤ value ≤ 100" in runs


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    page = cli_reference.page()
    parser = build_parser()
    commands = cli_reference._subcommands(parser)
    assert len(commands) >= 10
    for name, (sub, _help) in commands.items():
        assert f"## `kohaku {name}`" in page
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}`" in page, f"kohaku {name} {option}"


def test_every_served_route_is_in_the_http_reference() -> None:
    page = http_reference.page()
    assert http_reference.served_schema() == SCHEMA
    for path, ops in SCHEMA["paths"].items():
        for method in ops:
            assert f"## `{method.upper()} {path}`" in page
