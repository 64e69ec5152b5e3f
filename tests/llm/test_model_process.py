"""The bundled model answers from a process of its own: when that process dies mid-answer the
caller gets an error naming the signal, the CPU variant and the fix, and the next call is
answered by a new model process."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from kohaku_rag.llm.base import ChatRequest, Message  # noqa: E402
from kohaku_rag.llm.model_files import bundled_model  # noqa: E402
from kohaku_rag.llm.model_process import ModelCrashed, ModelProcess  # noqa: E402
from kohaku_rag.llm.reply_stream import streaming_reply  # noqa: E402
from tests.support.waiting import wait_until

LONG = ChatRequest((Message("user", "Write the numbers from 1 to 200, comma separated."),), max_tokens=400)
SHORT = ChatRequest((Message("user", "Say hello."),), max_tokens=4)


def kill_when_it_writes(chat: ModelProcess, sig: signal.Signals) -> tuple[list[str], list[BaseException]]:
    """Start LONG; once its first words arrive, send `sig` to the model process."""
    pieces: list[str] = []
    errors: list[BaseException] = []
    writing = threading.Event()

    def ask() -> None:
        with streaming_reply(lambda piece: (pieces.append(piece), writing.set())):
            try:
                chat.complete(LONG)
            except ModelCrashed as exc:
                errors.append(exc)

    worker = threading.Thread(target=ask)
    worker.start()
    assert writing.wait(timeout=300), "the model never started writing"
    assert chat.pid is not None
    os.kill(chat.pid, sig)
    worker.join(timeout=60)
    assert not worker.is_alive()
    return pieces, errors


def test_a_model_process_killed_mid_answer_is_an_error_that_names_the_cause_and_the_fix(tmp_path: Path) -> None:
    """Before: llama.cpp ran in the asking process, and SIGILL killed `kohaku ask`, the Dagster
    run or `kohaku serve` itself with no message."""
    model = tmp_path / "model.gguf"
    model.symlink_to(bundled_model())  # its verdicts are kept in tmp_path/cpu-verdicts
    chat = ModelProcess(model, n_ctx=512)
    pieces, errors = kill_when_it_writes(chat, signal.SIGILL)
    assert pieces, "some words arrived before the crash"
    (error,) = errors
    variant = chat.backend.removeprefix("llama.cpp CPU backend: ").split(" ")[0]
    message = str(error)
    assert f"the model process (llama.cpp, CPU variant {variant}) died with SIGILL" in message
    assert "an instruction this CPU does not run" in message
    assert f"{variant} is kept out on this machine from now on" in message and "KOHAKU_LLAMA_CPU" in message
    (kept,) = (tmp_path / "cpu-verdicts").glob("*.json")
    trials = json.loads(kept.read_text())["trials"]
    assert {"variant": variant, "outcome": "crashed", "detail": "SIGILL while answering"} in [
        {k: t[k] for k in ("variant", "outcome", "detail")} for t in trials
    ]

    # The next call: a new model process, on the next best variant, answers.
    reply = chat.complete(SHORT)
    assert reply.text.strip()
    assert chat.starts == 2
    assert not chat.backend.startswith(f"llama.cpp CPU backend: {variant} ")
    assert f"{variant} crashed here: SIGILL while answering" in chat.backend
    chat.close()


def test_a_model_process_killed_from_outside_starts_again_on_the_same_variant(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.symlink_to(bundled_model())
    chat = ModelProcess(model, n_ctx=512)
    _pieces, errors = kill_when_it_writes(chat, signal.SIGKILL)
    (error,) = errors
    assert "died with SIGKILL (killed from outside" in str(error)
    assert "The next question starts it again" in str(error)
    before = chat.backend
    assert chat.complete(SHORT).text.strip()
    assert chat.backend == before and chat.starts == 2

    # A model process that died between calls (the OOM killer, say) is simply started again.
    assert chat.pid is not None
    os.kill(chat.pid, signal.SIGKILL)
    wait_until(lambda: chat.pid is None, 30, "the kernel to end the model process")
    assert chat.complete(SHORT).text.strip()
    assert chat.starts == 3
    chat.close()


def test_a_model_that_cannot_load_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    chat = ModelProcess(broken, n_ctx=512)
    with pytest.raises(Exception, match="broken.gguf") as raised:
        chat.complete(SHORT)
    assert "Traceback" not in str(raised.value)
