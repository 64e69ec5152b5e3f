"""Config files that cannot silently be wrong: every value checked when loaded, errors naming
the file, the line and the key; KohakuRAG's key names; the reply confidence and its tiebreak."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import dump_json, dump_toml, load_qa_config
from kohaku_rag.answering.reply import with_confidence
from kohaku_rag.answers.records import Answer
from kohaku_rag.llm import ChatResult, LLMSpec


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ValueError) as err:
        load_qa_config(path)
    return str(err.value)


TOML = """config_version = 2
questions = "q.csv"

[retrieval]
top_k = 8
{retrieval}

[generation]
temperature = 0.3
{generation}

[voting]
{voting}
"""


def toml(tmp_path: Path, retrieval: str = "", generation: str = "", voting: str = "") -> Path:
    return write(tmp_path, TOML.format(retrieval=retrieval, generation=generation, voting=voting))


@pytest.mark.parametrize(
    ("table", "line", "message"),
    [
        (
            "retrieval",
            'rerank = "best"',
            'line 6: retrieval.rerank: "best" is not one of the allowed values: "combined", "combined_max", '
            '"frequency", "score", "score_sum", "none"',
        ),
        ("retrieval", 'top_k_final = "16"', 'line 6: retrieval.top_k_final: expected an integer, got str "16"'),
        ("retrieval", "dedup = true", 'line 6: retrieval.dedup: true is not one of the allowed values: "none"'),
        ("retrieval", 'bm25_mode = "rrf"', 'line 6: retrieval.bm25_mode: "rrf" is not one of the allowed values'),
        ("retrieval", "top_k_final = 0", "line 6: retrieval.top_k_final: top_k_final must be at least 1"),
        ("retrieval", 'dense_kinds = ["word"]', "line 6: retrieval.dense_kinds: dense_kinds ['word'] are not among"),
        ("retrieval", 'rerank = "frequency"\nalpha = 0.5', 'retrieval.alpha: alpha only applies to rerank "combined"'),
        ("retrieval", "top_kk = 3", "line 6: retrieval.top_kk: unknown RetrievalConfig keys ['top_kk']"),
        ("generation", "max_retries = 1.5", "line 10: generation.max_retries: expected an integer, got float 1.5"),
        ("generation", 'use_reordered_prompt = "yes"', "line 10: generation.use_reordered_prompt: expected true or"),
        ("generation", "img_k = -1", "line 10: generation.img_k: img_k must be at least 0, got -1"),
        ("generation", 'quote_evidence = "some"', 'line 10: generation.quote_evidence: "some" is not one of'),
        ("voting", 'mode = "plurality"', 'line 13: voting.mode: "plurality" is not one of the allowed values'),
        ("voting", "runs = 0", "line 13: voting.runs: runs must be at least 1"),
        # Absurd values are refused at load, not met later as a hang or a backend's error.
        ("voting", "runs = 1000000000", "line 13: voting.runs: runs must be at most 100, got 1000000000"),
        ("retrieval", "bm25_top_k = 10000000", "line 6: retrieval.bm25_top_k: bm25_top_k must be at most 4096"),
        ("retrieval", "budget_chars = -5", "line 6: retrieval.budget_chars: budget_chars must be at least 0"),
        ("generation", "max_tokens = 0", "line 10: generation.max_tokens: max_tokens must be at least 1, got 0"),
        ("generation", "true_false_margin = nan", "line 10: generation.true_false_margin: expected a finite number"),
        (
            "voting",
            'tiebreak = "highest_confidence"',
            'line 13: voting.tiebreak: "highest_confidence" needs a confidence per run: set [generation] '
            "reply_confidence = true",
        ),
    ],
)
def test_each_wrong_value_is_an_error_naming_file_line_and_key(tmp_path, table, line, message) -> None:
    path = toml(tmp_path, **{table: line})
    text = error_of(path)
    assert text.startswith(f"config file {path}")
    assert message in text


def test_every_numeric_key_has_a_declared_range() -> None:
    """Every int and float of the QA and index configs declares its sane range (config_files.Range)."""
    import types
    import typing

    from kohaku_rag.answering.qa_config import GenerationPart, RetrievalPart, VotingPart
    from kohaku_rag.config_files import Range
    from kohaku_rag.embed import EmbedderSpec
    from kohaku_rag.indexing.index_config import IndexConfig
    from kohaku_rag.retrieval.rerankers import RerankerSpec
    from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

    classes = (RetrievalConfig, RetrievalPart, GenerationPart, VotingPart, LLMSpec, RerankerSpec, IndexConfig)
    unbounded = []
    for cls in (*classes, EmbedderSpec):
        for name, hint in typing.get_type_hints(cls, include_extras=True).items():
            options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
            for option in options:
                bare = option in (int, float)
                ranged = typing.get_origin(option) is typing.Annotated and any(
                    isinstance(m, Range) for m in option.__metadata__
                )
                if bare or (typing.get_origin(option) is typing.Annotated and not ranged):
                    unbounded.append(f"{cls.__name__}.{name}")
    assert unbounded == []


def test_absurd_values_are_refused_at_load_with_file_line_and_key(tmp_path) -> None:
    path = write(tmp_path, 'questions = "q.csv"\n[retrieval]\ntop_k = 1000000000\n')
    assert f"config file {path}, line 3: retrieval.top_k: top_k must be at most 4096, got 1000000000" in error_of(path)
    path = write(tmp_path, 'questions = "q.csv"\n[voting]\nruns = 1000000000\n')
    assert f"config file {path}, line 3: voting.runs: runs must be at most 100, got 1000000000" in error_of(path)
    path = write(
        tmp_path, 'questions = "q.csv"\n[generation.llm]\nbackend = "openai"\nbase_url = "http://h"\ntimeout = 1e12\n'
    )
    assert "line 5: generation.llm.timeout: timeout must be at most 3600" in error_of(path)


def test_a_duplicate_key_in_toml_and_a_wrong_table_type(tmp_path) -> None:
    assert "config file" in error_of(write(tmp_path, "retrieval = 3\n"))
    assert "retrieval: expected a table" in error_of(write(tmp_path, "retrieval = 3\n"))


def test_json_errors_name_the_line_too(tmp_path) -> None:
    path = write(tmp_path, json.dumps({"questions": "q.csv", "retrieval": {"rerank": "best"}}, indent=2), "j.json")
    assert f"config file {path}, line 4: retrieval.rerank" in error_of(path)


def test_old_files_that_said_combined_must_say_which_they_mean(tmp_path) -> None:
    old = write(tmp_path, 'questions = "q.csv"\n[retrieval]\nrerank = "combined"\nalpha = 0.25\n')
    text = error_of(old)
    assert "line 3: retrieval.rerank" in text and 'rerank = "combined_max"' in text and "config_version = 2" in text
    assert (
        load_qa_config(
            write(tmp_path, 'config_version = 2\n[retrieval]\nrerank = "combined"\n')
        ).retrieval.search.rerank
        == "combined"
    )
    assert (
        load_qa_config(write(tmp_path, '[retrieval]\nrerank = "combined_max"\n')).retrieval.search.rerank
        == "combined_max"
    )


def test_kohaku_key_names_are_aliases(tmp_path) -> None:
    flat = {
        "questions": "q.csv",
        "rerank_strategy": "score",
        "deduplicate_retrieval": True,
        "retrieval_threshold": 0.3,
        "top_k_final": None,
        "top_k": 16,
        "planner_model": "gpt-4o-mini",
        "max_retries": 3,
        "use_reordered_prompt": False,
        "max_concurrent": 8,
    }
    cfg = load_qa_config(write(tmp_path, json.dumps(flat), "k.json"))
    s = cfg.retrieval.search
    assert (s.rerank, s.dedup, s.threshold, s.top_k_final, s.top_k) == ("score_sum", "node_id", 0.3, None, 16)
    assert cfg.retrieval.planner_model == LLMSpec(model="gpt-4o-mini") and cfg.planner_llm.model == "gpt-4o-mini"
    assert (cfg.generation.max_retries, cfg.generation.use_reordered_prompt, cfg.generation.llm.max_concurrent) == (
        3,
        False,
        8,
    )
    # "combined" under KohakuRAG's key name is KohakuRAG's formula, whatever the version
    assert (
        load_qa_config(write(tmp_path, '[retrieval]\nrerank_strategy = "combined"\n')).retrieval.search.rerank
        == "combined"
    )
    both = write(tmp_path, '[retrieval]\nrerank_strategy = "score"\nrerank = "score"\n')
    assert "give rerank or its alias rerank_strategy, not both" in error_of(both)
    idx = write(tmp_path, 'embedding_model = "jina"\n')
    assert "line 1: embedding_model: embedding_model decides what the index holds" in error_of(idx)


def test_top_k_final_none_round_trips_through_toml_and_json(tmp_path) -> None:
    cfg = load_qa_config(toml(tmp_path, retrieval='top_k_final = "none"'))
    assert cfg.retrieval.search.top_k_final is None
    assert load_qa_config(write(tmp_path, dump_toml(cfg), "r.toml")) == cfg
    assert load_qa_config(write(tmp_path, dump_json(cfg), "r.json")) == cfg


def test_reply_confidence_is_the_mean_token_probability() -> None:
    answer = Answer("5", "5", "kWh", ("a",))
    got = with_confidence(answer, ChatResult("{}", 1, 2, 0.1, mean_logprob=-0.5))
    assert got.confidence == pytest.approx(float(np.exp(-0.5)))
    assert with_confidence(answer, ChatResult("{}", 1, 2, 0.1)).confidence is None
    cfg = QAConfig(questions="q.csv")
    assert not cfg.generation.reply_confidence


def test_config_show_and_diff(tmp_path, capsys, monkeypatch) -> None:
    from kohaku_assets.cli import main

    monkeypatch.setenv("KOHAKU_CONFIGS", str(tmp_path))
    write(tmp_path, 'config_version = 2\n[retrieval]\nrerank = "combined"\nbm25_mode = "append"\n', "pub.toml")
    write(tmp_path, "[voting]\nruns = 3\n", "base.toml")
    lake = ["--lake", str(tmp_path / "lake")]
    assert main(["config", "show", "pub", *lake]) == 0
    shown = capsys.readouterr().out
    assert 'rerank = "combined"\nalpha = 0.4\n' in shown and "max_retries = 0" in shown and "[voting]" in shown
    # what show prints loads back to the same config (alpha spelled out)
    again = load_qa_config(write(tmp_path, shown, "shown.toml"))
    assert again.retrieval.search.effective_alpha == 0.4 and again.retrieval.search.bm25_mode == "append"
    assert main(["config", "diff", "base", "pub", *lake]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "retrieval.alpha: 0.25 -> 0.4",
        'retrieval.bm25_mode: "fuse" -> "append"',
        'retrieval.rerank: "combined_max" -> "combined"',
        "voting.runs: 3 -> 1",
        "(they share no stored table)",
    ]
    assert main(["config", "diff", "base", "base", *lake]) == 0
    assert "the same config" in capsys.readouterr().out
    write(tmp_path, '[retrieval]\nrerank = "best"\n', "bad.toml")
    assert main(["config", "show", "bad", *lake]) == 2
    assert 'line 2: retrieval.rerank: "best" is not one of' in capsys.readouterr().err


def test_the_configs_sensor_runs_no_invalid_file(tmp_path, monkeypatch) -> None:
    from dagster import build_sensor_context

    from kohaku_assets.instance import instance_for
    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import resources_for
    from kohaku_assets.sensors import configs_sensor

    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    settings = KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(tmp_path / "corpus"))
    folder = tmp_path / "lake" / "configs"
    folder.mkdir(parents=True)
    write(folder, "[voting]\nruns = 2\n", "good.toml")
    write(folder, '[voting]\nmode = "plurality"\n', "bad.toml")
    instance = instance_for(settings.lake.root)
    on_earlier = '{"versions": {}, "started": null}'  # turned on while the folder was empty
    result = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=on_earlier)
    )
    assert [r.partition_key for r in result.run_requests] == ["good"]


def test_the_planner_prompt_expands_abbreviations_and_splits_compound_questions() -> None:
    from kohaku_rag.answering.planner import plan_request

    user = plan_request("What are the PUE and WUE of the site?", 3).messages[1].content
    assert "Spell out abbreviations" in user and "give each part its own query" in user
