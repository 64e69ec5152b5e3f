"""Where an answer's time went: each LLM call's prompt tokens, of them evaluated
and reused, reply tokens and seconds are stored with the prediction and its debug rows, and
`kohaku eval` prints the split per question beside the score."""

import pyarrow.parquet as pq
from test_failed_calls import run_rows, write_config

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answering import qa_tables as st


def test_the_eval_summary_and_the_stored_rows_say_where_the_time_went(env, capsys):
    settings, server, questions = env
    server.cached_prompt_tokens = 20  # the server reports 20 prompt tokens reused from its KV cache
    cfg = write_config(settings, "split", server, questions)
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir, "--questions", str(questions)]
    assert cli_main(["eval", "--config", "split", "--json", *args]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("LLM time per question:")]
    assert "reused" in line and "reply tokens" in line and "from the response cache" in line

    rows = run_rows(settings, cfg)
    for row in rows.values():
        assert row["prompt_tokens"] > 20
        assert row["prompt_tokens_evaluated"] == row["prompt_tokens"] - 20 * row["llm_calls"]
    debug = pq.read_table(st.debug_path(settings.lake, st.keys_for(settings.lake, cfg).prediction, 0)).to_pylist()
    answers = [d for d in debug if d["kind"] == "answer"]
    assert answers and all(d["evaluated"] == d["prompt_tokens"] - 20 and not d["cached"] for d in answers)
    assert all(d["reply_tokens"] > 0 and d["seconds"] >= 0 for d in answers)

    # A server that does not say: the split is unknown (None), never a made-up 0. (Run 0 is
    # the first config's, stored under the same generation key and reused.)
    server.cached_prompt_tokens = None
    cfg2 = write_config(settings, "unsaid", server, questions, runs=2)
    assert cli_main(["eval", "--config", "unsaid", "--json", *args]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("LLM time per question:")]
    assert "evaluated" not in line
    assert run_rows(settings, cfg2) == rows
    assert all(r["prompt_tokens_evaluated"] is None for r in run_rows(settings, cfg2, run=1).values())


def test_eval_prints_a_line_per_question_with_an_eta(env, capsys):
    """Before: `kohaku eval` printed its estimate, then nothing until the run ended (the run's
    progress lines went to Dagster's log only), 13 minutes of silence on 133 questions."""
    settings, server, questions = env
    write_config(settings, "ticks", server, questions)
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir, "--questions", str(questions)]
    assert cli_main(["eval", "--config", "ticks", "--json", *args]) == 0
    err = capsys.readouterr().err.splitlines()
    total = len([q for q in questions.read_text().splitlines()[1:] if q.strip()])
    answered = [x for x in err if x.startswith("answered ")]
    assert [x.split()[1] for x in answered] == [f"{n}/{total}" for n in range(1, total + 1)], err
    assert all("(ETA " in x for x in answered[:-1]) and "(done in " in answered[-1]
