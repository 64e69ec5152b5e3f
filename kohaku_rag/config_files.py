"""Config files (TOML or JSON) read into frozen dataclasses, and their stable hashes.

A hash is the SHA-256 of the canonical JSON of the dataclass, so a key order change or a
file rename never invalidates anything, and any value change always does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
CONFIG_SUFFIXES = (".toml", ".json")


def stable_hash(obj: Any, length: int = 16) -> str:
    payload = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else obj
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


def from_mapping(cls: type[T], data: dict[str, Any]) -> T:
    """Build a (possibly nested) frozen dataclass, refusing unknown keys with their names."""
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; known keys: {sorted(names)}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        target = hints.get(key)
        nested = dataclasses.is_dataclass(target) and isinstance(value, dict)
        kwargs[key] = from_mapping(target, value) if nested else value  # type: ignore[arg-type]
    return cls(**kwargs)


def read_config_data(path: Path) -> dict[str, Any]:
    """The parsed contents of a TOML or JSON config file, with an error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"config file {path}: expected a table of keys, got {type(data).__name__}")
    return data


def load_config_file(path: Path, cls: type[T]) -> T:
    """Read a TOML or JSON config file into `cls`, with an error naming the file."""
    data = read_config_data(path)
    try:
        return from_mapping(cls, data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc


def named_files(folder: Path, what: str) -> dict[str, Path]:
    """name -> file of every config file in `folder`, named by its stem (hidden files skipped;
    a name used twice, as a.toml and a.json, is an error naming both)."""
    folder = Path(folder)
    found: dict[str, Path] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.iterdir()):
        if path.suffix not in CONFIG_SUFFIXES or path.name.startswith("."):
            continue
        if path.stem in found:
            raise ValueError(f"{what} {path.stem!r} is defined twice: {found[path.stem].name} and {path.name}")
        found[path.stem] = path
    return found
