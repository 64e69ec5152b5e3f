"""`kohaku explain QUESTION_ID --config NAME`: one question's way through a config's stored run.

Prints what the stored tables hold for the question: the planner's queries and the retrieved
context (node ids, scores), each LLM call of the run as the model saw it (the prompt, with
the context in it) and its raw reply, the run's parsed answer, every run's answer and the
vote, and the score when the question file has gold answers. Nothing is computed: run
`kohaku eval --config NAME` first.
"""

from __future__ import annotations

import argparse
import json

import pyarrow.parquet as pq

from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.compute import Working
from kohaku_rag.answering.config_folder import config_of


def _rule(title: str) -> str:
    return f"\n── {title} " + "─" * max(0, 70 - len(title))


def explain_text(settings: KohakuSettings, question_id: str, config: str, run: int = 0) -> str:
    lake = settings.lake
    cfg = config_of(lake, config)
    keys = st.keys_for(lake, cfg)
    retrieval_file = st.retrieval_path(lake, keys.retrieval)
    if not retrieval_file.exists() or not st.run_path(lake, keys.prediction, run).exists():
        raise ValueError(
            f"config {config}: nothing stored for its current settings; run `kohaku eval --config {config}`"
        )
    if not 0 <= run < cfg.voting.runs:
        raise ValueError(f"--run {run}: config {config} has runs 0..{cfg.voting.runs - 1}")
    retrieved = st.read_retrievals(retrieval_file).get(question_id)
    if retrieved is None:
        raise ValueError(f"question {question_id!r} is not in {cfg.questions}")
    out = [f"question {question_id}, config {config}, run {run} (seed {run})"]
    out.append(_rule("retrieval"))
    out += [f"query {i}: {q}" for i, q in enumerate(retrieved.queries)]
    for rank, item in enumerate(retrieved.context, start=1):
        out.append(
            f"{rank:>2}. {item.node_id} ({item.kind}, page {item.page}, score {item.score:.4f}, {len(item.text)} chars)"
        )
    calls = [row for row in st.read_debug(lake, keys.prediction, run) if row["id"] == question_id]
    if not calls:
        out.append("\n(no prompts stored: this run was computed before prompts were recorded)")
    for call in calls:
        out.append(_rule(f"attempt {call['attempt']}: {call['kind']} prompt ({call['k']} snippets)"))
        out.append(call["prompt"])
        out.append(_rule(f"attempt {call['attempt']}: raw reply"))
        out.append(call["reply"])
    preds = {r: {p.question_id: p for p in st.read_run(lake, keys.prediction, r)} for r in range(cfg.voting.runs)}
    mine = preds[run].get(question_id)
    out.append(_rule("answer"))
    if mine is not None:
        a = mine.answer
        out.append(
            f"value {a.answer_value!r} unit {a.answer_unit!r} refs {list(a.ref_id)} blank {a.is_blank}"
            f"{f' confidence {a.confidence:.3f}' if a.confidence is not None else ''}; {mine.attempts} attempt(s)"
            f"{f'; error {mine.error}' if mine.error else ''}"
        )
        working = Working.from_json(mine.working)
        if working is not None:
            out.append(working.describe())
    out.append(_rule(f"vote ({cfg.voting.mode}, tiebreak {cfg.voting.tiebreak}, {cfg.voting.runs} runs)"))
    for r, by_id in preds.items():
        p = by_id.get(question_id)
        if p is not None:
            out.append(f"run {r}: {p.answer.answer_value!r} {list(p.answer.ref_id)}")
    ensemble_file = st.ensemble_path(lake, keys.ensemble)
    if ensemble_file.exists():
        voted = st.read_answers(ensemble_file).get(question_id)
        if voted is not None:
            out.append(f"voted: {voted.answer_value!r} {list(voted.ref_id)}")
    score_file = st.score_path(lake, st.score_key(keys.ensemble, cfg.scoring.metric))
    if score_file.exists():
        for row in pq.read_table(score_file).to_pylist():
            if row["id"] == question_id:
                out.append(_rule("score"))
                out.append(
                    json.dumps(
                        {k: row[k] for k in ("total", "value", "ref", "na", "error_type", "gold_value", "gold_ref")}
                    )
                )
    return "\n".join(out) + "\n"


def add_parser(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser(
        "explain", parents=[common], help="one question through a config's stored run: context, prompt, reply, vote"
    )
    p.add_argument("question_id")
    p.add_argument("--config", default="default", help="config name in the configs folder (default: %(default)s)")
    p.add_argument("--run", type=int, default=0, help="which run's prompts and replies (default: 0)")
    p.set_defaults(func=lambda a: print(explain_text(settings_of(a), a.question_id, a.config, a.run), end="") or 0)
