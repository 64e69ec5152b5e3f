"""llama.cpp's CPU code picked for the running CPU, from a portable install.

Why: `make install` builds llama-cpp-python with `GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON`,
llama.cpp's portable way to be fast: the CPU code is compiled once per CPU generation (x64,
AVX2 "haswell", AVX-512 "skylakex", "icelake", AVX-VNNI "alderlake": the ones real x86-64
machines need, tools/llama_cpp_wheel.py) as separate libraries, and at load time ggml scores
each against the running CPU and loads the best. Measured on
this project's 2-core machine: prompt prefill 103 tok/s with the AVX-512 variant against
67-74 tok/s for the AVX2-only build, generation unchanged.

llama-cpp-python 0.3.36 does not load those libraries itself (llama.cpp then refuses every
model: "no backends are loaded"), so `ensure_cpu_backend` does, through ggml's public C API
(`ggml_backend_load_all_from_path`) on the very `libggml` that llama.cpp was linked against.
A build with the CPU code linked in (the older portable build, or a custom one) needs
nothing and is left as it is.
"""

from __future__ import annotations

import ctypes
import logging
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuBackend", "ensure_cpu_backend", "variant_dirs"]

_GGML = re.compile(r"/libggml\.so(\.\d+)*$")
_VARIANT = re.compile(r"libggml-cpu-([\w-]+)\.(so|dylib|dll)$")
_lock = threading.Lock()
_loaded: CpuBackend | None = None


@dataclass(frozen=True)
class CpuBackend:
    """Which CPU code llama.cpp runs: `variant` is e.g. "zen4" or "haswell" for a build
    with per-CPU variants, "built in" for a build with the CPU code linked in."""

    variant: str
    path: Path | None = None

    def __str__(self) -> str:
        return f"llama.cpp CPU backend: {self.variant}" + (f" ({self.path.name})" if self.path else "")


def variant_dirs(package_dir: Path) -> list[Path]:
    """Where a wheel built with per-CPU variants puts them: llama.cpp installs its backend
    modules to the install's `bin` (site-packages/bin), llama-cpp-python its own libraries
    to `llama_cpp/lib`; either may hold them."""
    candidates = [package_dir / "lib", package_dir.parent / "bin"]
    return [d for d in candidates if d.is_dir() and any(_VARIANT.search(p.name) for p in d.iterdir())]


def ensure_cpu_backend() -> CpuBackend:
    """Load the best CPU variant for this CPU if llama.cpp has no CPU backend yet.

    Idempotent and thread-safe; call it before the first `llama_cpp.Llama(...)`. Raises
    RuntimeError naming the fix when the build has no CPU code at all.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        import llama_cpp  # loads libllama and, through it, libggml

        package_dir = Path(llama_cpp.__file__).parent
        ggml = _linked_ggml(package_dir)
        ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
        if ggml.ggml_backend_reg_count() > 0:
            _loaded = CpuBackend("built in")
            return _loaded
        quiet = logging.getLogger("llama-cpp-python")  # ggml's "load_backend: ..." line; we report our own
        if quiet.level == logging.NOTSET:
            quiet.setLevel(logging.ERROR)
        ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        ggml.ggml_backend_load_all_from_path.restype = None
        for directory in variant_dirs(package_dir):
            ggml.ggml_backend_load_all_from_path(str(directory).encode())
            if ggml.ggml_backend_reg_count() > 0:
                _loaded = CpuBackend(*_loaded_variant())
                return _loaded
        raise RuntimeError(
            f"llama.cpp in {package_dir} was built with dynamic backends but no CPU variant "
            "library (libggml-cpu-*.so) loads on this machine; reinstall it with `make install`"
        )


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


def _loaded_variant() -> tuple[str, Path | None]:
    for path in _mapped_libraries():
        found = _VARIANT.search(path)
        if found:
            return found.group(1), Path(path)
    return "loaded", None


def _mapped_libraries() -> list[str]:
    """The ggml libraries this process has loaded (Linux; elsewhere none are known)."""
    if not sys.platform.startswith("linux"):
        return []
    with open("/proc/self/maps", encoding="utf-8") as maps:
        fields = (line.split() for line in maps)
        return sorted({f[-1] for f in fields if len(f) >= 6 and "libggml" in f[-1]})
