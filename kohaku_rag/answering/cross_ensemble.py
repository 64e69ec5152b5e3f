"""Cross-config ensembles: one vote over the stored runs (or voted answers) of several configs.

The vote reads the members' predictions from the lake and never asks an LLM: a member
with nothing stored raises `MissingPredictions` naming the command that computes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import config_of
from kohaku_rag.answering.ensemble_spec import EnsembleSpec
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answers.records import Answer
from kohaku_rag.config_files import stable_hash
from kohaku_rag.errors import MissingPredictions
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import is_stored, parquet_metadata


def members_of(lake: Lake, name: str, spec: EnsembleSpec) -> dict[str, QAConfig]:
    """The member configs, which must all answer the same question file (by content)."""
    members = {member: config_of(lake, member) for member in spec.configs}
    files = {member: st.file_sha(Path(cfg.questions)) for member, cfg in members.items()}
    if len(set(files.values())) > 1:
        listing = ", ".join(f"{m}: {members[m].questions}" for m in members)
        raise ValueError(f"ensemble {name}: its configs answer different question files ({listing})")
    return members


@dataclass(frozen=True)
class Pool:
    key: str  # the stored ensemble's key: the spec and every member's stored inputs
    voters: list[dict[str, Answer]]
    member_keys: dict[str, str]


def gather(lake: Lake, name: str, spec: EnsembleSpec, members: dict[str, QAConfig]) -> Pool:
    """Every voter's answers, from what the members have stored."""
    voters: list[dict[str, Answer]] = []
    member_keys: dict[str, str] = {}
    for member, cfg in members.items():
        keys = st.keys_for(lake, cfg)
        hint = f"materialize it first: kohaku eval --config {member} --questions {cfg.questions}"
        if spec.pool == "runs":
            missing = st.missing_runs(lake, keys.prediction, cfg.voting.runs)
            if missing:
                raise MissingPredictions(
                    f"ensemble {name}: config {member} has no stored predictions (or failed ones) "
                    f"for runs {missing}; {hint}"
                )
            voters += [st.answers_of(st.read_run(lake, keys.prediction, r)) for r in range(cfg.voting.runs)]
            # The runs' contents too: repaired runs (failed rows asked again) are voted again.
            fingerprint = st.runs_fingerprint(lake, keys.prediction, cfg.voting.runs)
            member_keys[member] = f"{keys.prediction}:{cfg.voting.runs}:{fingerprint}"
        else:
            path = st.ensemble_path(lake, keys.ensemble)
            if not is_stored(path):
                raise MissingPredictions(f"ensemble {name}: config {member} has no stored ensemble; {hint}")
            voters.append(st.read_answers(path))
            # The runs it was voted from too: a member's ensemble re-voted after repair is new.
            member_keys[member] = f"{keys.ensemble}:{parquet_metadata(path).get('runs_fingerprint', '')}"
    return Pool(stable_hash([spec.spec_hash, member_keys]), voters, member_keys)


def vote_spec(lake: Lake, spec: EnsembleSpec, pool: Pool) -> tuple[dict[str, Answer], bool]:
    """The pool's voted answers (stored under the pool's key) and whether they were reused."""
    path = st.ensemble_path(lake, pool.key)
    reused = is_stored(path)
    if not reused:
        answers = st.vote_pool(pool.voters, spec.mode, spec.ignore_blank, spec.tiebreak)
        st.write_rows(st.answer_rows(answers), path, {"spec_hash": spec.spec_hash})
    return st.read_answers(path), reused
