"""The Dagster `retrievals` step when planner calls fail: every question failed fails the step
(it showed green "Materialized" with `failed_questions` in its metadata), a partly failed one
materializes with its failures shown by the `every_question_retrieved` asset check."""

import pytest
from test_failed_calls import write_config

from kohaku_assets.assets.answering import question_set, retrievals
from kohaku_assets.runner import RunFailed, run_config, run_job


def test_a_retrieval_step_whose_questions_all_failed_fails(env) -> None:
    """A retrieval step whose every question failed fails itself, not only the predictions after it."""
    settings, server, questions = env
    write_config(settings, "p", server, questions, planner=True)
    server.fail_when = lambda key: "search queries" in key  # every plan fails
    with pytest.raises(RunFailed, match=r"^config p: retrievals: 3 of 3 questions failed: .*re-run to retry them"):
        run_config(settings, "p", leaderboard_too=False)


def test_a_partly_failed_retrieval_shows_its_failures_in_an_asset_check(env) -> None:
    """The questions a retrieval failed on show in an asset check, not only as a metadata count."""
    settings, server, questions = env
    write_config(settings, "p", server, questions, planner=True)
    server.fail_when = lambda key: "search queries" in key and "How many watts" in key  # q2's plan fails
    with pytest.raises(RunFailed, match=r"predictions: 1 of 3"):
        run_config(settings, "p", leaderboard_too=False)
    result = run_job(settings, "answer_config", "p", asset_selection=[question_set.key, retrievals.key])
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "every_question_retrieved" and not check.passed
    assert check.metadata["failed_questions"].value == 1 and list(check.metadata["failed"].value) == ["q2"]
    server.fail_when = None
    again = run_job(settings, "answer_config", "p", asset_selection=[question_set.key, retrievals.key])
    assert again.get_asset_check_evaluations()[0].passed
