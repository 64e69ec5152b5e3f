"""The configs folder: one QA config per file, ensemble specs in its `ensembles/` folder.

Configs are named by their file stem. `kohaku eval` on another question file derives a
config `<name>--<csv stem>` next to the original (one file per question set, so several
sets coexist): a file naming the original and the question file, nothing copied from it;
`default` is written from the defaults the first time it is asked for.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from kohaku_rag.answering.ensemble_spec import EnsembleSpec, dump_spec, load_ensemble_spec
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import derived_base, dump_derived, dump_toml, load_qa_config
from kohaku_rag.config_files import named_files
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import check_key

ENSEMBLES_FOLDER = "ensembles"


def configs_dir(lake: Lake) -> Path:
    """`$KOHAKU_CONFIGS`, else `<lake>/configs`."""
    return Path(os.environ.get("KOHAKU_CONFIGS") or lake.root / "configs")


def ensembles_dir(configs_folder: Path) -> Path:
    return Path(configs_folder) / ENSEMBLES_FOLDER


# A question set named in a config (`questions = "feedback"`) or on the command line
# (`kohaku eval --questions feedback`): a bare name, not a path.
NAMED_SET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def question_set_path(lake: Lake, name: str) -> Path:
    """The lake's question set `name`: `<lake>/qa/question_sets/<name>.csv` (the `feedback`
    set is built by the server from what its users said)."""
    return lake.root / "qa" / "question_sets" / f"{check_key(name)}.csv"


def config_files(folder: Path) -> dict[str, Path]:
    """name -> file of every config in `folder`."""
    return named_files(folder, "config")


def ensemble_files(configs_folder: Path) -> dict[str, Path]:
    """name -> file of every ensemble spec under `<configs>/ensembles/`."""
    return named_files(ensembles_dir(configs_folder), "ensemble")


def load_configs(folder: Path) -> dict[str, QAConfig]:
    return {name: load_qa_config(path) for name, path in config_files(folder).items()}


def refuse_path(name: str, what: str, folder: Path) -> None:
    """A config is named by its file's stem in the configs folder; a path is refused with
    that reason (not "no such file", which is wrong when the file exists elsewhere)."""
    if "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(
            f"{what} {name!r}: {what}s are named by their file's stem in {folder}, not by a path; "
            f"copy the file into that folder and give its name"
        )


def _file_named(files: dict[str, Path], name: str, what: str, folder: Path) -> Path:
    refuse_path(name, what, folder)
    path = files.get(check_key(name))
    if path is None:
        raise ValueError(f"{what} {name!r}: no {name}.toml or {name}.json in {folder}")
    return path


def config_of(lake: Lake, name: str) -> QAConfig:
    """The config named `name` in the lake's configs folder."""
    folder = configs_dir(lake)
    return load_qa_config(_file_named(config_files(folder), name, "config", folder))


def spec_of(lake: Lake, name: str) -> EnsembleSpec:
    """The ensemble spec named `name` in the configs folder's `ensembles/`."""
    folder = configs_dir(lake)
    return load_ensemble_spec(_file_named(ensemble_files(folder), name, "ensemble", ensembles_dir(folder)))


def is_ensemble_name(lake: Lake, name: str) -> bool:
    folder = configs_dir(lake)
    return name not in config_files(folder) and name in ensemble_files(folder)


def _write_if_changed(target: Path, text: str) -> None:
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def eval_config_name(lake: Lake, name: str, questions: Path) -> str:
    """The config to run for `name` on `questions`: `name` itself when it already uses that
    file, else a derived config `<name>--<csv stem>` written next to it. `default` is
    written from the defaults if absent."""
    folder = configs_dir(lake)
    files = config_files(folder)
    questions = questions.resolve()
    refuse_path(name, "config", folder)
    if name not in files:
        if name != "default":
            raise ValueError(f"config {name!r}: no {name}.toml or {name}.json in {folder}")
        _write_if_changed(folder / "default.toml", dump_toml(QAConfig(questions=str(questions))))
        return name
    cfg = load_qa_config(files[name])
    if Path(cfg.questions).resolve() == questions:
        return name
    derived = check_key(f"{name}--{questions.stem}")
    # the derived file names its source (never a copy of its credentials); a derived config
    # re-aimed again names the same source
    base = derived_base(files[name]) or name
    _write_if_changed(folder / f"{derived}.json", dump_derived(base, questions))
    return derived


def eval_ensemble_name(lake: Lake, name: str, questions: Path) -> str:
    """The ensemble spec to run for `name` on `questions`: `name` itself when its members
    already use that file, else a derived spec `<name>--<csv stem>` over derived members."""
    spec = spec_of(lake, name)
    members = tuple(eval_config_name(lake, member, questions) for member in spec.configs)
    if members == spec.configs:
        return name
    derived = check_key(f"{name}--{questions.resolve().stem}")
    target = ensembles_dir(configs_dir(lake)) / f"{derived}.json"
    _write_if_changed(target, dump_spec(dataclasses.replace(spec, configs=members)))
    return derived
