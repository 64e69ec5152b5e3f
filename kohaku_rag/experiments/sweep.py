"""A sweep: a base config, a grid (or list) of overrides, and N seeds, as one file.

`<configs>/sweeps/<name>.toml` (or .json):

    base = "default"              # a config of the configs folder, or a [base] table of config keys
    seeds = 3                     # every member runs 3 times (run r has seed r) and votes them
    [grid]                        # every combination of these values is a member
    top_k_final = [8, 16]         # a key unique to one table may be written bare...
    "generation.temperature" = [0.2, 0.7]   # ...or dotted
    [[variants]]                  # optional: each table is one more override set (× the grid)
    "retrieval.rerank" = "score"

Each member is written as an ordinary config file `<configs>/<sweep>--<key>-<value>...json`,
so it is a config partition like any other (the sensors, `kohaku eval`, `config show`,
the leaderboard all see it) and shares what config hashing shares: members differing only
in generation keys reuse one retrieval table, and a member already computed is reused.
`seeds = N` is `[voting] runs = N`: a member's runs are its seeds, its ensemble their vote.
Members a sweep no longer lists (the grid was edited) are removed with their files.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import config_to_mapping, dump_json, load_qa_config, qa_config_from_mapping
from kohaku_rag.config_files import ConfigKeyError, locate, named_files, read_config_data, stable_hash
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import check_key, write_bytes_atomic

__all__ = [
    "SWEEPS_FOLDER",
    "Member",
    "Sweep",
    "expand",
    "load_sweep",
    "member_names",
    "sweep_files",
    "sweep_members",
    "sweep_of",
    "sweeps_dir",
    "write_members",
    "write_text",
]

SWEEPS_FOLDER = "sweeps"
SWEEP_KEYS = ("base", "seeds", "grid", "variants")
# The config tables an unqualified key is looked up in, in this order.
TABLES = ("retrieval", "generation", "generation.llm", "voting")


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    base: QAConfig
    seeds: int
    grid: tuple[tuple[str, tuple[Any, ...]], ...]  # (dotted key, values) in file order
    variants: tuple[tuple[tuple[str, Any], ...], ...]  # each: (dotted key, value) pairs

    @property
    def keys(self) -> tuple[str, ...]:
        """Every swept key (grid keys, then variant keys), dotted."""
        return tuple(dict.fromkeys([k for k, _ in self.grid] + [k for v in self.variants for k, _ in v]))


@dataclass(frozen=True)
class Member:
    name: str
    overrides: tuple[tuple[str, Any], ...]  # (dotted key, value)
    config: QAConfig


def sweeps_dir(lake: Lake) -> Path:
    return configs_dir(lake) / SWEEPS_FOLDER


def sweep_files(lake: Lake) -> dict[str, Path]:
    """name -> file of every sweep in `<configs>/sweeps/`."""
    return named_files(sweeps_dir(lake), "sweep")


def sweep_of(lake: Lake, name: str) -> Sweep:
    path = sweep_files(lake).get(check_key(name))
    if path is None:
        raise ValueError(f"sweep {name!r}: no {name}.toml or {name}.json in {sweeps_dir(lake)}")
    return load_sweep(lake, path)


def _flatten(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested TOML tables (`retrieval.top_k = [...]` unquoted) as dotted keys."""
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _flatten(value, dotted + ".")
        else:
            out.append((dotted, value))
    return out


def _resolve(key: str, mapping: dict[str, Any], where: str) -> str:
    """The dotted config key `key` names: as written when it exists, else the one table that
    has a key of that name."""

    def has(path: str) -> bool:
        node: Any = mapping
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return not isinstance(node, dict)

    if has(key):
        return key
    found = [f"{t}.{key}" for t in TABLES if has(f"{t}.{key}")]
    if len(found) == 1:
        return found[0]
    if found:
        raise ConfigKeyError(f"{where}.{key}", f"ambiguous: write one of {', '.join(found)}")
    raise ConfigKeyError(f"{where}.{key}", "not a config key (see `kohaku config show default` for every key)")


def _base_config(lake: Lake, path: Path, base: Any) -> QAConfig:
    if base is None or isinstance(base, str):
        name = base or "default"
        files = config_files(configs_dir(lake))
        if name not in files:
            raise ConfigKeyError("base", f"no config {name!r} in {configs_dir(lake)}")
        return load_qa_config(files[name])
    if isinstance(base, dict):
        return qa_config_from_mapping(base, path.parent)
    raise ConfigKeyError("base", f"expected a config name or a table of config keys, got {json.dumps(base)}")


def load_sweep(lake: Lake, path: Path) -> Sweep:
    """A sweep file; errors name the file, the line and the key."""
    path = Path(path)
    name = check_key(path.stem)
    data = read_config_data(path)
    try:
        unknown = sorted(set(data) - set(SWEEP_KEYS))
        if unknown:
            raise ConfigKeyError(unknown[0], f"unknown sweep keys {unknown}; known: {', '.join(SWEEP_KEYS)}")
        base = _base_config(lake, path, data.get("base"))
        mapping = config_to_mapping(base)
        seeds = data.get("seeds", base.voting.runs)
        if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
            raise ConfigKeyError("seeds", f"expected a whole number >= 1, got {json.dumps(seeds)}")
        grid_table = data.get("grid") or {}
        if not isinstance(grid_table, dict):
            raise ConfigKeyError("grid", "expected a table of key = [values]")
        grid = []
        for key, values in _flatten(grid_table):
            if not isinstance(values, list) or not values:
                raise ConfigKeyError(f"grid.{key}", f"expected a non-empty list of values, got {json.dumps(values)}")
            grid.append((_resolve(key, mapping, "grid"), tuple(values)))
        raw_variants = data.get("variants") or []
        if not isinstance(raw_variants, list) or not all(isinstance(v, dict) for v in raw_variants):
            raise ConfigKeyError("variants", "expected a list of tables ([[variants]])")
        variants = tuple(tuple((_resolve(k, mapping, "variants"), v) for k, v in _flatten(t)) for t in raw_variants)
        swept = [k for k, _ in grid] + [k for v in variants for k, _ in v]
        if "seeds" in data and "voting.runs" in swept:
            raise ConfigKeyError("seeds", "seeds sets [voting] runs of every member: sweep one or the other")
    except ConfigKeyError as exc:
        raise ValueError(locate(path, exc, what="sweep file")) from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sweep file {path}: {exc}") from exc
    return Sweep(name, path, base, seeds, tuple(grid), variants)


def _slug(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "_".join(_slug(v) for v in value)
    return re.sub(r"[^A-Za-z0-9._]+", "_", str(value)).strip("_") or "x"


def _short(key: str, keys: tuple[str, ...]) -> str:
    """The key's last part, or the whole dotted key where two swept keys share that part."""
    last = key.rsplit(".", 1)[-1]
    return last if sum(k.rsplit(".", 1)[-1] == last for k in keys) == 1 else key


def _set(mapping: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = mapping
    for part in parents:
        node = node[part]
    node[leaf] = value


def expand(sweep: Sweep) -> list[Member]:
    """Every member: each grid point × each variant (or the grid alone), with `seeds` runs."""
    points = [
        tuple(zip([k for k, _ in sweep.grid], combo, strict=True))
        for combo in itertools.product(*(v for _, v in sweep.grid))
    ]
    overrides = [p + v for p in points for v in (sweep.variants or ((),))]
    members, seen = [], set()
    for pairs in overrides:
        suffix = "--".join(f"{_short(k, sweep.keys)}-{_slug(v)}" for k, v in pairs)
        name = f"{sweep.name}--{suffix}" if suffix else sweep.name
        if len(name) > 200:  # partition keys are file names: a long list of values is hashed
            name = f"{sweep.name}--{stable_hash([list(p) for p in pairs])[:12]}"
        check_key(name)
        if name in seen:
            raise ValueError(f"sweep file {sweep.path}: two members would both be named {name}")
        seen.add(name)
        mapping = json.loads(json.dumps(config_to_mapping(sweep.base), default=list))
        for key, value in pairs:
            _set(mapping, key, value)
        mapping["voting"]["runs"] = sweep.seeds
        try:
            cfg = qa_config_from_mapping(mapping)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"sweep file {sweep.path}: member {name}: {exc}") from exc
        members.append(Member(name, pairs, cfg))
    return members


def write_text(path: Path, text: str) -> None:
    """Atomically, readable like any file a person edits or opens (not the temp file's 0600)."""
    write_bytes_atomic(path, text.encode("utf-8"))
    path.chmod(0o644)


def _manifest(lake: Lake, name: str) -> Path:
    return lake.root / "qa" / "sweeps" / f"{name}.json"


def member_names(lake: Lake, name: str) -> list[str]:
    """The members the sweep was last expanded into (empty when it never was)."""
    path = _manifest(lake, name)
    return list(json.loads(path.read_text(encoding="utf-8"))["members"]) if path.exists() else []


def sweep_members(lake: Lake) -> set[str]:
    """Every member of every sweep of the folder, as last expanded."""
    return {m for name in sweep_files(lake) for m in member_names(lake, name)}


def write_members(lake: Lake, sweep: Sweep) -> tuple[list[Member], list[str]]:
    """Write each member's config file (unchanged files are left untouched, so their
    content hash, and the configs sensor's view of them, stays the same) and remove the
    files of members the sweep no longer lists. Returns (members, removed names)."""
    members = expand(sweep)
    folder = configs_dir(lake)
    existing = config_files(folder)
    ours = set(member_names(lake, sweep.name))
    texts = {m.name: dump_json(m.config) for m in members}
    for m in members:  # check every member before writing any: a refused sweep writes nothing
        path = existing.get(m.name)
        if path is not None and m.name not in ours and path.read_text(encoding="utf-8") != texts[m.name]:
            raise ValueError(
                f"sweep file {sweep.path}: member {m.name} would overwrite {path}, a config this sweep did not "
                "write; rename the sweep or that config"
            )
    for m in members:
        target = folder / f"{m.name}.json"
        if not target.exists() or target.read_text(encoding="utf-8") != texts[m.name]:
            write_text(target, texts[m.name])
    names = [m.name for m in members]
    removed = [n for n in member_names(lake, sweep.name) if n not in names]
    for n in removed:
        (folder / f"{n}.json").unlink(missing_ok=True)
    manifest = {"members": names, "keys": list(sweep.keys), "seeds": sweep.seeds}
    write_text(_manifest(lake, sweep.name), json.dumps(manifest, indent=2))
    return members, removed
