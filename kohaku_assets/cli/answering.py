"""`kohaku ask` and `kohaku eval`: answering from the command line.

`ask` answers one question in-process through the Python API (no Dagster run: nothing is
stored but the LLM response cache). `eval` materializes the config's partition through
Dagster on the lake's instance, so only what is missing is computed and the run shows in
`kohaku ui`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import run_config, run_ensemble
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import (
    NAMED_SET,
    config_of,
    configs_dir,
    eval_config_name,
    eval_ensemble_name,
    is_ensemble_name,
    question_set_path,
    spec_of,
)
from kohaku_rag.answering.qa_config import METRICS, QAConfig
from kohaku_rag.answering.time_split import time_split
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.api import Rag
from kohaku_rag.evaluation.leaderboard import ref_urls_for
from kohaku_rag.evaluation.scoring import score_answers
from kohaku_rag.evaluation.submissions import write_submission_csv
from kohaku_rag.experiments.cost import estimate
from kohaku_rag.lake.lock import hold_lake
from kohaku_rag.progress import eta_lines, listening

Say = Callable[[str], None]


def cmd_ask(args: argparse.Namespace, settings: KohakuSettings) -> int:
    # The library's own entry (kohaku_rag.api), with a model pool of its own: no Dagster run.
    rag = Rag(settings.lake, settings.index_config())
    result = rag.ask(args.question, config=args.config, unit=args.unit or "is_blank")
    pred = result.prediction
    cited = [{"doc_id": i.doc_id, "node_id": i.node_id, "page": i.page} for i in result.cited]
    if args.json:
        row = pred.as_row()
        row["citations"] = cited
        print(json.dumps(row))
        return 0
    a = pred.answer
    if a.is_blank:
        print(f"{a.answer}  ({pred.attempts} attempts, up to {pred.k_used} snippets)")
        return 0
    unit = "" if a.answer_unit == "is_blank" else f" {a.answer_unit}"
    print(f"{a.answer}  [value: {a.answer_value}{unit}]")
    if a.explanation and a.explanation != "is_blank":
        print(f"  {a.explanation}")
    for c in cited:
        print(f"  - {c['doc_id']}: {c['node_id']} (page {c['page']})")
    print(f"({pred.attempts} attempt(s), {pred.k_used} snippets, {pred.seconds:.1f}s)")
    return 0


def cmd_eval(args: argparse.Namespace, settings: KohakuSettings) -> int:
    say: Say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    questions_csv = questions_arg(settings, args.config, args.questions)
    if not load_questions(questions_csv):
        raise ValueError(
            f"{questions_csv}: no questions to answer (a file with a `reviewed` column counts the rows a reviewer "
            "marked yes)"
        )
    if is_ensemble_name(settings.lake, args.config):
        if args.run is not None:
            raise ValueError(
                f"--run: {args.config} is an ensemble of configs; export a member's run with --config MEMBER"
            )
        name, questions, answers = _eval_ensemble(settings, args.config, questions_csv, say)
    else:
        name, questions, answers = _eval_config(settings, args.config, questions_csv, args.run, say)
    default_name = name if args.run is None else f"{name}-run{args.run}"
    out = Path(args.out) if args.out else st.submission_path(settings.lake, default_name)
    write_submission_csv(out, questions, answers, ref_urls_for(settings.corpus, answers))
    say(f"wrote {out}")
    metric = args.metric or _metric_of(settings, name)
    scored = score_answers(questions, answers, st.corpus_ids(settings.lake), metric)
    summary: dict[str, object] = {
        "config": name,
        "run": args.run,
        "out": str(out),
        "metric": metric,
        "final": None,
        "value": None,
        "ref": None,
        "na": None,
    }
    if scored is not None:
        score, _ = scored
        summary.update(
            {k: v for k, v in score.summary().items() if k not in ("n", "metric", "missing")},
            final=round(score.final, 4),
            value=round(score.value, 4),
            ref=round(score.ref, 4),
            na=round(score.na, 4),
        )
        for line in score.lines():
            say(line)
        other = "wattbot2026" if metric == "wattbot2025" else "wattbot2025"
        say(f"  the same answers under {other}: kohaku score --questions {questions_file(settings, name)} "
            f"--submission {out} --metric {other}")  # fmt: skip
    print(json.dumps(summary))
    return 0


def questions_arg(settings: KohakuSettings, config: str, questions: str | None) -> Path:
    """The question file `kohaku eval` answers: --questions (a CSV path, or the name of one of
    the lake's question sets such as `feedback`), else the one the config names."""
    if questions is None:
        if config == "default" and not (configs_dir(settings.lake) / "default.toml").exists():
            return Path(QAConfig().questions)
        return Path(questions_file(settings, config))
    if NAMED_SET.match(questions):
        path = question_set_path(settings.lake, questions)
        if not path.exists():
            raise ValueError(f"--questions {questions}: no question set {questions} (no {path})")
        return path
    return Path(questions)


def _metric_of(settings: KohakuSettings, name: str) -> str:
    """The config's [scoring] metric (an ensemble's: its first member's)."""
    if is_ensemble_name(settings.lake, name):
        return config_of(settings.lake, spec_of(settings.lake, name).configs[0]).scoring.metric
    return config_of(settings.lake, name).scoring.metric


def questions_file(settings: KohakuSettings, name: str) -> str:
    if is_ensemble_name(settings.lake, name):
        return config_of(settings.lake, spec_of(settings.lake, name).configs[0]).questions
    return config_of(settings.lake, name).questions


def _eval_config(
    settings: KohakuSettings, config: str, questions_csv: Path, run: int | None, say: Say
) -> tuple[str, list[Question], dict[str, Answer]]:
    name = eval_config_name(settings.lake, config, questions_csv)
    # What the run will cost, before it starts (nothing to say for a config that cannot run:
    # the run says why).
    with contextlib.suppress(ValueError, OSError):
        say(f"estimate: {estimate(settings.lake, [config_of(settings.lake, name)]).summary()}")
    # The run's own progress lines go to Dagster's log: the terminal hears each question here.
    with listening(eta_lines(say)):
        report = run_config(settings, name)
    for asset_name in ("retrievals", "predictions", "ensembles"):
        meta = report.metadata.get(asset_name, {})
        say(f"{asset_name}: {'reused' if meta.get('reused') else 'computed'} ({meta.get('key', '')})")
    cfg = config_of(settings.lake, name)
    if run is None:
        answers = st.read_answers(st.ensemble_path(settings.lake, report.keys.ensemble))
    elif 0 <= run < cfg.voting.runs:
        answers = st.answers_of(st.read_run(settings.lake, report.keys.prediction, run))
    else:
        raise ValueError(f"--run {run}: config {name} has runs 0..{cfg.voting.runs - 1}")
    runs = [st.read_run(settings.lake, report.keys.prediction, r) for r in range(cfg.voting.runs)]
    if (split := time_split(runs)) is not None:
        say(split.line())
    return name, load_questions(cfg.questions), answers


def _eval_ensemble(
    settings: KohakuSettings, spec_name: str, questions_csv: Path, say: Say
) -> tuple[str, list[Question], dict[str, Answer]]:
    """Materialize every member config that is missing anything, then the cross-config vote."""
    name = eval_ensemble_name(settings.lake, spec_name, questions_csv)
    spec = spec_of(settings.lake, name)
    for member in spec.configs:
        report = run_config(settings, member, leaderboard_too=False)
        meta = report.metadata.get("predictions", {})
        say(f"{member}: predictions {'reused' if meta.get('reused') else 'computed'} ({meta.get('key', '')})")
    meta = run_ensemble(settings, name)
    say(
        f"ensemble {name}: {meta['voters']} voters from {len(spec.configs)} configs, "
        f"{'reused' if meta['reused'] else 'voted'} ({meta['key']})"
    )
    answers = st.read_answers(st.ensemble_path(settings.lake, str(meta["key"])))
    return name, load_questions(config_of(settings.lake, spec.configs[0]).questions), answers


def add_parsers(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser("ask", parents=[common], help="answer one question with citations")
    p.add_argument("question")
    p.add_argument("--config", default=None, help="config name in the configs folder (default: built-in defaults)")
    p.add_argument("--unit", default=None, help="the expected answer unit, e.g. kWh (default: none)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: cmd_ask(a, settings_of(a)))

    p = sub.add_parser("eval", parents=[common], help="answer a WattBot question file with a config and score it")
    p.add_argument(
        "--questions",
        default=None,
        help="WattBot-format CSV, or a question set of the lake by name (feedback: qa/question_sets/feedback.csv); "
        "default: the questions the config names",
    )
    p.add_argument(
        "--config",
        default="default",
        help="config name in the configs folder, or an ensemble spec in its ensembles/ folder (default: %(default)s)",
    )
    p.add_argument("--out", default=None, help="submission CSV to write (default: <lake>/qa/submissions/NAME.csv)")
    p.add_argument("--run", type=int, default=None, help="export and score this single run instead of the ensemble")
    p.add_argument(
        "--metric",
        choices=METRICS,
        default=None,
        help="score with this metric (default: the config's [scoring] metric)",
    )
    p.add_argument("--json", action="store_true", help="progress to stderr; stdout is the JSON summary")
    p.add_argument(
        "--no-wait", action="store_true", help="exit (status 2) instead of waiting when another process writes the lake"
    )
    p.set_defaults(func=lambda a: _holding_lake(a, settings_of(a), cmd_eval))


def _holding_lake(
    args: argparse.Namespace, settings: KohakuSettings, cmd: Callable[[argparse.Namespace, KohakuSettings], int]
) -> int:
    """Run a command that writes the answering tables under the lake's writer lock, so a
    re-index can't change the index between its retrievals and its answers."""
    with hold_lake(settings.lake.root, f"kohaku {args.command}", wait=not args.no_wait, say=_stderr):
        return cmd(args, settings)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)
