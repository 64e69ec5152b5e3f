"""llama.cpp's CPU code is picked for the running CPU from the portable install's variants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from llama_cpp_wheel import KEPT_VARIANTS, keep_variants  # noqa: E402

from kohaku_rag.llm.cpu_backends import variant_dirs  # noqa: E402
from kohaku_rag.llm.cpu_verdicts import trusted_cpu_backend  # noqa: E402
from kohaku_rag.llm.model_files import bundled_model  # noqa: E402


def test_the_install_ships_per_cpu_variants_and_loads_the_best_for_this_cpu() -> None:
    """`make install` builds llama.cpp with GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS (the kept
    ones: tools/llama_cpp_wheel.py); loading a model through llama-cpp-python 0.3.36 alone
    fails ("no backends are loaded")."""
    import llama_cpp

    package = Path(llama_cpp.__file__).parent
    (where,) = variant_dirs(package)
    variants = sorted(p.name for p in where.glob("libggml-cpu-*.so"))
    assert {"libggml-cpu-x64.so", "libggml-cpu-haswell.so", "libggml-cpu-icelake.so"} <= set(variants)
    backend = trusted_cpu_backend(bundled_model())
    assert backend.path is not None and backend.path.name in variants
    assert trusted_cpu_backend(bundled_model()) is backend  # loaded once
    flags = Path("/proc/cpuinfo").read_text().split()
    if "avx512f" in flags:  # this machine: an AVX-512 variant, not the AVX2 one
        assert backend.variant not in ("x64", "sse42", "sandybridge", "ivybridge", "haswell", "piledriver")
    if {"avx512f", "avx512vbmi", "avx512_vnni"} <= set(flags):  # Ice Lake, Sapphire Rapids, Zen 4-5
        assert backend.variant == "icelake"


def test_the_install_holds_only_the_kept_variants() -> None:
    """The install holds only the kept CPU variants, not all 14 x86 ones nor the unused
    multimodal library (a cold `make install` takes minutes less). An older .venv:
    `make install` rebuilds it."""
    import llama_cpp

    package = Path(llama_cpp.__file__).parent
    (where,) = variant_dirs(package)
    built = sorted(p.name for p in where.glob("libggml-cpu-*.so"))
    assert built == sorted(f"libggml-cpu-{v}.so" for v in KEPT_VARIANTS)
    assert not list((package / "lib").glob("libmtmd*")), "LLAVA_BUILD=OFF: no multimodal library"


def test_a_changed_variant_list_fails_the_build_loudly() -> None:
    cmake = (
        "if (GGML_CPU_ALL_VARIANTS)\n"
        '    if (GGML_SYSTEM_ARCH STREQUAL "x86")\n'
        "        ggml_add_cpu_backend_variant(x64)\n"
        "        ggml_add_cpu_backend_variant(sse42              SSE42)\n"
        "        ggml_add_cpu_backend_variant(haswell            SSE42 AVX F16C FMA AVX2 BMI2)\n"
        '    elseif(GGML_SYSTEM_ARCH STREQUAL "ARM")\n'
        "        ggml_add_cpu_backend_variant(armv8.0_1)\n"
        "    endif()\n"
        "endif()\n"
    )
    kept = keep_variants(cmake, ("x64", "haswell"))
    assert "sse42" not in kept and "haswell" in kept and "armv8.0_1" in kept
    with pytest.raises(ValueError, match=r"\['icelake'\] are not in ggml/src/CMakeLists.txt"):
        keep_variants(cmake, ("x64", "icelake"))


def test_without_the_loader_llama_cpp_finds_no_cpu_backend(tmp_path: Path) -> None:
    """What trusted_cpu_backend fixes, shown in a fresh process (the loader is process-wide)."""
    from kohaku_rag.llm.model_files import bundled_model

    model = bundled_model()
    code = (
        "import sys, llama_cpp\n"
        "try:\n"
        f"    llama_cpp.Llama(model_path={str(model)!r}, n_ctx=64, verbose=False)\n"
        "except ValueError as exc:\n"
        "    sys.exit(f'refused: {exc}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert "refused: Failed to load model" in done.stderr


def test_variant_dirs_finds_the_wheel_s_bin_folder(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "llama_cpp"
    (package / "lib").mkdir(parents=True)
    (package / "lib" / "libllama.so").touch()
    assert variant_dirs(package) == []
    (package.parent / "bin").mkdir()
    (package.parent / "bin" / "libggml-cpu-haswell.so").touch()
    assert variant_dirs(package) == [package.parent / "bin"]


def test_libllama_is_built_lighter_or_the_build_fails_loudly() -> None:
    from llama_cpp_wheel import lighter_llama

    target = "target_compile_features   (llama PRIVATE cxx_std_17) # don't bump\n"
    patched = lighter_llama("add_library(llama x.cpp)\n" + target)
    assert "target_compile_options(llama PRIVATE -O1)" in patched and "llama-grammar.cpp" in patched
    with pytest.raises(ValueError, match="changed its llama target"):
        lighter_llama("add_library(llama x.cpp)\n")
