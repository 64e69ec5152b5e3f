"""An ensemble spec: which configs vote together, and how.

An ensemble spec is a file in `<configs>/ensembles/` (TOML or JSON), named by its stem:

    configs = ["default", "hot", "wide"]   # config names in the configs folder
    pool = "runs"                          # every run of every config votes ("runs"),
                                           # or each config's own voted answer ("ensembles")
    mode = "answer_priority"
    ignore_blank = true
    tiebreak = "first"

Members must answer the same question file. The spec stores nothing of its own but the
voted answers and their score, keyed by the spec and its members' prediction keys, so
editing a member config re-votes without recomputing the other members.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kohaku_rag.answers.vote import TIEBREAKS, VOTE_MODES, Tiebreak, VoteMode
from kohaku_rag.config_files import ConfigKeyError, from_mapping, locate, read_config_data, stable_hash
from kohaku_rag.lake.tables import check_key


@dataclass(frozen=True)
class EnsembleSpec:
    configs: tuple[str, ...]
    pool: Literal["runs", "ensembles"] = "runs"
    mode: VoteMode = "answer_priority"
    ignore_blank: bool = True
    tiebreak: Tiebreak = "first"

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", tuple(self.configs))
        if len(self.configs) < 2:
            raise ValueError(f"an ensemble names at least two configs, got {list(self.configs)}")
        if len(set(self.configs)) != len(self.configs):
            raise ValueError(f"configs {list(self.configs)} name a config twice")
        for name in self.configs:
            check_key(name)
        if self.pool not in ("runs", "ensembles"):
            raise ValueError(f"pool {self.pool!r} is not 'runs' or 'ensembles'")
        if self.mode not in VOTE_MODES:
            raise ValueError(f"vote mode {self.mode!r} is not one of {', '.join(VOTE_MODES)}")
        if self.tiebreak not in TIEBREAKS:
            raise ValueError(f"tiebreak {self.tiebreak!r} is not one of {', '.join(TIEBREAKS)}")

    @property
    def spec_hash(self) -> str:
        return stable_hash(self)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "configs": list(self.configs)}


def load_ensemble_spec(path: Path) -> EnsembleSpec:
    """One spec file; errors name the file."""
    path = Path(path)
    check_key(path.stem)
    data = read_config_data(path)
    try:
        return from_mapping(EnsembleSpec, data)
    except ConfigKeyError as exc:
        raise ValueError(locate(path, exc, what="ensemble file")) from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ensemble file {path}: {exc}") from exc


def dump_spec(spec: EnsembleSpec) -> str:
    return json.dumps(spec.as_dict(), indent=2, sort_keys=True) + "\n"
