"""WattBot 2026 answer forms: lists `(a,b)` and ranges `[lo,hi]` through normalisation,
voting, the prompt and the submission file."""

from __future__ import annotations

import csv

import pytest

from kohaku_rag.answering.prompt import build_messages
from kohaku_rag.answers.answer_forms import asks_for_several, asks_to_compute, range_from_pair
from kohaku_rag.answers.normalise import canonical_list, normalise_answer
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.vote import vote
from kohaku_rag.evaluation.metrics import score_with
from kohaku_rag.evaluation.submissions import to_submission_rows
from tests.support.shared_data import WATTBOT


@pytest.mark.parametrize(
    ("value", "unit", "canonical"),
    [
        ("(3, 5 GPUs)", "GPUs", "(3,5)"),
        ("[3, 5, 7]", "GPUs", "(3,5,7)"),  # three numbers: not a range
        ("{GPT-3, BLOOM}", "is_blank", "(GPT-3,BLOOM)"),
        ("['GPT-3', 'BLOOM']", "is_blank", "(GPT-3,BLOOM)"),
        ("(1,000, 2.5 million)", "kWh", "(1000,2500000)"),
        ("[10,20]", "percent", None),  # a range stays a range
        ("[10, 20]", "percent", None),
        ("(3)", "GPUs", None),  # one member: a value
        ("12", "GPUs", None),
    ],
)
def test_canonical_list(value: str, unit: str, canonical: str | None) -> None:
    assert canonical_list(value, unit) == canonical


def test_normalised_answers_keep_lists_and_ranges() -> None:
    listed = normalise_answer(Answer("3 and 5 GPUs", "(3 GPUs, 5 GPUs)", "GPUs", ("a",)), "GPUs")
    ranged = normalise_answer(Answer("10 to 20 %", "10-20", "percent", ("a",)), "percent")
    terms = normalise_answer(Answer("GPT-3, BLOOM", "[GPT-3, BLOOM]", "is_blank", ("a",)), "is_blank")
    assert (listed.answer_value, ranged.answer_value, terms.answer_value) == ("(3,5)", "[10,20]", "(GPT-3,BLOOM)")


def test_two_lists_with_the_same_members_vote_as_one_answer() -> None:
    runs = [
        Answer("7", "7", "GPUs", ("a",)),
        Answer("3, 5", "(3,5)", "GPUs", ("a",)),
        Answer("5, 3", "(5, 3)", "GPUs", ("a",)),
    ]
    # Before: three groups of one, the first (7) won the tie; now (3,5) and (5, 3) are one group of two.
    assert vote(runs, "answer_priority").answer_value == "(3,5)"
    terms = [Answer("x", "(OPT)", "is_blank", ()), Answer("x", "(BLOOM, GPT-3)", "is_blank", ()),
             Answer("x", "{gpt-3, bloom}", "is_blank", ())]  # fmt: skip
    assert vote(terms, "answer_priority").answer_value == "(BLOOM, GPT-3)"


def test_a_list_answer_is_written_and_scored_as_a_list() -> None:
    gold = Question("q1", "Which two GPUs ...?", "GPUs", Answer("x", "(3,5)", "GPUs", ("a",)), ("Reconcile",), True)
    pred = normalise_answer(Answer("5 and 3", "(5 GPUs, 3 GPUs)", "GPUs", ("a",)), "GPUs")
    row = to_submission_rows({"q1": pred}, [gold])[0]
    assert row["answer_value"] == "(5,3)"
    report = score_with("wattbot2026", [gold], {"q1": pred})
    assert (report.value, report.per_flag["Reconcile"].wrong) == (1.0, 0)


@pytest.mark.parametrize(
    ("text", "flags", "several"),
    [
        ("What were the emissions of GPT-3 and BLOOM, respectively?", (), True),
        ("Which two models had the lowest energy per token?", (), True),
        ("List the GPUs used for training.", (), True),
        ("What energy does each paper report for BLOOM training?", (), True),
        ("How many GPU hours did training take?", ("Reconcile",), True),
        ("How many GPU hours did training take?", ("Table",), False),
        ("How many GPU hours were used, including both SFT and DPO?", (), False),
        ("True or False: it reduces both network overhead and carbon footprint.", (), False),
    ],
)
def test_asks_for_several(text: str, flags: tuple[str, ...], several: bool) -> None:
    assert asks_for_several(Question("q", text, "GPU hours", flags=flags, flagged=bool(flags))) is several


@pytest.mark.parametrize(
    ("text", "computes"),
    [
        ("How many times more energy did the larger model use than the smaller one?", True),
        ("By what factor did inference emissions exceed training emissions?", True),
        ("What is the percentage reduction in energy from quantization?", True),
        ("How much lower were the emissions in Quebec than in Iowa?", True),
        ("What was the total energy used by the three training runs?", True),
        ("If a data center uses 5 MW for a year, how much energy does it use?", True),
        ("How much water would one million queries consume?", True),
        ("What was the energy used to train the model?", False),
        ("Which GPU was used for training?", False),
        ("True or False: the total energy was more than 10 MWh.", False),
        ("What were the emissions of GPT-3 and BLOOM, respectively?", False),  # several values, not one computed
    ],
)
def test_asks_to_compute(text: str, computes: bool) -> None:
    assert asks_to_compute(Question("q", text, "MWh")) is computes


def test_compute_asked_writes_the_working_only_where_the_question_computes() -> None:
    from kohaku_rag.answering.prompt import computes
    from kohaku_rag.answering.qa_config import GenerationPart

    ratio = Question("q", "By what factor did inference emissions exceed training emissions?", "ratio")
    read = Question("q", "What was the energy used to train the model?", "MWh")
    assert computes(ratio, GenerationPart(compute="asked")) and not computes(read, GenerationPart(compute="asked"))
    assert computes(read, GenerationPart(compute="expression")) and not computes(ratio, GenerationPart())


def test_a_bare_number_pair_answering_a_range_question_is_that_range() -> None:
    from kohaku_rag.answering.reply import parse_reply
    from kohaku_rag.evaluation import wattbot2026

    asked = Question("q", "What is the range of energy used to pre-train a model, in MWh?", "MWh")
    plain = Question("q", "How much energy was used to pre-train the model?", "MWh")
    assert range_from_pair(asked, "0.8,3500") == "[0.8,3500]"
    assert range_from_pair(asked, "0.06, 3426") == "[0.06,3426]"
    assert range_from_pair(asked, "3,426") == "3,426"  # a thousands comma is one number
    assert range_from_pair(asked, "[0.8,3500]") == "[0.8,3500]" and range_from_pair(plain, "0.8,3500") == "0.8,3500"
    reply = '{"answer": "0.8 to 3500 MWh", "answer_value": "0.8,3500", "ref_id": ["a"], "is_blank": false}'
    answer = parse_reply(reply, asked, ["a"])
    gold = Question("q", asked.question, "MWh", gold=Answer("0.8-3500", "[0.8,3500]", "MWh", ("a",), ""))
    assert wattbot2026.components(gold, answer).value == 1.0  # read as a bare pair it scored 0


def test_the_2025_train_questions_ask_for_one_value() -> None:
    # so their prompts (and the predictions stored for them) are unchanged
    assert [q.id for q in load_questions(WATTBOT / "train_QA.csv") if asks_for_several(q)] == []


def test_the_prompt_asks_for_a_list_only_when_several_values_are_asked() -> None:
    several = Question("q", "How many GPU hours did training take?", "GPU hours", flags=("Reconcile",), flagged=True)
    one = Question("q", "How many GPU hours did training take?", "GPU hours")
    several_prompt = build_messages(several, [])[1].content
    one_prompt = build_messages(one, [])[1].content
    assert "give every one, each a number in GPU hours (no unit, no commas), as a list (a,b)" in several_prompt
    assert "as a list" not in one_prompt and "or a range as [low,high]" in one_prompt
    terms = build_messages(Question("q", "Which two models were compared?", "is_blank"), [])[1].content
    assert "give every one, each the exact name or term, as a list (a,b)" in terms


def test_flags_of_a_2026_question_file_are_read(tmp_path) -> None:
    path = tmp_path / "q.csv"
    with path.open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        writer.writerow(["id", "question", "answer_unit", "Quote", "Reconcile", "CrossPaper", "Cohort"])
        writer.writerow(["q1", "How many?", "kWh", "1", "1", "0", "B"])
        writer.writerow(["q2", "How many?", "kWh", "0", "", "0", "B"])
    q1, q2 = load_questions(path)
    assert (q1.flags, q1.flagged, q2.flags) == (("Quote", "Reconcile"), True, ())
    assert asks_for_several(q1) and not asks_for_several(q2)
