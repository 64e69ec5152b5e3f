"""Build llama-cpp-python's wheel with the CPU variants real x86-64 machines need, once.

Why: llama.cpp's portable build (`GGML_BACKEND_DL=ON GGML_CPU_ALL_VARIANTS=ON`) compiles its
CPU code once per CPU generation and picks the best at load time
(kohaku_rag/llm/cpu_backends.py), which keeps the speed of the running CPU (on our AMD EPYC:
prefill 103 tok/s with an AVX-512 variant, 67-74 with AVX2 only). But it compiles 14 x86
variants, and a cold `make install` took 7-11 minutes. `KEPT_VARIANTS` covers every x86-64
CPU (x64 is the fallback that loads anywhere) and gives the common generations fast code; a CPU
between two kept variants gets the lower. libllama is compiled at -O1 (its hot loops are
ggml's), which cut its compile time by a third with no loss of speed measured.
Neither does the Python binding use llama.cpp's `common` library or the multimodal `mtmd`
library (LLAVA_BUILD), so neither is built.

llama.cpp lists the variants in ggml/src/CMakeLists.txt with no option to choose them, so this
downloads the pinned sdist with pip, drops the other `ggml_add_cpu_backend_variant(...)` lines
(failing loudly if the file is not as expected), builds the wheel and keeps it under a key of
everything that shapes it, so a later install reuses it in seconds.

Usage: python tools/llama_cpp_wheel.py VERSION WHEEL_CACHE   (prints the wheel's path)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# Lowest first, with the CPUs each is the best kept variant for. Each costs its compile time
# in a cold `make install` (2 cores, .ninja_log, CPU seconds): x64 87, haswell 127, icelake 135;
# libllama itself 297 (at -O1, below), ggml's base 67. Left out to keep a cold install within
# 6 minutes: "skylakex" (AVX-512 only, 135 s: Skylake-SP/Cascade Lake servers now run haswell,
# AVX2) and "alderlake" (AVX-VNNI, 106 s: Intel 12th-gen desktops run haswell). Not
# "sapphirerapids" (AMX tiles): llama.cpp's AMX matmul dies with SIGILL on Sapphire Rapids VMs
# (the tile permission is requested in one thread, used in others), and compiling it doubled a
# cold install; those Xeons run "icelake". Whatever is kept, a variant is tried on the machine
# before it is trusted (kohaku_rag/llm/cpu_verdicts.py).
KEPT_VARIANTS = (
    "x64",  # any x86-64 (the fallback: pre-2013 CPUs, unusual emulators)
    "haswell",  # AVX2+FMA: Intel 2013-2021 (Skylake-SP, Cascade Lake, Alder Lake too), AMD Zen 1-3
    "icelake",  # AVX-512 VBMI+VNNI: Ice Lake and Sapphire/Emerald/Granite Rapids servers, AMD Zen 4-5
)
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_CPU_ALL_VARIANTS=ON",
    "-DLLAVA_BUILD=OFF",
)
RECIPE = 3  # raise when the patch below changes, so no wheel built the old way is reused
_VARIANT_LINE = re.compile(r"^\s*ggml_add_cpu_backend_variant\((\w+)[^)]*\)\s*$")
_COMMON_ON = 'set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'


def wheel_key(version: str) -> str:
    """What the wheel is built from: the version, the kept variants, the CMake flags."""
    recipe = f"{version} {RECIPE} {' '.join(KEPT_VARIANTS)} {' '.join(CMAKE_ARGS)}"
    return f"{version}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def keep_variants(cmake_text: str, kept: tuple[str, ...] = KEPT_VARIANTS) -> str:
    """ggml/src/CMakeLists.txt with only the `kept` x86 variants (other architectures'
    lists untouched). Raises ValueError when a kept variant is not in the file."""
    lines = cmake_text.splitlines(keepends=True)
    begin = next((i for i, line in enumerate(lines) if line.strip() == "if (GGML_CPU_ALL_VARIANTS)"), len(lines))
    start = next((i for i in range(begin, len(lines)) if 'GGML_SYSTEM_ARCH STREQUAL "x86"' in lines[i]), None)
    end = next((i for i in range(start or len(lines), len(lines)) if lines[i].strip().startswith("elseif")), None)
    if start is None or end is None:
        raise ValueError("no x86 variant list in ggml/src/CMakeLists.txt: llama.cpp changed its layout")
    found: list[str] = []
    out = lines[: start + 1]
    for line in lines[start + 1 : end]:
        variant = _VARIANT_LINE.match(line)
        if variant and variant.group(1) not in kept:
            continue
        if variant:
            found.append(variant.group(1))
        out.append(line)
    missing = [v for v in kept if v not in found]
    if missing:
        raise ValueError(f"x86 variants {missing} are not in ggml/src/CMakeLists.txt: llama.cpp renamed them")
    return "".join(out + lines[end:])


_LLAMA_FEATURES = "target_compile_features   (llama PRIVATE cxx_std_17) # don't bump"
# Measured (.ninja_log of a cold build, 2 cores): libllama took 448 s of compile time at -O3,
# more than the five CPU variants' 570 s together. Its hot loops are ggml's (the variants),
# not its own, so it is built at -O1, and the parts that run per generated token (the
# grammar, the sampler, the tokenizer) at -O2.
_LLAMA_LIGHTER = """
# kohaku-lake (tools/llama_cpp_wheel.py): libllama at -O1; its per-token code at -O2
target_compile_options(llama PRIVATE -O1)
set_source_files_properties(llama-grammar.cpp llama-sampler.cpp llama-vocab.cpp unicode.cpp
    PROPERTIES COMPILE_OPTIONS -O2)
"""


def lighter_llama(cmake_text: str) -> str:
    """llama.cpp's src/CMakeLists.txt with libllama compiled at lower optimisation (see above)."""
    if _LLAMA_FEATURES not in cmake_text:
        raise ValueError("llama.cpp's src/CMakeLists.txt changed its llama target: check the -O1 patch")
    return cmake_text.replace(_LLAMA_FEATURES, _LLAMA_FEATURES + "\n" + _LLAMA_LIGHTER, 1)


def without_common(cmake_text: str) -> str:
    """llama-cpp-python's CMakeLists.txt without llama.cpp's `common` library (a C++ library
    for llama.cpp's own programs; the binding calls the C API only)."""
    if _COMMON_ON not in cmake_text:
        raise ValueError("llama-cpp-python's CMakeLists.txt no longer forces LLAMA_BUILD_COMMON: check it")
    return cmake_text.replace(_COMMON_ON, _COMMON_ON.replace(" ON ", " OFF "))


def build(version: str, cache: Path) -> Path:
    """The wheel's path, built unless a wheel with the same key is cached."""
    out = cache / wheel_key(version)
    built = sorted(out.glob("llama_cpp_python-*.whl"))
    if built:
        return built[0]
    pip = [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory(prefix="llama-cpp-src-") as tmp:
        sdist_only = ["--no-deps", "--no-binary", ":all:"]
        subprocess.run(
            [*pip, "download", "--quiet", *sdist_only, f"llama-cpp-python=={version}", "-d", tmp], check=True
        )
        (sdist,) = Path(tmp).glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"llama_cpp_python-{version}"
        ggml_cmake = src / "vendor" / "llama.cpp" / "ggml" / "src" / "CMakeLists.txt"
        ggml_cmake.write_text(keep_variants(ggml_cmake.read_text()))
        llama_cmake = src / "vendor" / "llama.cpp" / "src" / "CMakeLists.txt"
        llama_cmake.write_text(lighter_llama(llama_cmake.read_text()))
        top = src / "CMakeLists.txt"
        top.write_text(without_common(top.read_text()))
        env = {**os.environ, "CMAKE_ARGS": " ".join(CMAKE_ARGS)}
        staging = Path(tmp) / "wheel"
        subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(staging), str(src)], check=True, env=env)
        (wheel,) = staging.glob("llama_cpp_python-*.whl")
        out.mkdir(parents=True, exist_ok=True)
        partial = out / f".{wheel.name}.partial"  # a wheel under its own name is always whole
        shutil.copyfile(wheel, partial)
        os.replace(partial, out / wheel.name)
        return out / wheel.name


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    print(build(argv[0], Path(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
