"""reply_order = "value_first": the reply writes the value and its references
before the answer words and a shorter explanation; the default order and prompt stay as they
were (stored answers keep their keys)."""

import json

import pyarrow.parquet as pq
from test_failed_calls import write_config

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.prompt import answer_schema, build_messages
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answers.records import Question
from kohaku_rag.retrieval.context import ContextItem

QUESTION = Question(id="q1", question="How much water per kWh?", answer_unit="L/kWh")
ITEM = ContextItem(
    doc_id="water", node_id="water:sec0:p0", kind="paragraph", page=1, text="It uses 0.18 L/kWh.", score=1.0
)


def test_the_value_first_schema_and_prompt_list_the_value_and_refs_first() -> None:
    explain = list(answer_schema(["water"])["properties"])
    assert explain == ["explanation", "answer", "answer_value", "ref_id", "is_blank"]
    first = answer_schema(["water"], value_first=True)
    assert list(first["properties"]) == ["answer_value", "ref_id", "answer", "explanation", "is_blank"]
    assert first["required"] == list(first["properties"])
    assert (
        first["properties"]["explanation"]["maxLength"]
        < answer_schema(["water"])["properties"]["explanation"]["maxLength"]
    )
    # A computed answer still writes its operands before the value they give.
    computed = list(answer_schema(["water"], compute=True, value_first=True)["properties"])
    assert computed.index("operands") < computed.index("answer_value")

    _, user = build_messages(QUESTION, [ITEM], value_first=True)
    task = user.content.split("Fill in the JSON:")[1]
    assert task.index("answer_value:") < task.index("ref_id:") < task.index("answer:") < task.index("explanation:")
    _, default = build_messages(QUESTION, [ITEM])
    task = default.content.split("Fill in the JSON:")[1]
    assert task.index("explanation:") < task.index("answer:") < task.index("answer_value:")


def test_the_default_hash_does_not_name_the_new_key() -> None:
    """A config that never set reply_order keeps its stored answers (ADDED_KEYS)."""
    default = QAConfig()
    assert default.generation_hash == QAConfig(generation=GenerationPart(reply_order="explain_first")).generation_hash
    assert default.generation_hash != QAConfig(generation=GenerationPart(reply_order="value_first")).generation_hash


def test_a_value_first_config_answers_through_the_pipeline(env, capsys):
    settings, server, questions = env
    write_config(settings, "vf", server, questions)
    data = json.loads((settings.lake.root / "configs" / "vf.json").read_text())
    data["generation"]["reply_order"] = "value_first"
    (settings.lake.root / "configs" / "vf.json").write_text(json.dumps(data))
    cfg = load_qa_config(settings.lake.root / "configs" / "vf.json")
    assert cfg.generation.reply_order == "value_first"
    args = ["--lake", settings.lake_root, "--corpus", settings.corpus_dir, "--questions", str(questions)]
    assert cli_main(["eval", "--config", "vf", "--json", *args]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["final"] == 1.0
    path = st.debug_path(settings.lake, st.keys_for(settings.lake, cfg).prediction, 0)
    (prompt, *_) = [d["prompt"] for d in pq.read_table(path).to_pylist() if d["kind"] == "answer"]
    task = prompt.split("Fill in the JSON:")[1]
    assert task.index("answer_value:") < task.index("explanation:")


def test_rules_in_system_open_every_answering_prompt_with_the_same_tokens() -> None:
    """rules_in_system: the fixed field rules move to the system prompt, so two
    questions' prompts share ~100 more leading tokens (evaluated once, prefix_states.py); the
    verdict and support prompts open the same way (they continue from the answer's KV)."""
    from kohaku_rag.answering.prompt import answer_request
    from kohaku_rag.answering.support_check import support_request
    from kohaku_rag.answering.verdict import verdict_request
    from kohaku_rag.answers.records import Answer

    other = Question(id="q2", question="True or False: the model drinks water.", answer_unit="is_blank")
    item2 = ContextItem(
        doc_id="gpu", node_id="gpu:sec0:p0", kind="paragraph", page=2, text="GPUs use power.", score=1.0
    )
    for gen in (GenerationPart(), GenerationPart(rules_in_system=True)):
        a = answer_request(QUESTION, [ITEM], gen, 0).messages
        b = answer_request(other, [item2], gen, 0).messages
        assert a[0] == b[0]  # one system prompt for every question
        assert verdict_request(other, [item2], gen).messages[0] == b[0]
        answer = Answer("0.18 L/kWh", "0.18", "L/kWh", ("water",))
        assert support_request(QUESTION, [ITEM], answer, gen).messages[0] == a[0]
        task = a[1].content.split("Fill in the JSON:")[1]
        assert ("explanation:" in a[0].content) == gen.rules_in_system
        assert ("explanation:" in task) != gen.rules_in_system
        assert "answer_value: only the number in L/kWh" in task  # the question's own rule stays
    assert GenerationPart(rules_in_system=True) != GenerationPart()
    assert QAConfig().generation_hash == QAConfig(generation=GenerationPart(rules_in_system=False)).generation_hash
