"""A failed LLM call is a failure, not an answer: an endpoint outage during `kohaku eval`
fails the step (non-zero exit) with "N of M questions failed", keeps the good rows, and the
next run asks only the failed questions; a genuine is_blank reply stays an answer."""

import json
import re

import pyarrow.parquet as pq
import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_assets.runner import RunFailed, run_config
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.api import Rag
from kohaku_rag.errors import BackendError
from tests.support.qa_server import true_false_case


def write_config(settings, name, server, questions, planner=False, runs=1, base_url=None):
    folder = settings.lake.root / "configs"
    folder.mkdir(exist_ok=True)
    # max_retries = 0: a 5xx fails the call at once, so the tests stay fast.
    url = base_url or server.base_url
    llm = {"backend": "openai", "model": "scripted", "base_url": url, "api_key_env": None, "max_retries": 0}
    data = {
        "questions": str(questions),
        "retrieval": {"use_planner": planner, "planner_max_queries": 2},
        "generation": {"llm": llm},
        "voting": {"runs": runs},
    }
    (folder / f"{name}.json").write_text(json.dumps(data))
    return load_qa_config(folder / f"{name}.json")


def answer_calls(server, since):
    return [r for r in server.requests[since:] if "Question:" in r.key and "search queries" not in r.key]


def run_rows(settings, cfg, run=0):
    path = st.run_path(settings.lake, st.keys_for(settings.lake, cfg).prediction, run)
    return {row["id"]: row for row in pq.read_table(path).to_pylist()}


def test_outage_fails_the_eval_and_the_rerun_asks_only_the_failed_questions(env, capsys):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions, runs=2)
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    server.outage = True
    code = cli_main(["eval", "--questions", str(questions), "--config", "a", "--json", *args])
    err = capsys.readouterr().err
    assert code != 0
    assert "predictions: 3 of 3 questions failed: RetriesExhausted: " in err and "re-run to retry them" in err
    # The failure is one line (the cost estimate before the run and the per-question lines
    # during it are progress, not the error).
    progress = re.compile(r"^(estimate:|retrieved \d+/\d+|answered \d+/\d+)")
    failure = [line for line in err.strip().splitlines() if not progress.match(line)]
    assert "HTTP 503" in err and len(failure) == 1
    rows = run_rows(settings, cfg)
    assert all(r["error"] and r["is_blank"] for r in rows.values())  # stored as failed, with the error
    keys = st.keys_for(settings.lake, cfg)
    assert not st.ensemble_path(settings.lake, keys.ensemble).exists()  # nothing voted from failures
    assert st.missing_runs(settings.lake, keys.prediction, 2) == [0, 1]

    server.outage = False
    since = len(server.requests)
    assert cli_main(["eval", "--questions", str(questions), "--config", "a", "--json", *args]) == 0
    out = capsys.readouterr()
    assert "predictions: computed" in out.err
    assert json.loads(out.out.strip().splitlines()[-1])["final"] == pytest.approx(1.0)
    assert len(answer_calls(server, since)) == 6  # 3 questions x 2 runs, nothing else
    assert not any(r["error"] for r in run_rows(settings, cfg).values())

    since = len(server.requests)  # a third run reuses everything
    assert cli_main(["eval", "--questions", str(questions), "--config", "a", "--json", *args]) == 0
    assert "predictions: reused" in capsys.readouterr().err and len(server.requests) == since


def test_partial_failure_keeps_the_good_rows_and_retries_only_the_rest(env):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions)
    server.fail_when = lambda key: "Question: How many watts" in key  # q2's answer calls fail
    with pytest.raises(RunFailed, match=r"predictions: 1 of 3 questions failed: .*HTTP 500.*re-run to retry them"):
        run_config(settings, "a", leaderboard_too=False)
    first = run_rows(settings, cfg)
    assert first["q2"]["error"] and not first["q1"]["error"] and first["q1"]["answer_value"] == "4.3"

    server.fail_when = None
    since = len(server.requests)
    report = run_config(settings, "a", leaderboard_too=False)
    calls = answer_calls(server, since)
    assert len(calls) == 1 and "Question: How many watts" in calls[0].key  # only the failed question
    assert report.metadata["predictions"]["recomputed_questions"] == 1
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)
    second = run_rows(settings, cfg)
    assert second["q1"] == first["q1"] and second["q2"]["answer_value"] == "400" and not second["q2"]["error"]


def test_runs_stored_with_failed_rows_are_repaired_and_voted_again(env):
    """A lake whose run holds a failed row (as older versions stored outages, as blanks)
    under an ensemble voted from it: the row is asked again and the vote redone."""
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions)
    run_config(settings, "a", leaderboard_too=False)
    path = st.run_path(settings.lake, st.keys_for(settings.lake, cfg).prediction, 0)
    rows = pq.read_table(path).to_pylist()
    rows[0].update(error="BackendError: gave up", is_blank=True, answer_value="is_blank")
    st.write_rows(rows, path)
    report = run_config(settings, "a", leaderboard_too=False)
    predictions = report.metadata["predictions"]
    # Asked again (its reply comes from the response cache: it was answered before).
    assert predictions["recomputed_questions"] == 1 and predictions["llm_cache_hits"] == 1
    assert report.metadata["ensembles"]["reused"] is False
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)


def test_a_genuine_blank_reply_stays_an_answer(env):
    settings, server, questions = env
    write_config(settings, "a", server, questions)
    server.blank_first["How many watts did the A100 GPU draw?"] = 99
    report = run_config(settings, "a", leaderboard_too=False)
    assert report.metadata["ensembles"]["blank"] == 1
    since = len(server.requests)
    again = run_config(settings, "a", leaderboard_too=False)
    assert again.metadata["predictions"]["reused"] is True and len(server.requests) == since


def test_planner_outage_fails_the_questions_instead_of_freezing_question_only_plans(env):
    settings, server, questions = env
    cfg = write_config(settings, "p", server, questions, planner=True)
    server.fail_when = lambda key: "search queries" in key and "How many watts" in key  # q2's plan fails
    with pytest.raises(
        RunFailed, match=r"predictions: 1 of 3 questions failed: retrieval failed: RetriesExhausted: .*re-run"
    ):
        run_config(settings, "p", leaderboard_too=False)
    path = st.retrieval_path(settings.lake, st.keys_for(settings.lake, cfg).retrieval)
    assert list(st.retrieval_errors(path)) == ["q2"] and sorted(st.read_retrievals(path)) == ["q1", "q3"]
    assert not run_rows(settings, cfg)["q1"]["error"] and run_rows(settings, cfg)["q2"]["error"]
    server.fail_when = None
    since = len(server.requests)
    report = run_config(settings, "p", leaderboard_too=False)
    assert report.metadata["retrievals"]["retrieved_questions"] == 1
    assert len(server.requests) - since == 2  # q2's plan and its answer, nothing else
    assert report.metadata["scores"]["final"] == pytest.approx(1.0)
    planned = st.read_retrievals(path)
    assert all(len(r.queries) == 2 for r in planned.values())  # the planner's query is there


def test_a_refused_planner_call_fails_the_retrieval_and_the_rerun_plans_again(env):
    """A 401 (any error that is not retried) from the planner is a failed call, not a plan
    of the question alone: the retrieval is stored as failed and planned again next run."""
    from kohaku_rag.answering.planner import plan_request
    from tests.support.chat_server import Fault

    settings, server, questions = env
    cfg = write_config(settings, "p", server, questions, planner=True)
    plan_key = plan_request("How many watts did the A100 GPU draw?", 2).messages[-1].content
    server.script(plan_key, Fault(status=401, error="Incorrect API key provided"))
    with pytest.raises(RunFailed, match=r"1 of 3 questions failed: retrieval failed: BackendError: .*HTTP 401"):
        run_config(settings, "p", leaderboard_too=False)
    path = st.retrieval_path(settings.lake, st.keys_for(settings.lake, cfg).retrieval)
    assert list(st.retrieval_errors(path)) == ["q2"]
    since = len(server.requests)
    report = run_config(settings, "p", leaderboard_too=False)  # the key is fixed
    assert report.metadata["retrievals"]["retrieved_questions"] == 1
    assert [r.key for r in server.requests[since:]].count(plan_key) == 1  # planned again
    assert all(len(r.queries) == 2 for r in st.read_retrievals(path).values())


def test_the_planner_falls_back_only_on_an_unusable_reply(env):
    from kohaku_rag.answering.planner import plan_queries, plan_request
    from kohaku_rag.llm.openai_compat import OpenAIChat
    from tests.support.chat_server import Fault

    _, server, _ = env
    chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=0)
    question = "How many watts did the A100 GPU draw?"
    key = plan_request(question, 3).messages[-1].content
    server.script(key, Fault(content="no json at all"))  # the model answered, unusably
    assert plan_queries(question, chat, 3).fallback
    server.script(key, Fault(status=403, error="forbidden"))
    with pytest.raises(BackendError, match="HTTP 403"):
        plan_queries(question, chat, 3)


def test_ask_raises_on_a_failed_call_instead_of_answering_blank(env):
    settings, server, questions = env
    cfg = write_config(settings, "a", server, questions)
    server.outage = True
    rag = Rag(settings.lake, settings.index_config())
    with pytest.raises(BackendError, match="HTTP 503"):
        rag.ask("How many watts did the A100 GPU draw?", config=cfg, unit="W")


def test_credentials_in_the_endpoint_stay_out_of_the_output_and_the_lake(env, capsys):
    settings, server, questions = env
    secret, token = "sk-user-5e6f7a8b9c0d1e2f", "tok-9a8b7c6d5e4f3a2b1c0d"
    port = server.base_url.rsplit(":", 1)[1]
    url = f"http://key:{secret}@127.0.0.1:{port}/v1?api-key={token}"
    cfg = write_config(settings, "a", server, questions, base_url=url)
    server.fail_when = lambda key: "Question: How many watts" in key
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir]
    assert cli_main(["eval", "--questions", str(questions), "--config", "a", *args]) != 0
    out = capsys.readouterr()
    assert "1 of 3 questions failed" in out.err and "[redacted]" in out.err
    stored = json.dumps(run_rows(settings, cfg), default=str)
    assert "[redacted]" in stored  # the failed row's error names the endpoint, redacted
    for text in (out.out, out.err, stored, repr(cfg)):
        assert secret not in text and token not in text


def test_a_failed_true_false_verdict_call_is_a_failure_not_the_replys_own_verdict():
    from kohaku_rag.answering.answer import answer_runs
    from kohaku_rag.answering.prompt import answer_request
    from kohaku_rag.answering.qa_config import GenerationPart, QAConfig, RetrievalPart
    from kohaku_rag.answering.verdict import verdict_request
    from kohaku_rag.llm.openai_compat import OpenAIChat
    from tests.support.chat_server import ChatServer, Fault, server_error

    class Fixed:
        def search(self, queries, cfg):
            return [item]

    item, statement, reply = true_false_case()
    gen = GenerationPart()
    cfg = QAConfig(questions="q.csv", retrieval=RetrievalPart(use_planner=False), generation=gen)
    with ChatServer() as server:
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None, max_retries=1, backoff_base=0.01)
        server.script(answer_request(statement, [item], gen, seed=0).messages[-1].content, Fault(content=reply))
        verdict = verdict_request(statement, [item], gen).messages[-1].content
        server.script(verdict, server_error(503), server_error(503))
        (run,) = answer_runs(statement, [statement.question], Fixed(), chat, cfg, [0])
    assert run.error.startswith("RetriesExhausted: ") and "HTTP 503" in run.error


def test_a_hosted_reranker_outage_in_a_deeper_retry_is_a_failure_not_an_answer(env):
    from kohaku_rag.answering.answer import answer_question
    from kohaku_rag.answers.records import Question
    from kohaku_rag.llm.openai_compat import OpenAIChat
    from kohaku_rag.retrieval.retriever import open_retriever
    from tests.support.rerank_server import RerankServer

    settings, server, questions = env
    question = "How many tCO2e did training emit?"
    with RerankServer() as reranker:
        folder = settings.lake.root / "configs"
        folder.mkdir(exist_ok=True)
        llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
        spec = {"backend": "http", "url": reranker.root + "/v1/rerank", "max_retries": 1}
        data = {
            "questions": str(questions),
            "retrieval": {"use_planner": False, "top_k_final": 1, "reranker": spec},
            "generation": {"llm": llm, "max_retries": 1},
        }
        (folder / "rr.json").write_text(json.dumps(data))
        cfg = load_qa_config(folder / "rr.json")
        retriever = open_retriever(settings.lake, settings.index_config())
        chat = OpenAIChat(server.base_url, "scripted", api_key_env=None)
        server.blank_first[question] = 1  # the first attempt abstains: the retry searches deeper
        reranker.faults.extend([200, 500, 500])  # the first search reranks; the deeper one finds it down
        pred = answer_question(Question("q1", question, "tCO2e"), retriever, chat, cfg)
        assert pred.error and "rerank request failed" in pred.error
        assert pred.attempts == 1  # asked once; the deeper attempt never reached the LLM
        # Healthy again: the same question is answered from the deeper context.
        server.blank_first[question] = 1
        pred = answer_question(Question("q1", question, "tCO2e"), retriever, chat, cfg)
        assert not pred.error and pred.attempts == 2 and pred.answer.answer_value == "4.3"
