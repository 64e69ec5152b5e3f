"""Sweep files: expansion into member configs, readable names, errors with file and line."""

import json

import pytest

from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.experiments.sweep import expand, load_sweep, member_names, sweeps_dir, write_members
from kohaku_rag.lake.layout import Lake

SWEEP = """base = "base"
seeds = 2
[grid]
top_k_final = [4, 8]
"generation.temperature" = [0.2, 0.7]
"""


def _write(lake: Lake, name: str, text: str):
    folder = sweeps_dir(lake)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def _lake(tmp_path) -> Lake:
    lake = Lake(tmp_path / "lake")
    folder = configs_dir(lake)
    folder.mkdir(parents=True)
    questions = tmp_path / "q.csv"
    questions.write_text("id,question,answer_unit\nq1,What?,W\n")
    (folder / "base.json").write_text(json.dumps({"questions": str(questions), "voting": {"mode": "majority"}}))
    return lake


def test_grid_expands_into_named_members_that_share_hashes(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    lake = _lake(tmp_path)
    sweep = load_sweep(lake, _write(lake, "grid", SWEEP))
    members = expand(sweep)
    assert [m.name for m in members] == [
        "grid--top_k_final-4--temperature-0.2",
        "grid--top_k_final-4--temperature-0.7",
        "grid--top_k_final-8--temperature-0.2",
        "grid--top_k_final-8--temperature-0.7",
    ]
    cfgs = [m.config for m in members]
    assert all(c.voting.runs == 2 and c.voting.mode == "majority" for c in cfgs)  # seeds = runs; base kept
    assert [c.retrieval.search.top_k_final for c in cfgs] == [4, 4, 8, 8]
    assert [c.generation.temperature for c in cfgs] == [0.2, 0.7, 0.2, 0.7]
    # Generation-only differences share the retrieval hash (one retrieval table per top_k_final).
    assert len({c.retrieval_hash for c in cfgs}) == 2 and len({c.generation_hash for c in cfgs}) == 4

    written, removed = write_members(lake, sweep)
    files = config_files(configs_dir(lake))
    assert removed == [] and all(load_qa_config(files[m.name]) == m.config for m in written)
    # An edited grid removes the members it no longer lists, and their files.
    sweep = load_sweep(lake, _write(lake, "grid", SWEEP.replace("[4, 8]", "[4]")))
    _, removed = write_members(lake, sweep)
    assert removed == ["grid--top_k_final-8--temperature-0.2", "grid--top_k_final-8--temperature-0.7"]
    assert not (configs_dir(lake) / f"{removed[0]}.json").exists()
    assert member_names(lake, "grid") == [
        "grid--top_k_final-4--temperature-0.2",
        "grid--top_k_final-4--temperature-0.7",
    ]


def test_a_member_never_overwrites_a_config_the_sweep_did_not_write(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    lake = _lake(tmp_path)
    mine = configs_dir(lake) / "hot--temperature-0.5.json"
    mine.write_text(json.dumps({"questions": str(tmp_path / "q.csv")}))
    sweep = load_sweep(lake, _write(lake, "hot", 'base = "base"\n[grid]\ntemperature = [0.5, 0.9]\n'))
    with pytest.raises(ValueError, match=r"member hot--temperature-0.5 would overwrite .*did not write"):
        write_members(lake, sweep)
    assert not (configs_dir(lake) / "hot--temperature-0.9.json").exists()  # nothing written
    mine.unlink()
    members, _ = write_members(lake, sweep)
    write_members(lake, sweep)  # its own members are rewritten freely
    assert [m.name for m in members] == ["hot--temperature-0.5", "hot--temperature-0.9"]


def test_variants_and_inline_base(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    lake = _lake(tmp_path)
    text = (
        'seeds = 1\n[base]\nquestions = "../../../q.csv"\n[base.retrieval]\nuse_planner = false\n'
        '[[variants]]\nrerank = "score"\n[[variants]]\nrerank = "combined"\ndense_kinds = ["sentence", "paragraph"]\n'
    )
    members = expand(load_sweep(lake, _write(lake, "abl", text)))
    assert [m.name for m in members] == ["abl--rerank-score", "abl--rerank-combined--dense_kinds-sentence_paragraph"]
    assert members[1].config.retrieval.search.dense_kinds == ("sentence", "paragraph")
    assert members[0].config.questions == str((tmp_path / "q.csv").resolve())
    # A key the member leaves alone reads as the base's value in the report, not as null.
    from kohaku_rag.experiments.report import swept_value

    assert load_sweep(lake, _write(lake, "abl", text)).keys == ("retrieval.rerank", "retrieval.dense_kinds")
    assert swept_value(members[0], "retrieval.dense_kinds") == members[0].config.retrieval.search.dense_kinds
    assert swept_value(members[1], "retrieval.dense_kinds") == ["sentence", "paragraph"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('base = "base"\n[grid]\nnot_a_key = [1, 2]\n', r"line 3: grid\.not_a_key: not a config key"),
        (
            'base = "base"\n[grid]\nmax_retries = [1]\n',
            "ambiguous: write one of generation.max_retries, generation.llm.max_retries",
        ),
        ('base = "base"\nseeds = 0\n', r"line 2: seeds: expected a whole number >= 1"),
        ('base = "base"\nseeds = 2\n[grid]\n"voting.runs" = [1, 3]\n', "sweep one or the other"),
        ('base = "nope"\n', "no config 'nope'"),
        ('base = "base"\n[grid]\ntop_k = 3\n', "expected a non-empty list"),
        ('base = "base"\nsteps = 3\n', "unknown sweep keys"),
    ],
)
def test_bad_sweeps_name_file_line_and_key(tmp_path, monkeypatch, text, message):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    lake = _lake(tmp_path)
    path = _write(lake, "bad", text)
    with pytest.raises(ValueError, match=message) as info:
        load_sweep(lake, path)
    assert str(path) in str(info.value)


def test_a_bad_value_names_the_member(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    lake = _lake(tmp_path)
    sweep = load_sweep(lake, _write(lake, "hot", 'base = "base"\n[grid]\ntemperature = [0.5, 9.0]\n'))
    with pytest.raises(ValueError, match=r"member hot--temperature-9.0: .*temperature must be at most 2, got 9.0"):
        expand(sweep)
