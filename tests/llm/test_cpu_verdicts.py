"""A llama.cpp CPU variant runs in a trial process before it is trusted, and the verdict is
kept beside the model file. The variants that misbehave are fakes compiled here (a real
variant whose compute entry point raises SIGILL, never returns, or spoils its result), put
where llama.cpp would pick them: above every real variant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from kohaku_rag.llm import cpu_verdicts  # noqa: E402
from kohaku_rag.llm.cpu_backends import VARIANTS_ENV, variant_libraries  # noqa: E402
from kohaku_rag.llm.model_files import bundled_model  # noqa: E402
from tests.support.cpu_variants import best_real_variant, variant_folder_with  # noqa: E402

# One answer from the model process, as `kohaku ask` would get it, with the log line shown.
ANSWER = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s")
from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.model_process import ModelProcess
chat = ModelProcess(Path(sys.argv[1]), n_ctx=512)
reply = chat.complete(ChatRequest((Message("user", "Continue: 1, 2, 3, 4,"),), max_tokens=6))
print("REPLY", reply.text)
print("BACKEND", chat.backend)
"""


def model_beside(tmp: Path) -> Path:
    """The bundled model linked into `tmp`, so its verdicts are kept in tmp/cpu-verdicts."""
    link = tmp / "model.gguf"
    link.symlink_to(bundled_model())
    return link


def answer(model: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, VARIANTS_ENV: str(folder)}
    env.pop(cpu_verdicts.VARIANT_ENV, None)
    return subprocess.run(
        [sys.executable, "-c", ANSWER, str(model)], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def test_a_variant_that_crashes_or_computes_wrong_is_kept_out_and_the_answer_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: llama.cpp loaded the best-scoring variant and the process died at its first
    matrix product (`make demo`: "Illegal instruction", exit -4, no message)."""
    folder = variant_folder_with(tmp_path, ("fakeamx", "CRASH", 1 << 21), ("fakewrong", "WRONG", 1 << 20))
    model = model_beside(tmp_path)
    best = best_real_variant()

    first = answer(model, folder)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.startswith("REPLY ") and first.stdout.split("\n")[0].strip() != "REPLY"
    line = f"llama.cpp CPU backend: {best} (fakeamx crashed here: SIGILL; fakewrong wrong here: wrote"
    assert line in first.stderr, first.stderr[-3000:]
    assert f"BACKEND llama.cpp CPU backend: {best} (fakeamx crashed here: SIGILL;" in first.stdout

    (kept,) = (tmp_path / "cpu-verdicts").glob("*.json")
    verdict = json.loads(kept.read_text())
    assert verdict["variant"] == best
    assert [(t["variant"], t["outcome"]) for t in verdict["trials"]] == [
        ("fakeamx", "crashed"),
        ("fakewrong", "wrong"),
        (best, "ran"),
    ]
    stamp = kept.stat().st_mtime_ns

    # A second process loads the proven variant at once: no trial, the verdict untouched.
    second = answer(model, folder)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "tried on this machine" not in second.stderr
    assert f"BACKEND llama.cpp CPU backend: {best} (fakeamx crashed here: SIGILL;" in second.stdout
    assert kept.stat().st_mtime_ns == stamp

    # `kohaku doctor` says the same, from the kept verdict.
    monkeypatch.setenv(VARIANTS_ENV, str(folder))
    monkeypatch.delenv(cpu_verdicts.VARIANT_ENV, raising=False)
    assert cpu_verdicts.verdict_line(model).startswith(
        f"llama.cpp CPU backend: {best} (fakeamx crashed here: SIGILL; fakewrong wrong here: wrote"
    )


def test_a_faithful_variant_passes_its_trial_and_answers_like_the_real_one(tmp_path: Path) -> None:
    """The fake's pass-through build is trusted and answers as the variant it wraps: so the
    fakes above fail for what they do, not for a wrapper that doesn't fit this llama.cpp."""
    folder = variant_folder_with(tmp_path, ("fakepass", None, 1 << 20))
    model = model_beside(tmp_path)
    wrapped = answer(model, folder)
    assert wrapped.returncode == 0, wrapped.stderr[-3000:]
    assert "BACKEND llama.cpp CPU backend: fakepass\n" in wrapped.stdout

    plain_folder = tmp_path / "plain"
    plain_folder.mkdir()
    for name in folder.iterdir():
        if "fake" not in name.name:
            (plain_folder / name.name).symlink_to(name.resolve())
    plain = answer(model, plain_folder)
    assert plain.returncode == 0, plain.stderr[-3000:]
    reply = [line for line in wrapped.stdout.splitlines() if line.startswith("REPLY")]
    assert reply == [line for line in plain.stdout.splitlines() if line.startswith("REPLY")]


def test_a_variant_that_hangs_is_kept_out_after_the_time_limit(tmp_path: Path, monkeypatch) -> None:
    folder = variant_folder_with(tmp_path, ("fakehang", "HANG", 1 << 20))
    monkeypatch.setattr(cpu_verdicts, "TRIAL_SECONDS", 20.0)
    libraries = variant_libraries(folder)
    verdict = cpu_verdicts._trial_run("key", folder, libraries, bundled_model(), ())  # noqa: SLF001
    assert verdict.variant == best_real_variant()
    assert verdict.kept_out() == (("fakehang", "hung here: no result in 20 s"),)


def test_a_variant_chosen_by_hand_is_loaded_untried_and_a_wrong_name_says_which_exist(tmp_path: Path) -> None:
    folder = variant_folder_with(tmp_path)
    model = model_beside(tmp_path)
    env = {**os.environ, VARIANTS_ENV: str(folder), cpu_verdicts.VARIANT_ENV: "nosuch"}
    done = subprocess.run(
        [sys.executable, "-c", ANSWER, str(model)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 1
    assert "KOHAKU_LLAMA_CPU=nosuch: no such llama.cpp CPU variant" in done.stderr and "x64" in done.stderr
    assert not (tmp_path / "cpu-verdicts").exists() or not list((tmp_path / "cpu-verdicts").glob("*.json"))


def test_the_key_changes_with_the_build(tmp_path: Path) -> None:
    """A verdict holds for one set of variant libraries on one CPU: another build is tried again."""
    folder = variant_folder_with(tmp_path)
    libraries = variant_libraries(folder)
    key = cpu_verdicts.build_key(libraries)
    assert cpu_verdicts.build_key(dict(libraries)) == key
    extra = folder / "libggml-cpu-zz.so"
    extra.write_bytes(b"not a library")
    assert cpu_verdicts.build_key(variant_libraries(folder)) != key


def test_llama_cpp_s_own_choice_dies_on_the_crashing_variant(tmp_path: Path) -> None:
    """What the trial guards against, shown with llama.cpp's own loader
    (`ggml_backend_load_all_from_path`, what this project called before): it picks the fake
    for its score and the process dies with SIGILL at the first answer, with no message."""
    folder = variant_folder_with(tmp_path, ("fakeamx", "CRASH", 1 << 21))
    code = (
        "import ctypes, sys\n"
        "from kohaku_rag.llm.cpu_backends import llama_package_dir, _linked_ggml\n"
        "ggml = _linked_ggml(llama_package_dir())\n"
        f"ggml.ggml_backend_load_all_from_path({str(folder)!r}.encode())\n"
        "from llama_cpp import Llama\n"
        f"llm = Llama(model_path={str(bundled_model())!r}, n_ctx=128, verbose=False)\n"
        "print(llm('1, 2, 3,', max_tokens=2)['choices'][0]['text'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == -4, (done.returncode, done.stderr[-2000:])  # SIGILL
