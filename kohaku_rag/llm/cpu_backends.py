"""llama.cpp's per-CPU code libraries, listed, scored and loaded one at a time.

Why: `make install` builds llama-cpp-python with `GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON`,
llama.cpp's portable way to be fast: the CPU code is compiled once per CPU generation (x64,
AVX2 "haswell", AVX-512 "icelake": tools/llama_cpp_wheel.py) as separate libraries. Measured on this project's
2-core machine: prompt prefill 103 tok/s with an AVX-512 variant against 67-74 tok/s for the
AVX2-only build, generation unchanged.

llama.cpp's own loader scores each library against the CPU's flags and loads the best, and
trusts it: a variant the flags advertise but the machine can't run (a hypervisor hiding
state, an instruction set shipped with a bug) kills the process at its first answer. So this
module only offers the pieces: which libraries there are, how each scores, and loading one
chosen library through ggml's public C API (`ggml_backend_load`) on the very `libggml` that
llama.cpp was linked against. Which one is chosen, after it ran here, is `cpu_verdicts.py`'s
job. A build with the CPU code linked in needs nothing and is left as it is.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "VARIANTS_ENV",
    "CpuBackend",
    "builtin_backend",
    "load_variant",
    "llama_package_dir",
    "variant_dirs",
    "variant_folder",
    "variant_libraries",
    "variant_score",
]

# A folder of libggml-cpu-*.so to choose from instead of the install's (a custom build; tests).
VARIANTS_ENV = "KOHAKU_LLAMA_VARIANTS"
_GGML = re.compile(r"/libggml\.so(\.\d+)*$")
_VARIANT = re.compile(r"libggml-cpu-([\w.-]+)\.(so|dylib|dll)$")


@dataclass(frozen=True)
class CpuBackend:
    """Which CPU code llama.cpp runs: `variant` is e.g. "icelake" or "haswell" for a build
    with per-CPU variants, "built in" for a build with the CPU code linked in. `kept_out`
    names the better variants that failed their trial here, each with what happened."""

    variant: str
    path: Path | None = None
    kept_out: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        line = f"llama.cpp CPU backend: {self.variant}"
        if self.kept_out:
            failed = "; ".join(f"{name} {reason}" for name, reason in self.kept_out)
            line += f" ({failed}; kept out)"
        return line


def llama_package_dir() -> Path:
    """The installed `llama_cpp` package (importing it loads libllama and libggml)."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent


def variant_dirs(package_dir: Path) -> list[Path]:
    """Where a wheel built with per-CPU variants puts them: llama.cpp installs its backend
    modules to the install's `bin` (site-packages/bin), llama-cpp-python its own libraries
    to `llama_cpp/lib`; either may hold them."""
    candidates = [package_dir / "lib", package_dir.parent / "bin"]
    return [d for d in candidates if d.is_dir() and any(_VARIANT.search(p.name) for p in d.iterdir())]


def variant_folder(package_dir: Path) -> Path | None:
    """The folder whose variants this process chooses from: $KOHAKU_LLAMA_VARIANTS, else the
    install's; None for a build with no per-CPU variants."""
    override = os.environ.get(VARIANTS_ENV)
    if override:
        return Path(override)
    found = variant_dirs(package_dir)
    return found[0] if found else None


def variant_libraries(folder: Path) -> dict[str, Path]:
    """Variant name -> its library, for every libggml-cpu-*.so in `folder`."""
    found = {}
    for path in sorted(folder.iterdir()):
        name = _VARIANT.search(path.name)
        if name:
            found[name.group(1)] = path
    return found


def builtin_backend(package_dir: Path) -> CpuBackend | None:
    """`CpuBackend("built in")` when llama.cpp already has a CPU backend (a build with the
    CPU code linked in, or a variant this process loaded), else None."""
    ggml = _linked_ggml(package_dir)
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    if ggml.ggml_backend_reg_count() == 0:
        return None
    loaded = _loaded_variant()
    return CpuBackend(*loaded) if loaded else CpuBackend("built in")


def variant_score(library: Path) -> int:
    """The library's own score for this CPU (0: it can't run here), as llama.cpp's loader
    reads it. Opening a library runs its initialisers: only a trial process calls this."""
    lib = ctypes.CDLL(str(library))
    score = lib.ggml_backend_score
    score.restype = ctypes.c_int
    return int(score())


def load_variant(package_dir: Path, library: Path) -> CpuBackend:
    """Load one variant library as llama.cpp's CPU backend. Raises RuntimeError when ggml
    refuses it (not for this CPU, another API version, not a backend)."""
    ggml = _linked_ggml(package_dir)
    ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    if not ggml.ggml_backend_load(str(library).encode()):
        raise RuntimeError(f"llama.cpp refused the CPU variant {library}: not for this CPU, or not a ggml backend")
    name = _VARIANT.search(library.name)
    return CpuBackend(name.group(1) if name else library.name, library)


def _linked_ggml(package_dir: Path) -> ctypes.CDLL:
    """The libggml that libllama was linked against. A wheel stores `libggml.so` and
    `libggml.so.0` as two copies of one file, so opening the wrong name would load a second
    ggml with its own (empty) backend registry; the loaded one is read from the process's
    memory map where there is one."""
    for path in _mapped_libraries():
        if _GGML.search(path):
            return ctypes.CDLL(path)
    names = ("libggml.so.0", "libggml.so", "libggml.dylib", "ggml.dll")
    for name in names:
        if (package_dir / "lib" / name).is_file():
            return ctypes.CDLL(str(package_dir / "lib" / name))
    raise RuntimeError(f"no libggml library beside llama.cpp in {package_dir / 'lib'}")


def _loaded_variant() -> tuple[str, Path] | None:
    for path in _mapped_libraries():
        found = _VARIANT.search(path)
        if found:
            return found.group(1), Path(path)
    return None


def _mapped_libraries() -> list[str]:
    """The ggml libraries this process has loaded (Linux; elsewhere none are known)."""
    if not sys.platform.startswith("linux"):
        return []
    with open("/proc/self/maps", encoding="utf-8") as maps:
        fields = (line.split() for line in maps)
        return sorted({f[-1] for f in fields if len(f) >= 6 and "libggml" in f[-1]})
