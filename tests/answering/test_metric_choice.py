"""`[scoring] metric` in a QA config: `kohaku eval`, the stored score table and the
leaderboard under the 2026 metric, and the same stored answers re-scored under the other
metric with `kohaku score` (no LLM). Real Dagster runs against the fake QA model server."""

import json

import duckdb
import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import dump_toml, load_qa_config


def _config(settings, name, server, questions, metric):
    folder = settings.lake.root / "configs"
    folder.mkdir(exist_ok=True)
    llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
    data = {
        "questions": str(questions),
        "retrieval": {"planner_max_queries": 2},
        "generation": {"llm": llm},
        "voting": {"runs": 1},
        "scoring": {"metric": metric},
    }
    (folder / f"{name}.json").write_text(json.dumps(data))
    return load_qa_config(folder / f"{name}.json")


def _flagged(questions):
    """The fixture's question file with 2026 flag columns, its third question made
    unanswerable in gold (the fake model still answers it: a false answer)."""
    lines = questions.read_text().splitlines()
    out = [lines[0] + ",Table,is_NA", lines[1] + ",1,0", lines[2] + ",0,0"]
    q3 = lines[3].split(",")
    out.append(",".join([*q3[:3], "is_blank", q3[4], "is_blank", "0", "1"]))
    flagged = questions.parent / "flagged.csv"
    flagged.write_text("\n".join(out) + "\n")
    return flagged


def test_the_2026_metric_through_eval_the_store_and_the_leaderboard(env, capsys):
    settings, server, questions = env
    flagged = _flagged(questions)
    cfg = _config(settings, "m26", server, flagged, "wattbot2026")
    assert cfg.scoring.metric == "wattbot2026"
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    out = flagged.parent / "m26.csv"
    assert cli_main(["eval", "--questions", str(flagged), "--config", "m26", "--out", str(out), "--json", *args]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    # q1, q2 right; q3 (gold is_blank) answered 0.18 citing water: value 0, ref 0, abstention 0.
    # value 2/3, ref 2/3, abstention (1+1+0)/3 over every question, as the official scorer:
    # 0.75·2/3 + 0.20·2/3 + 0.05·2/3 = 0.6667
    assert (summary["metric"], summary["final"], summary["na"]) == ("wattbot2026", 0.6667, 0.6667)
    assert summary["per_flag"] == {
        "Table": {"n": 1, "wrong": 0, "wrong_rate": 0.0},
        "is_NA": {"n": 1, "wrong": 1, "wrong_rate": 1.0},
    }
    assert summary["false_answer_rate"] == 1.0
    assert "wattbot2026 score 0.6667" in captured.err and "Table 0/1" in captured.err

    keys = st.keys_for(settings.lake, cfg)
    stored = st.score_path(settings.lake, st.score_key(keys.ensemble, "wattbot2026"))
    assert stored.exists() and not st.score_path(settings.lake, keys.ensemble).exists()
    table = duckdb.sql(f"select id, metric, unanswerable, flags from '{stored}' order by id").fetchall()
    assert table == [
        ("q1", "wattbot2026", False, ["Table"]),
        ("q2", "wattbot2026", False, []),
        ("q3", "wattbot2026", True, ["is_NA"]),
    ]
    board = duckdb.sql(
        f"select config, metric, final, ref_precision, false_answer_rate, per_flag "
        f"from '{st.leaderboard_path(settings.lake)}' where config = 'm26'"
    ).fetchall()
    # cited q1 carbon, q2 gpu, q3 water: 2 of 3 cited ids are gold ids
    assert board[0][:5] == ("m26", "wattbot2026", pytest.approx(2 / 3, abs=1e-4), pytest.approx(2 / 3), 1.0)
    assert json.loads(board[0][5])["is_NA"]["wrong"] == 1

    # The same stored answers under both metrics, no LLM: `kohaku score` on eval's submission.
    calls = len(server.requests)
    finals = {}
    for metric in ("wattbot2026", "wattbot2025"):
        assert cli_main(["score", "--questions", str(flagged), "--submission", str(out), "--metric", metric,
                         "--json"]) == 0  # fmt: skip
        finals[metric] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["final"]
    # 2025: q1, q2 score 1; q3 value 0, Jaccard 0 (gold uncited), NA 0: 2/3
    assert finals == {"wattbot2026": 0.6667, "wattbot2025": 0.6667}
    # ... or `kohaku eval --metric`: every table reused, the answers scored under the other metric.
    assert cli_main(["eval", "--questions", str(flagged), "--config", "m26", "--metric", "wattbot2025",
                     "--out", str(out), "--json", *args]) == 0  # fmt: skip
    other = capsys.readouterr()
    assert json.loads(other.out.strip().splitlines()[-1])["final"] == 0.6667
    assert f"--submission {out} --metric wattbot2026" in other.err
    assert len(server.requests) == calls


def test_scoring_metric_is_checked_and_written_back(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[scoring]\nmetric = "wattbot2027"\n')
    with pytest.raises(ValueError, match=r"line 2: scoring.metric: \"wattbot2027\" is not one of the allowed values"):
        load_qa_config(bad)
    cfg = QAConfig(questions=str(tmp_path / "q.csv"))
    good = tmp_path / "good.toml"
    good.write_text(dump_toml(cfg).replace('metric = "wattbot2025"', 'metric = "wattbot2026"'))
    again = load_qa_config(good)
    assert again.scoring.metric == "wattbot2026"
    # Scoring decides no answer: every part hash stays the same.
    assert (again.retrieval_hash, again.generation_hash, again.voting_hash) == (
        cfg.retrieval_hash,
        cfg.generation_hash,
        cfg.voting_hash,
    )
