"""`kohaku config show` and `kohaku config diff`: a config as it will run, and what differs.

`show NAME` prints the config resolved: every key with its value, defaults included, and the
values a default leaves to another setting (alpha, the planner's LLM) spelled out, as a TOML
file that loads back to the same config. `diff A B` prints the keys whose values differ and
which stored tables (retrievals, predictions, ensembles) the difference keeps apart.
NAME is a config name in the lake's configs folder or a path to a config file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering.config_folder import config_of
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import config_to_mapping, dump_toml, load_qa_config
from kohaku_rag.http_retry import redact_urls


def resolve(settings: KohakuSettings, name: str) -> QAConfig:
    path = Path(name)
    if path.suffix in (".toml", ".json") and path.exists():
        return load_qa_config(path)
    return config_of(settings.lake, name)


def resolved(cfg: QAConfig) -> QAConfig:
    """The same config with the defaults that depend on other settings written out, and the
    credentials written into its URLs redacted (what is printed)."""
    search = cfg.retrieval.search
    if search.alpha is None and search.rerank in ("combined", "combined_max"):
        search = dataclasses.replace(search, alpha=search.effective_alpha)
    return redact_urls(dataclasses.replace(cfg, retrieval=dataclasses.replace(cfg.retrieval, search=search)))


def show_text(cfg: QAConfig) -> str:
    planner = "" if cfg.retrieval.planner_model else "# the planner uses the answering LLM ([generation.llm])\n"
    hashes = (
        f"# retrieval_hash {cfg.retrieval_hash}, generation_hash {cfg.generation_hash}, voting_hash {cfg.voting_hash}\n"
    )
    return hashes + planner + dump_toml(resolved(cfg))


def flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flat(value, f"{prefix}.{key}" if prefix else key))
        return out
    return {prefix: list(data) if isinstance(data, tuple) else data}


def diff_lines(a: QAConfig, b: QAConfig, names: tuple[str, str]) -> list[str]:
    left, right = flat(config_to_mapping(resolved(a))), flat(config_to_mapping(resolved(b)))
    lines = [
        f"{key}: {json.dumps(left.get(key))} -> {json.dumps(right.get(key))}"
        for key in sorted(set(left) | set(right))
        if left.get(key) != right.get(key)
    ]
    if not lines:
        return [f"{names[0]} and {names[1]} are the same config"]
    same = [
        stage
        for stage in ("retrieval", "generation", "voting")
        if getattr(a, f"{stage}_hash") == getattr(b, f"{stage}_hash")
    ]
    share = {"retrieval": "retrievals", "generation": "predictions", "voting": "ensembles"}
    note = f"(they share stored {', '.join(share[s] for s in same)})" if same else "(they share no stored table)"
    return [*lines, note]


def cmd_config(args: argparse.Namespace, settings: KohakuSettings) -> int:
    if args.action == "show":
        print(show_text(resolve(settings, args.names[0])), end="")
        return 0
    if len(args.names) != 2:
        raise ValueError("kohaku config diff takes two config names")
    a, b = (resolve(settings, n) for n in args.names)
    print("\n".join(diff_lines(a, b, (args.names[0], args.names[1]))))
    return 0


def add_parser(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser("config", parents=[common], help="show a config resolved, or diff two configs")
    p.add_argument("action", choices=("show", "diff"))
    p.add_argument("names", nargs="+", help="config names (in the configs folder) or config files")
    p.set_defaults(func=lambda a: cmd_config(a, settings_of(a)))
