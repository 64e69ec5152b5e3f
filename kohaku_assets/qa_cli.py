"""`kohaku ask` and `kohaku eval`: answering from the command line.

`ask` answers one question in-process (no Dagster run: nothing is stored but the LLM
response cache). `eval` materializes the config's partition through Dagster on the lake's
instance, so only what is missing is computed and the run shows in `kohaku ui`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kohaku_assets.settings import KohakuSettings
from kohaku_rag.qa_config import QAConfig, config_files, dump_json, dump_toml, load_qa_config


def _config(settings: KohakuSettings, name: str | None) -> QAConfig:
    from kohaku_assets.qa import config_of

    if name:
        return config_of(settings, name)
    return QAConfig()


def cmd_ask(args: argparse.Namespace, settings: KohakuSettings) -> int:
    from kohaku_assets.qa import _chat, _retriever
    from kohaku_rag.answer import answer_question
    from kohaku_rag.answer_types import Question

    cfg = _config(settings, args.config)
    chat = _chat(cfg.generation.llm, str(settings.lake.root))
    retriever = _retriever(str(settings.lake.root), settings.index_config())
    question = Question(id="ask", question=args.question, answer_unit=args.unit or "is_blank")
    pred = answer_question(question, retriever, chat, cfg, images=lambda h: settings.lake.blob(h).read_bytes())
    cited = [{"doc_id": i.doc_id, "node_id": i.node_id, "page": i.page} for i in pred.cited()]
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


def eval_config_name(settings: KohakuSettings, name: str, questions: Path) -> str:
    """The config to run for `name` on `questions`: `name` itself when it already uses that
    file, else a derived config `<name>--<csv stem>` written next to it (one file per
    question set, so several sets coexist). `default` is written from the defaults if absent."""
    from kohaku_assets.qa import configs_dir
    from kohaku_rag.lake import check_key

    folder = configs_dir(settings.lake)
    files = config_files(folder)
    questions = questions.resolve()
    if name not in files:
        if name != "default":
            raise ValueError(f"config {name!r}: no {name}.toml or {name}.json in {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "default.toml").write_text(dump_toml(QAConfig(questions=str(questions))), encoding="utf-8")
        return name
    cfg = load_qa_config(files[name])
    if Path(cfg.questions).resolve() == questions:
        return name
    derived = check_key(f"{name}--{questions.stem}")
    text = dump_json(QAConfig(str(questions), cfg.retrieval, cfg.generation, cfg.voting))
    target = folder / f"{derived}.json"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return derived


def eval_ensemble_name(settings: KohakuSettings, name: str, questions: Path) -> str:
    """The ensemble spec to run for `name` on `questions`: `name` itself when its members
    already use that file, else a derived spec `<name>--<csv stem>` over derived members."""
    import dataclasses

    from kohaku_assets.cross_ensembles import spec_of
    from kohaku_rag.ensemble_spec import dump_spec, ensembles_dir
    from kohaku_rag.lake import check_key

    spec = spec_of(settings, name)
    members = tuple(eval_config_name(settings, member, questions) for member in spec.configs)
    if members == spec.configs:
        return name
    from kohaku_assets.qa import configs_dir

    derived = check_key(f"{name}--{questions.resolve().stem}")
    target = ensembles_dir(configs_dir(settings.lake)) / f"{derived}.json"
    text = dump_spec(dataclasses.replace(spec, configs=members))
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return derived


def is_ensemble_name(settings: KohakuSettings, name: str) -> bool:
    from kohaku_assets.qa import configs_dir
    from kohaku_rag.ensemble_spec import ensemble_files

    folder = configs_dir(settings.lake)
    return name not in config_files(folder) and name in ensemble_files(folder)


def cmd_eval(args: argparse.Namespace, settings: KohakuSettings) -> int:
    from kohaku_assets.qa import ref_urls_for
    from kohaku_rag import qa_store as st
    from kohaku_rag.answer_types import load_questions
    from kohaku_rag.score import write_submission_csv

    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    if is_ensemble_name(settings, args.config):
        if args.run is not None:
            raise ValueError(f"--run: {args.config} is an ensemble of configs; export a member's run with --config MEMBER")
        name, questions, answers = _eval_ensemble(settings, args.config, Path(args.questions), say)
    else:
        name, questions, answers = _eval_config(settings, args.config, Path(args.questions), args.run, say)
    default_name = name if args.run is None else f"{name}-run{args.run}"
    out = Path(args.out) if args.out else settings.lake.root / "qa" / "submissions" / f"{default_name}.csv"
    write_submission_csv(out, questions, answers, ref_urls_for(settings, answers))
    say(f"wrote {out}")
    scored = st.score_answers(questions, answers, st.corpus_ids(settings.lake))
    summary: dict[str, object] = {"config": name, "run": args.run, "out": str(out), "final": None, "value": None, "ref": None, "na": None}
    if scored is not None:
        score, _ = scored
        summary.update(final=round(score.final, 4), value=round(score.value, 4), ref=round(score.ref, 4),
                       na=round(score.na, 4))
        say(f"WattBot score {score.final:.4f} (value {score.value:.4f}, ref {score.ref:.4f}, na {score.na:.4f}) "
            f"on {len(score.rows)} questions")
    print(json.dumps(summary))
    return 0


def _eval_config(settings: KohakuSettings, config: str, questions_csv: Path, run: int | None, say):  # type: ignore[no-untyped-def]
    from kohaku_assets.qa import config_of, run_config
    from kohaku_rag import qa_store as st
    from kohaku_rag.answer_types import load_questions

    name = eval_config_name(settings, config, questions_csv)
    report = run_config(settings, name)
    for asset_name in ("retrievals", "predictions", "ensembles"):
        meta = report.metadata.get(asset_name, {})
        say(f"{asset_name}: {'reused' if meta.get('reused') else 'computed'} ({meta.get('key', '')})")
    cfg = config_of(settings, name)
    if run is None:
        answers = st.read_answers(st.ensemble_path(settings.lake, report.keys.ensemble))
    elif 0 <= run < cfg.voting.runs:
        answers = {p.question_id: p.answer for p in st.read_run(settings.lake, report.keys.prediction, run)}
    else:
        raise ValueError(f"--run {run}: config {name} has runs 0..{cfg.voting.runs - 1}")
    return name, load_questions(cfg.questions), answers


def _eval_ensemble(settings: KohakuSettings, spec_name: str, questions_csv: Path, say):  # type: ignore[no-untyped-def]
    """Materialize every member config that is missing anything, then the cross-config vote."""
    from kohaku_assets.cross_ensembles import run_ensemble, spec_of
    from kohaku_assets.qa import config_of, run_config
    from kohaku_rag import qa_store as st
    from kohaku_rag.answer_types import load_questions

    name = eval_ensemble_name(settings, spec_name, questions_csv)
    spec = spec_of(settings, name)
    for member in spec.configs:
        report = run_config(settings, member, leaderboard_too=False)
        meta = report.metadata.get("predictions", {})
        say(f"{member}: predictions {'reused' if meta.get('reused') else 'computed'} ({meta.get('key', '')})")
    meta = run_ensemble(settings, name)
    say(f"ensemble {name}: {meta['voters']} voters from {len(spec.configs)} configs, "
        f"{'reused' if meta['reused'] else 'voted'} ({meta['key']})")
    answers = st.read_answers(st.ensemble_path(settings.lake, str(meta["key"])))
    return name, load_questions(config_of(settings, spec.configs[0]).questions), answers


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, settings_of) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ask", parents=[common], help="answer one question with citations")
    p.add_argument("question")
    p.add_argument("--config", default=None, help="config name in the configs folder (default: built-in defaults)")
    p.add_argument("--unit", default=None, help="the expected answer unit, e.g. kWh (default: none)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: cmd_ask(a, settings_of(a)))

    p = sub.add_parser("eval", parents=[common], help="answer a WattBot question file with a config and score it")
    p.add_argument("--questions", required=True, help="WattBot-format CSV")
    p.add_argument("--config", default="default",
                   help="config name in the configs folder, or an ensemble spec in its ensembles/ folder (default: %(default)s)")
    p.add_argument("--out", default=None, help="submission CSV to write (default: <lake>/qa/submissions/NAME.csv)")
    p.add_argument("--run", type=int, default=None, help="export and score this single run instead of the ensemble")
    p.add_argument("--json", action="store_true", help="progress to stderr; stdout is the JSON summary")
    p.set_defaults(func=lambda a: cmd_eval(a, settings_of(a)))
