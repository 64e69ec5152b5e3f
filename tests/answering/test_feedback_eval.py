"""Scoring configs on the questions real users asked: `kohaku eval --config NAME` answers the
questions the config names, and `--questions feedback` the lake's `feedback` question set
(its reviewed rows only), through the same Dagster runs and scores as any question file."""

import csv
import json
from datetime import UTC, datetime

import pytest
from test_failed_calls import write_config

from kohaku_assets.cli import main as cli_main
from kohaku_rag.serving.feedback import append_feedback, feedback_set_path
from tests.support.qa_server import QUESTIONS


def verdict(question: str, verdict: str, served: str, unit: str, doc: str, **correction: str) -> dict:
    return {
        "time": datetime.now(UTC),
        "answer_id": "0" * 32,
        "question": question,
        "config": "default",
        "served_answer": f"{served} {unit}",
        "served_value": served,
        "served_unit": unit,
        "served_refs": [doc],
        "verdict": verdict,
        "correct_value": correction.get("value"),
        "correct_unit": correction.get("unit"),
        "correct_ref": correction.get("ref"),
        "comment": None,
    }


def test_eval_uses_the_configs_questions_and_the_reviewed_feedback_set(env, capsys) -> None:
    """Without --questions, `kohaku eval` asks the config's own questions (no usage error)."""
    settings, server, questions = env
    write_config(settings, "a", server, questions)
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir, "--json"]
    assert cli_main(["eval", "--config", "a", *args]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["config"] == "a" and summary["final"] == pytest.approx(1.0)

    (carbon, (c_unit, c_value, c_doc)), (gpu, (g_unit, _, g_doc)), (water, (w_unit, w_value, w_doc)) = QUESTIONS.items()
    append_feedback(settings.lake, verdict(carbon, "right", c_value, c_unit, c_doc))
    append_feedback(settings.lake, verdict(gpu, "wrong", "400", g_unit, g_doc, value="300", ref=g_doc))
    path = append_feedback(settings.lake, verdict(water, "right", w_value, w_unit, w_doc))
    assert path == feedback_set_path(settings.lake)
    assert cli_main(["eval", "--config", "a", "--questions", "nope", *args]) != 0
    assert "--questions nope: no question set nope" in capsys.readouterr().err
    assert cli_main(["eval", "--config", "a", "--questions", "feedback", *args]) != 0
    assert "no questions to answer" in capsys.readouterr().err  # no row reviewed yet: nothing counts

    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["reviewed"] = "yes" if row["question"] in (carbon, gpu) else "no"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    assert cli_main(["eval", "--config", "a", "--questions", "feedback", *args]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # two reviewed questions: carbon confirmed (the model says 4.3), gpu corrected to 300 (it says 400)
    assert scored["config"] == "a--feedback" and scored["value"] == pytest.approx(0.5)

    # A config naming the set scores on it as its own questions, with no --questions.
    data = json.loads((settings.lake.root / "configs" / "a.json").read_text())
    (settings.lake.root / "configs" / "fb.json").write_text(json.dumps({**data, "questions": "feedback"}))
    assert cli_main(["eval", "--config", "fb", *args]) == 0
    own = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert own["config"] == "fb" and own["value"] == pytest.approx(0.5)
