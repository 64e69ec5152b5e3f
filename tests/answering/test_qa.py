"""Answering pipeline: configs, reuse across edits, planner, reference-constrained replies,
retries — through real Dagster materializations and a real OpenAI-compatible server."""

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from dagster import RunsFilter

import kohaku_rag
from kohaku_assets.cli import main as cli_main
from kohaku_assets.instance import instance_for
from kohaku_assets.runner import resources_for, run_config, run_ensemble
from kohaku_assets.sensors import configs_sensor, ensemble_specs_sensor
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.answer import answer_question
from kohaku_rag.answering.planner import parse_plan, plan_queries
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answering.reply import parse_reply
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import Question
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.retriever import open_retriever
from tests.support.chat_server import ChatServer, Fault
from tests.support.qa_server import response_schema as _schema
from tests.support.qa_server import true_false_case

# The cursor of a folder sensor turned on while the folder was empty (kohaku_assets.sensors.FolderCursor).
ON_EARLIER = json.dumps({"versions": {}, "started": None})


def write_config(settings, name, server, questions, retrieval=None, generation=None, voting=None):
    folder = settings.lake.root / "configs"
    folder.mkdir(exist_ok=True)
    llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
    data = {
        "questions": str(questions),
        "retrieval": {"use_planner": True, "planner_max_queries": 2, **(retrieval or {})},
        "generation": {"llm": llm, **(generation or {})},
        "voting": {"runs": 2, **(voting or {})},
    }
    (folder / f"{name}.json").write_text(json.dumps(data))
    return load_qa_config(folder / f"{name}.json")


def mtimes(settings, cfg):
    keys = st.keys_for(settings.lake, cfg)
    paths = [
        st.retrieval_path(settings.lake, keys.retrieval),
        st.ensemble_path(settings.lake, keys.ensemble),
        *(st.run_path(settings.lake, keys.prediction, r) for r in range(cfg.voting.runs)),
    ]
    return {str(p): p.stat().st_mtime_ns for p in paths}


def test_new_config_is_the_only_one_computed(env):
    settings, server, questions = env
    from dagster import build_sensor_context

    cfg_a = write_config(settings, "a", server, questions)
    instance = instance_for(settings.lake.root)
    # A sensor on since before the files came (one turned on now would only record them).
    first = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=ON_EARLIER)
    )
    # The lake registered `default` (its file written from the defaults) when it was created.
    assert [r.partition_key for r in first.run_requests] == ["a", "default"]
    assert first.dynamic_partitions_requests[0].partition_keys == ["a"]
    report = run_config(settings, "a")
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)
    assert report.metadata["scores"]["per_type_accuracy"] == {"number": 1.0}
    assert report.metadata["scores"]["worst"].startswith("| id | score |")
    submitted = (settings.lake.root / "qa" / "submissions" / "a.csv").read_text().splitlines()
    assert report.metadata["submission"]["rows"] == 3 and len(submitted) == 4
    assert submitted[0] == "id,question,answer,answer_value,answer_unit,ref_id,ref_url,supporting_materials,explanation"
    before, calls = mtimes(settings, cfg_a), len(server.requests)
    assert server.kinds() == {"planner": 3, "answer": 6}  # 3 questions; 2 runs each

    cfg_b = write_config(settings, "b", server, questions, retrieval={"top_k_final": 2})
    second = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=first.cursor)
    )
    assert [r.partition_key for r in second.run_requests] == ["b"]
    assert second.dynamic_partitions_requests[0].partition_keys == ["b"]
    report_b = run_config(settings, "b")
    assert not report_b.metadata["retrievals"]["reused"] and not report_b.metadata["predictions"]["reused"]
    assert mtimes(settings, cfg_a) == before  # nothing of config a was rewritten
    # b's answers only: its planner prompts equal a's, so they come from the response cache
    assert server.kinds() == {"planner": 3, "answer": 12} and len(server.requests) - calls == 6
    assert cfg_a.retrieval_hash != cfg_b.retrieval_hash

    board = duckdb.sql(
        f"select config, final, runs from '{st.leaderboard_path(settings.lake)}' order by config"
    ).fetchall()
    assert board == [("a", 1.0, 2), ("b", 1.0, 2)]
    # The leaderboard command the WattBot how-to gives (docs/how-to/wattbot-2025.md) runs as
    # written on this lake (with the tools the project installs: no `duckdb` command).
    howto = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "wattbot-2025.md").read_text()
    (command,) = [line for line in howto.splitlines() if "leaderboard.parquet" in line and "duckdb" in line]
    folder = settings.lake.root.parent / "howto"
    folder.mkdir()
    (folder / "data_lake").symlink_to(settings.lake.root)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    shown = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"│ a\s+│ config", shown.stdout) and re.search(r"│ b\s+│ config", shown.stdout), shown.stdout
    # `kohaku eval`'s runs are the location's jobs, per config partition, as the UI lists them.
    qa_runs = [r for r in instance.get_runs() if r.job_name != "index_document" and r.job_name != "assemble_indexes"]
    assert sorted((r.job_name, r.tags.get("dagster/partition", "")) for r in qa_runs) == [
        ("answer_config", "a"),
        ("answer_config", "b"),
        ("update_leaderboard", ""),
        ("update_leaderboard", ""),
    ]
    assert {r.remote_job_origin.location_name for r in qa_runs} == {"kohaku-lake"}
    (settings.lake.root / "configs" / "b.json").unlink()
    third = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=second.cursor)
    )
    deleted = [r for r in third.dynamic_partitions_requests if type(r).__name__ == "DeleteDynamicPartitionsRequest"]
    assert deleted[0].partition_keys == ["b"] and not third.run_requests


def test_temperature_edit_reuses_retrievals(env):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions)
    run_config(settings, "a", leaderboard_too=False)
    retrieval_file = st.retrieval_path(settings.lake, st.keys_for(settings.lake, cfg).retrieval)
    stamp, kinds = retrieval_file.stat().st_mtime_ns, server.kinds()

    edited = write_config(settings, "a", server, questions, generation={"temperature": 0.9})
    assert edited.retrieval_hash == cfg.retrieval_hash and edited.generation_hash != cfg.generation_hash
    report = run_config(settings, "a", leaderboard_too=False)
    assert report.metadata["retrievals"]["reused"] is True
    assert report.metadata["predictions"]["reused"] is False
    assert retrieval_file.stat().st_mtime_ns == stamp
    assert server.kinds() == {"planner": kinds["planner"], "answer": kinds["answer"] + 6}  # no re-planning
    assert all(r.body["temperature"] == 0.9 for r in server.requests[-6:])


def test_http_backend_answers_questions_concurrently(env):
    """max_concurrent bounds the requests in flight across questions, and is reached."""
    settings, server, questions = env
    server.default_delay = 0.3
    llm = {
        "backend": "openai",
        "model": "scripted",
        "base_url": server.base_url,
        "api_key_env": None,
        "max_concurrent": 3,
    }
    (settings.lake.root / "configs").mkdir(exist_ok=True)
    (settings.lake.root / "configs" / "wide.json").write_text(
        json.dumps({"questions": str(questions), "generation": {"llm": llm}, "voting": {"runs": 1}})
    )
    report = run_config(settings, "wide", leaderboard_too=False)
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)  # order and answers kept
    assert server.max_in_flight == 3  # 3 questions at once, never more than max_concurrent


def test_vote_mode_edit_reuses_predictions(env):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions, voting={"mode": "answer_priority"})
    run_config(settings, "a", leaderboard_too=False)
    keys = st.keys_for(settings.lake, cfg)
    runs = [st.run_path(settings.lake, keys.prediction, r) for r in range(2)]
    stamps, calls = [p.stat().st_mtime_ns for p in runs], len(server.requests)

    edited = write_config(settings, "a", server, questions, voting={"mode": "union"})
    assert edited.generation_hash == cfg.generation_hash and edited.voting_hash != cfg.voting_hash
    report = run_config(settings, "a", leaderboard_too=False)
    assert report.metadata["predictions"]["reused"] is True and report.metadata["ensembles"]["reused"] is False
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    assert len(server.requests) == calls  # the LLM was not asked anything
    rows = pq.read_table(runs[0]).to_pylist()
    assert {r["id"] for r in rows} == {"q1", "q2", "q3"} and all(r["attempts"] == 1 for r in rows)

    # more runs: only the new run is computed, the stored ones stay
    write_config(settings, "a", server, questions, voting={"mode": "union", "runs": 3})
    report = run_config(settings, "a", leaderboard_too=False)
    assert report.metadata["predictions"]["computed_runs"] == [2]
    assert [p.stat().st_mtime_ns for p in runs] == stamps


def test_planner_keeps_question_and_falls_back_on_malformed_output(env):
    _, server, _ = env
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=1, backoff_base=0.01)
    question = "How many watts did the A100 GPU draw?"
    plan = plan_queries(question, chat, max_queries=3)
    assert plan.queries == (question, "draw? measurement") and not plan.fallback

    prompt = server.requests[-1].key
    server.script(prompt, Fault(content='{"queries": ["unterminated'), Fault(content="no json at all"))
    broken = plan_queries(question, chat, max_queries=3)
    assert broken.queries == (question,) and broken.fallback
    assert parse_plan(question, '{"queries": "not a list"}', 3) == ((question,), True)
    assert parse_plan(question, '{"queries": ["a b c", "A B C", "x y", "z w"]}', 3) == (
        (question, "a b c", "x y"),
        False,
    )


def test_ref_ids_are_limited_to_context_documents(env):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions, retrieval={"use_planner": False, "top_k_final": 2})
    retriever = open_retriever(settings.lake, settings.index_config())
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
    q = Question("q2", "How many watts did the A100 GPU draw?", "W")
    server.cite_outside = True  # a server ignoring the schema cites a document it was not shown
    pred = answer_question(q, retriever, chat, cfg)
    body = server.requests[-1].body
    shown = re.findall(r"\[ref_id=([^\]]+)\]", body["messages"][-1]["content"])
    assert sorted(_schema(body)["properties"]["ref_id"]["items"]["enum"]) == sorted(set(shown))
    assert pred.answer.ref_id == ("gpu",) and pred.answer.answer_value == "400"
    assert all(c.doc_id == "gpu" for c in pred.cited()) and pred.cited()
    assert all("400" in c.text for c in pred.cited())  # the snippets stating the value, not the whole document
    stated = dataclasses.replace(
        pred, context=(*pred.context, dataclasses.replace(pred.context[0], node_id="gpu:x", text="It drew 1400 W."))
    )
    assert "gpu:x" not in [c.node_id for c in stated.cited()]
    assert (
        parse_reply('{"answer_value": "3", "ref_id": ["water"], "is_blank": false, "answer": "3"}', q, ["gpu"]).ref_id
        == ()
    )


def test_is_blank_retry_deepens_k(env):
    settings, server, questions = env
    cfg = write_config(
        settings,
        "a",
        server,
        questions,
        retrieval={"use_planner": False, "top_k_final": 1, "budget_chars": 400},
        generation={"max_retries": 2},
        voting={"runs": 1},  # answer_question asks the config's runs: one run's attempts here
    )
    retriever = open_retriever(settings.lake, settings.index_config())
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
    question = "How many tCO2e did training emit?"
    server.blank_first[question] = 1
    pred = answer_question(Question("q1", question, "tCO2e"), retriever, chat, cfg)
    sent = [r.body["messages"][-1]["content"].count("[ref_id=") for r in server.requests[-2:]]
    assert sent == [1, 2]  # k, then k×2
    assert pred.attempts == 2 and pred.k_used == 2 and pred.answer.answer_value == "4.3"

    server.blank_first[question] = 5  # blank every time: stops after 1 + max_retries attempts
    pred = answer_question(Question("q1", question, "tCO2e"), retriever, chat, cfg)
    assert pred.attempts == 3 and pred.answer.is_blank


def test_cli_eval_and_ask(env, capsys):
    settings, server, questions = env
    write_config(settings, "fake", server, questions)
    other = questions.parent / "subset.csv"
    other.write_text("\n".join(questions.read_text().splitlines()[:2]) + "\n")
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    out = questions.parent / "submission.csv"
    assert cli_main(["eval", "--questions", str(other), "--config", "fake", "--out", str(out), "--json", *args]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["final"] == pytest.approx(1.0) and summary["config"] == "fake--subset"
    submitted = load_questions(out)
    assert [q.id for q in submitted] == ["q1"] and submitted[0].gold.answer_value == "4.3"
    assert submitted[0].gold.ref_id == ("carbon",)
    run_out = questions.parent / "run1.csv"
    assert (
        cli_main(["eval", "--questions", str(other), "--config", "fake", "--run", "1", "--out", str(run_out), *args])
        == 0
    )
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["run"] == 1 and last["final"] == pytest.approx(1.0) and run_out.exists()

    assert (
        cli_main(["ask", "How many watts did the A100 GPU draw?", "--config", "fake", "--unit", "W", "--json", *args])
        == 0
    )
    row = json.loads(capsys.readouterr().out)
    assert row["answer_value"] == "400" and row["citations"][0]["doc_id"] == "gpu"
    assert row["citations"][0]["node_id"].startswith("gpu:")


def test_cross_config_ensemble_pools_the_members_stored_runs(env):
    settings, server, questions = env
    from dagster import build_sensor_context

    server.wrong_at_temperature = 0.9
    write_config(settings, "good", server, questions, voting={"runs": 2})
    write_config(settings, "hot", server, questions, generation={"temperature": 0.9}, voting={"runs": 3})
    for name in ("good", "hot"):
        run_config(settings, name, leaderboard_too=False)
    calls = len(server.requests)
    folder = settings.lake.root / "configs" / "ensembles"
    folder.mkdir()
    (folder / "runs.toml").write_text('configs = ["good", "hot"]\n')
    (folder / "heads.toml").write_text('configs = ["good", "hot"]\npool = "ensembles"\n')
    sensed = ensemble_specs_sensor(
        build_sensor_context(
            resources=resources_for(settings), instance=instance_for(settings.lake.root), cursor=ON_EARLIER
        )
    )
    assert sorted(r.partition_key for r in sensed.run_requests) == ["heads", "runs"]

    pooled = run_ensemble(settings, "runs")  # 2 right runs against 3 wrong ones: the wrong answer wins
    assert pooled["voters"] == 5 and pooled["value"] == pytest.approx(0.0) and not pooled["reused"]
    heads = run_ensemble(settings, "heads")  # one vote per config: a tie, which the first config wins
    assert heads["voters"] == 2 and heads["value"] == pytest.approx(1.0)
    assert len(server.requests) == calls  # voting reads stored runs; no LLM call
    assert run_ensemble(settings, "runs")["reused"]
    votes = instance_for(settings.lake.root).get_runs(filters=RunsFilter(job_name="vote_ensemble"))
    assert sorted(r.tags["dagster/partition"] for r in votes) == ["heads", "runs", "runs"]
    board = duckdb.sql(
        f"select config, kind, runs, final from '{st.leaderboard_path(settings.lake)}' "
        "where kind = 'ensemble' order by config"
    ).fetchall()
    assert [(c, k, r) for c, k, r, _ in board] == [("heads", "ensemble", 2), ("runs", "ensemble", 5)]

    # A member with nothing stored fails the partition, naming the command that computes it.
    write_config(settings, "cold", server, questions, generation={"temperature": 0.5})
    (folder / "missing.toml").write_text('configs = ["good", "cold"]\n')
    with pytest.raises(RuntimeError, match=r"config cold has no stored predictions .*kohaku eval --config cold"):
        run_ensemble(settings, "missing")
    # The CLI computes the missing members first, then votes.
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    assert cli_main(["eval", "--questions", str(questions), "--config", "missing", "--json", *args]) == 0


def test_ensemble_spec_files_are_checked(tmp_path):
    from kohaku_rag.answering.ensemble_spec import load_ensemble_spec

    bad = {
        "one.toml": 'configs = ["a"]',
        "twice.toml": 'configs = ["a", "a"]',
        "mode.toml": 'configs = ["a", "b"]\nmode = "x"',
        "key.toml": 'configs = ["a", "b"]\nrunz = 3',
        "pool.toml": 'configs = ["a", "b"]\npool = "all"',
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=name):
            load_ensemble_spec(tmp_path / name)
    (tmp_path / "ok.toml").write_text('configs = ["a", "b"]')
    assert load_ensemble_spec(tmp_path / "ok.toml").configs == ("a", "b")


def test_replies_with_raw_control_characters_are_read():
    q = Question("q1", "How many tCO2e did training emit?", "tCO2e")
    reply = '{"explanation": "line one\nline\ttwo", "answer": "4.3", "answer_value": "4.3", "answer_unit": "tCO2e", "ref_id": ["carbon"], "is_blank": false}'
    assert "\n" in reply
    answer = parse_reply(reply, q, ["carbon"])
    assert answer.answer_value == "4.3" and answer.ref_id == ("carbon",) and "line" in answer.explanation


def test_replies_keep_the_magnitude_their_words_state():
    q = Question("q1", "How much water did training consume?", "liters")
    reply = (
        '{"explanation": "a total of 5.4 million liters", "answer": "5.4", "answer_value": "5.4", '
        '"answer_unit": "liters", "ref_id": ["water"], "is_blank": false}'
    )
    assert parse_reply(reply, q, ["water"]).answer_value == "5400000"


def test_a_reply_that_copies_its_rules_is_read_as_saying_nothing():
    """A reply that copies the schema's field rules ("the answer in a few words", "only the
    number in percent (no unit, no commas)") says nothing: neither is kept as the answer or
    its value."""
    q = Question("q1", "What percentage of H100 GPUs used recycled metals?", "percent")
    copied_value = (
        '{"explanation": "No figure is given.", "answer": "the answer in a few words", '
        '"answer_value": "only the number in percent (no unit, no commas)", "ref_id": ["gpu"], "is_blank": false}'
    )
    assert parse_reply(copied_value, q, ["gpu"]).is_blank
    copied_words = (
        '{"explanation": "a few words quoting the fact from the context", "answer": "The answer in a few words.", '
        '"answer_value": "6", "ref_id": ["gpu"], "is_blank": false}'
    )
    answer = parse_reply(copied_words, q, ["gpu"])
    # the words are rebuilt from the value, the explanation left out
    assert (answer.answer_value, answer.answer, answer.explanation) == ("6", "6 percent", "is_blank")
    stated = '{"explanation": "6% of them did", "answer": "6 percent", "answer_value": "6", "ref_id": ["gpu"]}'
    assert parse_reply(stated, q, ["gpu"]).answer == "6 percent"


def test_context_overflow_shrinks_the_context(env):
    settings, server, questions = env
    cfg = write_config(
        settings,
        "a",
        server,
        questions,
        retrieval={"use_planner": False, "top_k_final": 6, "budget_chars": 4000},
        voting={"runs": 1},
    )
    retriever = open_retriever(settings.lake, settings.index_config())
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
    q = Question("q1", "How many tCO2e did training emit?", "tCO2e")
    full = len(retriever.search([q.question], cfg.retrieval.search))
    server.context_limit = 150  # words: the full context does not fit, a smaller one does
    pred = answer_question(q, retriever, chat, cfg)
    assert pred.k_used < full and pred.answer.answer_value == "4.3" and pred.attempts == 1
    assert [r.status for r in server.requests][-1] == 200 and 400 in [r.status for r in server.requests]


def test_config_files_and_part_hashes(tmp_path):
    from kohaku_rag.answering.config_folder import config_files, load_configs
    from kohaku_rag.answering.qa_config import QAConfig
    from kohaku_rag.answering.qa_config_file import dump_toml

    (tmp_path / "base.toml").write_text(dump_toml(QAConfig(questions="q.csv")))
    (tmp_path / "hot.toml").write_text(
        dump_toml(QAConfig(questions="q.csv")).replace("temperature = 0.3", "temperature = 0.8")
    )
    (tmp_path / "vote.json").write_text(json.dumps({"questions": "q.csv", "voting": {"runs": 5, "mode": "union"}}))
    (tmp_path / "notes.txt").write_text("ignored")
    cfgs = load_configs(tmp_path)
    assert sorted(cfgs) == ["base", "hot", "vote"]
    base, hot, vote = cfgs["base"], cfgs["hot"], cfgs["vote"]
    # TOML round trip, defaults written out; a relative question path is relative to the file
    assert base == QAConfig(questions=str(tmp_path / "q.csv"))
    assert base.retrieval.search.dense_kinds == ("paragraph",)
    assert hot.retrieval_hash == base.retrieval_hash and hot.generation_hash != base.generation_hash
    assert vote.generation_hash == base.generation_hash and vote.voting_hash != base.voting_hash
    # KohakuRAG's key names are aliases of ours
    (tmp_path / "paper.json").write_text(
        json.dumps({"questions": "q.csv", "retrieval": {"rerank_strategy": "frequency", "retrieval_threshold": 0.2}})
    )
    paper = load_configs(tmp_path)["paper"].retrieval.search
    assert (paper.rerank, paper.threshold) == ("frequency", 0.2)
    (tmp_path / "paper.json").unlink()
    (tmp_path / "bad.json").write_text(json.dumps({"retrieval": {"top_kk": 3}}))
    with pytest.raises(ValueError, match=r"bad\.json.*top_kk"):
        load_configs(tmp_path)
    (tmp_path / "bad.json").unlink()
    (tmp_path / "base.json").write_text("{}")
    with pytest.raises(ValueError, match="defined twice"):
        config_files(tmp_path)


def test_snippets_can_be_headed_by_document_and_section(env):
    import dataclasses

    from kohaku_rag.answering.prompt import build_messages
    from kohaku_rag.document.tree import Node, NodeKind
    from kohaku_rag.retrieval.context import ContextItem, section_heading

    settings, _server, _questions = env
    retriever = open_retriever(settings.lake, settings.index_config())
    q = Question("q2", "How many watts did the A100 GPU draw?", "W")
    plain = dataclasses.replace(load_qa_config_defaults().retrieval.search, mark_sentences=0)
    (top, *_rest) = retriever.search([q.question], plain)
    assert (top.doc_id, top.doc_title, top.section) == ("gpu", "GPU power", "1 Measurements")
    headed = build_messages(q, [top], titles=True)[1].content
    assert "[ref_id=gpu] (GPU power › 1 Measurements) The A100 GPU drew 400 W" in headed
    assert "GPU power ›" not in build_messages(q, [top])[1].content
    # Page-per-section payloads have no heading worth showing; flat chunks have no titles.
    page = Node("d:sec3", "d", "d", NodeKind.SECTION, 3, "Page 3", "")
    assert section_heading(page) == "" and section_heading(None) == ""
    chunk = ContextItem("d", "d:c1", "chunk", None, 1.0, "text")
    assert "[ref_id=d] text" in build_messages(q, [chunk], titles=True)[1].content


def load_qa_config_defaults():
    from kohaku_rag.answering.qa_config import QAConfig

    return QAConfig(questions="unused.csv")


def test_evidence_sentences_are_marked_in_the_prompt(env):
    import dataclasses

    from kohaku_rag.answering.prompt import build_messages

    settings, _server, _questions = env
    retriever = open_retriever(settings.lake, settings.index_config())
    q = Question("q2", "How many watts did the A100 GPU draw?", "W")
    cfg = dataclasses.replace(load_qa_config_defaults().retrieval.search, mark_sentences=1)
    items = retriever.search([q.question], cfg)
    marked = [m for i in items for m in i.marks]
    assert marked == ["The A100 GPU drew 400 W on average while training the model for 12 hours."]
    prompt = build_messages(q, items)[1].content
    assert "**The A100 GPU drew 400 W on average while training the model for 12 hours.**" in prompt
    assert "Sentences in **bold**" in prompt
    assert all(not i.marks for i in retriever.search([q.question], dataclasses.replace(cfg, mark_sentences=0)))


class _FixedSearcher:
    def __init__(self, items):
        self.items = items

    def search(self, queries, cfg):
        return list(self.items)


def test_top_figures_are_sent_as_images_to_a_vision_model(env):
    import base64
    import io

    from PIL import Image

    from kohaku_rag.retrieval.context import ContextItem

    settings, server, questions = env
    cfg = write_config(settings, "vision", server, questions, retrieval={"use_planner": False}, generation={"img_k": 1})
    pngs = {}
    for name, colour in (("fig1", "red"), ("fig2", "blue")):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
        pngs[name] = buf.getvalue()
    items = [
        ContextItem("carbon", "carbon:sec1:p2", "paragraph", 1, 1.0, "Training emitted 4.3 tCO2e in total."),
        ContextItem(
            "carbon", "carbon:sec1:p3", "paragraph", 1, 0.9, "Figure 1: emissions by year.", "image", media_hash="fig1"
        ),
        ContextItem("carbon", "carbon:sec1:p4", "paragraph", 1, 0.8, "Figure 2: grid mix.", "image", media_hash="fig2"),
    ]
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
    q = Question("q1", "How many tCO2e did training emit?", "tCO2e")
    pred = answer_question(q, _FixedSearcher(items), chat, cfg, images=pngs.__getitem__)
    assert pred.answer.answer_value == "4.3"
    content = server.requests[-1].body["messages"][-1]["content"]
    urls = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert len(urls) == 1 and base64.b64decode(urls[0].split(",", 1)[1]) == pngs["fig1"]  # the top figure only
    assert "Referenced media" in content[0]["text"]

    with pytest.raises(ValueError, match="bundled model reads text only"):
        from kohaku_rag.answering.qa_config import GenerationPart

        GenerationPart(img_k=2)


def test_true_false_replies_quote_a_context_sentence_first():
    from llama_cpp.llama_grammar import LlamaGrammar

    from kohaku_rag.answering.prompt import answer_request, evidence_sentences
    from kohaku_rag.answering.qa_config import GenerationPart
    from kohaku_rag.retrieval.context import ContextItem

    text = 'The report says "no reporting of inference energy" is required. Short one. The A100 drew 400 W in training.'
    items = [ContextItem("gpu", "gpu:sec0:p0", "paragraph", 1, 1.0, text)]
    assert evidence_sentences(items) == [
        "The report says 'no reporting of inference energy' is required.",
        "The A100 drew 400 W in training.",
    ]
    statement = Question("q1", "True or False: the A100 drew 400 W.", "is_blank")
    schema = answer_request(statement, items, GenerationPart(), seed=0).schema
    # Written in this order: quote, then answer; no forced unit just before is_blank.
    assert list(schema["properties"]) == ["evidence", "explanation", "answer", "answer_value", "ref_id", "is_blank"]
    assert schema["properties"]["evidence"]["enum"] == evidence_sentences(items)
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)  # the embedded backend can decode it
    numeric = Question("q2", "How many watts did the A100 draw?", "W")
    assert "evidence" not in answer_request(numeric, items, GenerationPart(), seed=0).schema["properties"]
    assert (
        "evidence" in answer_request(numeric, items, GenerationPart(quote_evidence="all"), seed=0).schema["properties"]
    )
    assert (
        "evidence"
        not in answer_request(statement, items, GenerationPart(quote_evidence="off"), seed=0).schema["properties"]
    )
    reply = (
        '{"evidence": "The A100 drew 400 W in training.", "explanation": "it drew 400 W", "answer": "True", '
        '"answer_value": "1", "answer_unit": "is_blank", "ref_id": ["gpu"], "is_blank": false}'
    )
    assert parse_reply(reply, statement, ["gpu"]).supporting_materials == "The A100 drew 400 W in training."
    with pytest.raises(ValueError, match="quote_evidence"):
        GenerationPart(quote_evidence="sometimes")


def test_true_false_verdict_comes_from_the_models_probabilities(caplog):
    import math

    from kohaku_rag.answering.answer import answer_runs
    from kohaku_rag.answering.prompt import answer_request
    from kohaku_rag.answering.qa_config import GenerationPart, QAConfig, RetrievalPart
    from kohaku_rag.answering.verdict import apply_verdict, statement_of, verdict_logodds, verdict_request
    from kohaku_rag.answers.records import Answer

    assert (
        statement_of(Question("q", "True or False: The AI Act requires it.", "is_blank")) == "The AI Act requires it."
    )
    assert statement_of(Question("q", "true/false - GPUs are fast", "is_blank")) == "GPUs are fast"
    # Spellings of a word pool; a word outside the list counts as likely as the least likely listed.
    assert verdict_logodds([("True", -1.0), (" true", -1.0), ("False", -2.0)]) == pytest.approx(math.log(2) + 1.0)
    assert verdict_logodds([("True", -0.1), ("Yes", -3.0)]) == pytest.approx(2.9)
    assert verdict_logodds([("Yes", -0.1)]) is None
    said_true = Answer("True", "1", "is_blank", ("gpu",), "it drew 400 W")
    assert apply_verdict(said_true, 0.4, margin=1.5).answer_value == "0"
    assert apply_verdict(said_true, 2.0, margin=1.5) == dataclasses.replace(said_true, answer="True")
    assert apply_verdict(Answer.blank("is_blank"), 5.0, margin=1.5).is_blank

    item, statement, reply = true_false_case()
    with ChatServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
        for verdict in ("probability", "reply"):
            gen = GenerationPart(true_false_verdict=verdict)
            cfg = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False), generation=gen)
            answer_key = answer_request(statement, [item], gen, seed=0).messages[-1].content
            server.script(answer_key, Fault(content=reply), Fault(content=reply))
            if verdict == "probability":
                server.script(
                    verdict_request(statement, [item], gen).messages[-1].content,
                    Fault(content="True", top_logprobs=(("True", -0.6), ("False", -0.8))),
                )
            runs = answer_runs(statement, [statement.question], _FixedSearcher([item]), chat, cfg, [0, 1])
            if verdict == "probability":  # log-odds 0.2 < margin 1.5: the statement is false
                assert [r.answer.answer_value for r in runs] == ["0", "0"]
                assert [r.verdict_logodds for r in runs] == [pytest.approx(0.2)] * 2
                assert [r.llm_calls for r in runs] == [2, 1]  # one verdict call for the shared context
                assert st.prediction_from_row(runs[0].as_row()).verdict_logodds == pytest.approx(0.2)
            else:
                assert [r.answer.answer_value for r in runs] == ["1", "1"] and runs[0].verdict_logodds is None
        # A server that returns no logprobs: the reply's verdict stands, and the log says what to set.
        gen = GenerationPart()
        cfg = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False), generation=gen)
        server.script(answer_request(statement, [item], gen, seed=0).messages[-1].content, Fault(content=reply))
        server.script(verdict_request(statement, [item], gen).messages[-1].content, Fault(omit_logprobs=True))
        with caplog.at_level("WARNING", logger="kohaku_rag.answer"):
            (run,) = answer_runs(statement, [statement.question], _FixedSearcher([item]), chat, cfg, [0])
        assert run.answer.answer_value == "1" and run.verdict_logodds is None and not run.error
        assert 'true_false_verdict = "reply"' in caplog.text
    with pytest.raises(ValueError, match="true_false_verdict"):
        GenerationPart(true_false_verdict="coin")


def test_explain_shows_retrieval_prompt_reply_and_vote(env, capsys):
    settings, server, questions = env
    write_config(settings, "a", server, questions)
    run_config(settings, "a")
    debug = st.read_debug(settings.lake, st.keys_for(settings.lake, load_qa_config_named(settings, "a")).prediction, 0)
    assert {row["id"] for row in debug} == {"q1", "q2", "q3"} and all(row["prompt"] and row["reply"] for row in debug)
    args = ["--lake", str(settings.lake.root)]
    assert cli_main(["explain", "q1", "--config", "a", *args]) == 0
    out = capsys.readouterr().out
    for part in (
        "── retrieval",
        "query 0:",
        "attempt 1: answer prompt",
        "[user]\nContext:",
        "raw reply",
        "── vote",
        "voted:",
    ):
        assert part in out
    assert '"total": 1.0' in out  # the score row
    assert cli_main(["explain", "nope", "--config", "a", *args]) == 2
    assert "question 'nope' is not in" in capsys.readouterr().err


def load_qa_config_named(settings, name):
    return load_qa_config(settings.lake.root / "configs" / f"{name}.json")


def test_planner_model_writes_the_queries(env):
    settings, server, questions = env
    planner = {"backend": "openai", "model": "planner-llm", "base_url": server.base_url, "api_key_env": None}
    cfg = write_config(settings, "p", server, questions, retrieval={"planner_model": planner})
    assert cfg.planner_llm.model == "planner-llm" and cfg.generation.llm.model == "scripted"
    run_config(settings, "p", leaderboard_too=False)
    models = {r.body["model"]: "ref_id" in _schema(r.body)["properties"] for r in server.requests}
    assert models == {"planner-llm": False, "scripted": True}  # planner calls vs answer calls
    # another planner model is another retrieval; the answering LLM alone is not
    other = dataclasses.replace(cfg, retrieval=dataclasses.replace(cfg.retrieval, planner_model=None))
    assert other.retrieval_hash != cfg.retrieval_hash


def test_default_questions_ship_with_the_package(monkeypatch) -> None:
    # A config without `questions` names the sample corpus's labelled questions, shipped
    # inside the package (never a file beside the clone, which a user's clone lacks).
    from kohaku_rag.samples import SAMPLES

    monkeypatch.delenv("KOHAKU_QUESTIONS", raising=False)
    path = Path(QAConfig().questions)
    package = Path(kohaku_rag.__file__).resolve().parent
    assert path.is_file() and path.is_relative_to(package), path
    questions = load_questions(path)
    assert len(questions) >= 5
    samples = {s.doc_id for s in SAMPLES}
    assert all(q.gold and q.gold.ref_id and set(q.gold.ref_id) <= samples for q in questions)
    monkeypatch.setenv("KOHAKU_QUESTIONS", "/elsewhere/q.csv")
    assert QAConfig().questions == "/elsewhere/q.csv"
