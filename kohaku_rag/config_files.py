"""Config files (TOML or JSON) read into frozen dataclasses, and their stable hashes.

A hash is the SHA-256 of the canonical JSON of the dataclass, so a key order change or a
file rename never invalidates anything, and any value change always does.

A numeric field declares its sane range next to it, `top_k: Annotated[int, Range(0, 4096)]`:
a file's value outside it is refused at load (file, line, key). The range bounds what a
person writes, not what the code derives (a deeper retry multiplies top_k and the budget),
so it is not checked when a config is built in Python. The annotation changes no hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kohaku_rag.errors import KohakuError

T = TypeVar("T")
CONFIG_SUFFIXES = (".toml", ".json")


def stable_hash(obj: Any, length: int = 16) -> str:
    payload = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else obj
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


class ConfigKeyError(KohakuError, ValueError):
    """A config value that is wrong: `key` is its dotted path (e.g. "retrieval.rerank")."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.reason = message


@dataclass(frozen=True)
class Range:
    """The allowed values of a numeric config key: `low <= value <= high` (either end None for
    no bound; `low_open`: strictly above `low`, for a timeout that must be > 0)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def problem(self, name: str, value: float) -> str | None:
        """Why `value` is outside the range (None when inside), naming the key `name`."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return f"{name} must be {'greater than' if self.low_open else 'at least'} {_number(self.low)}, got {value}"
        if self.high is not None and value > self.high:
            return f"{name} must be at most {_number(self.high)}, got {value}"
        return None


def _number(x: float) -> str:
    """10000000.0 as 10000000, 0.5 as 0.5 (never 1e+07)."""
    return str(int(x)) if float(x).is_integer() else repr(x)


# Shared ranges: one request's timeout (an hour is already absurd for one HTTP call) and
# the retries of a transient failure (back-off doubles each time).
SECONDS = Range(0.0, 3600.0, low_open=True)
RETRIES = Range(0, 20)


def _ranges(hint: Any) -> tuple[Any, list[Range]]:
    """(the type under an Annotated hint, its Range metadata)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return hint, []
    inner, *meta = typing.get_args(hint)
    return inner, [m for m in meta if isinstance(m, Range)]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A class's type hints with their Annotated metadata (resolved once per class)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return _HINTS[cls]


def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def check_value(hint: Any, value: Any, key: str) -> Any:
    """`value` checked against the type hint `hint` (Literal members, bool/int/float/str,
    tuples of them, optional values, nested dataclasses); returns the value to use (a list
    becomes a tuple, the string "none" becomes None where None is allowed and a string is
    not). Raises ConfigKeyError naming `key`, the value and what is allowed (a number
    outside its declared `Range` too)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        inner, bounds = _ranges(hint)
        value = check_value(inner, value, key)
        for bound in bounds:
            problem = bound.problem(key.rsplit(".", 1)[-1], value) if value is not None else None
            if problem:
                raise ConfigKeyError(key, problem)
        return value
    if origin is typing.Literal:
        allowed = typing.get_args(hint)
        if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
            listed = ", ".join(json.dumps(a) for a in allowed)
            raise ConfigKeyError(key, f"{json.dumps(value, default=str)} is not one of the allowed values: {listed}")
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        text_allowed = any(o is str or typing.get_origin(o) is typing.Literal for o in options)
        if isinstance(value, str) and value.strip().lower() in ("none", "null") and not text_allowed:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return check_value(option, value, key)
            except ConfigKeyError as exc:
                errors.append(exc.reason)
        if len(errors) == 1:
            raise ConfigKeyError(key, errors[0] + ' (or "none")')
        names = " or ".join(_type_name(o) for o in options)
        raise ConfigKeyError(key, f"expected {names}, got {type(value).__name__} {json.dumps(value, default=str)}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigKeyError(key, f"expected a list, got {type(value).__name__} {json.dumps(value, default=str)}")
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return tuple(check_value(item, v, f"{key}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if isinstance(value, hint):
            return value
        if not isinstance(value, dict):
            raise ConfigKeyError(key, f"expected a table of {hint.__name__} keys, got {type(value).__name__}")
        return from_mapping(hint, value, key)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigKeyError(key, f"expected true or false, got {type(value).__name__} {json.dumps(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigKeyError(
                key, f"expected an integer, got {type(value).__name__} {json.dumps(value, default=str)}"
            )
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigKeyError(key, f"expected a number, got {type(value).__name__} {json.dumps(value, default=str)}")
        if not math.isfinite(value):  # TOML can say inf and nan
            raise ConfigKeyError(key, f"expected a finite number, got {value}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigKeyError(key, f"expected a string, got {type(value).__name__} {json.dumps(value, default=str)}")
        return value
    return value  # Any, dicts and other types are not checked here


def from_mapping(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build a (possibly nested) frozen dataclass, refusing unknown keys with their names and
    values of the wrong type or outside their allowed set (ConfigKeyError names the key's
    dotted path under `where`). A check in the class's own `__post_init__` whose message
    starts with a field's name is reported under that key."""
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names))
    if unknown:
        first = f"{where}.{unknown[0]}" if where else unknown[0]
        raise ConfigKeyError(first, f"unknown {cls.__name__} keys {unknown}; known keys: {sorted(names)}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else key
        kwargs[key] = check_value(hints[key], value, path) if key in hints else value
    try:
        return cls(**kwargs)
    except ConfigKeyError:
        raise
    except (TypeError, ValueError) as exc:
        message = str(exc)
        first = re.split(r"[\s:]", message.strip(), maxsplit=1)[0] if message.strip() else ""
        if first in names:
            raise ConfigKeyError(f"{where}.{first}" if where else first, message) from exc
        raise ConfigKeyError(where, message) from exc


_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")


def key_line(text: str, key: str, toml: bool = True) -> int | None:
    """The 1-based line of the dotted `key` in a config file's text (None if not found).
    TOML: `name = ...` inside the table `[a.b]` (or `a.b.name = ...` at the top);
    JSON: the first `"name":` (after the parent keys' lines)."""
    parts = [p for p in re.sub(r"\[\d+\]", "", key).split(".") if p]
    if not parts:
        return None
    table, name = ".".join(parts[:-1]), parts[-1]
    lines = text.splitlines()
    if not toml:
        start = 0
        for part in parts[:-1]:
            found = next((i for i in range(start, len(lines)) if f'"{part}"' in lines[i]), None)
            start = found if found is not None else start
        pattern = re.compile(rf'"{re.escape(name)}"\s*:')
        return next((i + 1 for i in range(start, len(lines)) if pattern.search(lines[i])), None)
    current = ""
    plain = re.compile(rf'^\s*["\']?{re.escape(name)}["\']?\s*=')
    dotted = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(lines, start=1):
        header = _TABLE.match(line)
        if header:
            current = header.group(1).strip().strip("[]").strip()
            continue
        if (current == table and plain.match(line)) or (not current and dotted.match(line)):
            return number
    return None


def locate(path: Path, exc: ConfigKeyError, aliases: dict[str, str] | None = None, what: str = "config file") -> str:
    """`config file PATH, line N, key K: reason` for an error about one key of a file (the
    line of its alias when the file used one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    line = key_line(text, exc.key, path.suffix == ".toml") if exc.key else None
    for alias, target in (aliases or {}).items():
        if line is None and exc.key.split(".")[-1] == target:
            line = key_line(
                text, exc.key.rsplit(".", 1)[0] + "." + alias if "." in exc.key else alias, path.suffix == ".toml"
            )
            line = line or key_line(text, alias, path.suffix == ".toml")
    where = f"{what} {path}" + (f", line {line}" if line else "")
    return f"{where}: {exc}"


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
    except ConfigKeyError as exc:
        raise ValueError(locate(path, exc)) from exc
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
