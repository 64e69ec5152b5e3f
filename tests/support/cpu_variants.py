"""Folders of llama.cpp CPU variants for tests: the install's real ones beside fakes that crash,
hang or compute wrong (fake_cpu_variant.c, compiled here with the system `cc`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_cpu_variant.c")


def real_variants() -> dict[str, Path]:
    from kohaku_rag.llm.cpu_backends import llama_package_dir, variant_folder, variant_libraries

    folder = variant_folder(llama_package_dir())
    assert folder is not None, "this llama.cpp has no per-CPU variants (make install builds them)"
    return variant_libraries(folder)


def best_real_variant() -> str:
    """The real variant llama.cpp's own scores put first on this CPU."""
    from kohaku_rag.llm.cpu_backends import llama_package_dir, variant_folder

    folder = variant_folder(llama_package_dir())
    done = subprocess.run(
        [sys.executable, "-m", "kohaku_rag.llm.cpu_verdicts", "rank", str(folder), ""],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    result = next(line for line in done.stdout.splitlines() if line.startswith("result "))
    return str(json.loads(result[len("result ") :])[0])


def fake_variant(folder: Path, name: str, mode: str | None, wraps: Path, score: int = 1 << 20) -> Path:
    """libggml-cpu-<name>.so in `folder`: `wraps` with its compute entry point made to
    CRASH (SIGILL), HANG or compute WRONG; `mode=None` passes through. It scores `score`,
    above every real variant."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) builds the fake variant"
    out = folder / f"libggml-cpu-{name}.so"
    flags = [f'-DREAL_VARIANT="{wraps}"', f"-DSCORE={score}", *([f"-D{mode}"] if mode else [])]
    subprocess.run([cc, "-shared", "-fPIC", "-O1", *flags, "-o", str(out), str(SOURCE), "-ldl"], check=True)
    return out


def variant_folder_with(tmp: Path, *fakes: tuple[str, str | None, int]) -> Path:
    """A folder holding links to the install's real variants and the given fakes
    (name, mode, score), each fake wrapping the best real variant."""
    folder = tmp / "variants"
    folder.mkdir()
    real = real_variants()
    for path in real.values():
        (folder / path.name).symlink_to(path)
    best = real[best_real_variant()]
    for name, mode, score in fakes:
        fake_variant(folder, name, mode, best, score)
    return folder
