"""The bundled llama.cpp model in a process of its own, so its death is an error, not ours.

Why: llama.cpp is native code. When it dies (SIGILL from a CPU variant the machine only
claims to run, SIGSEGV, the kernel's OOM killer) it takes its process with it, and an
in-process model made that `kohaku serve` itself, or a whole Dagster run, or `kohaku ask`
with a bare "Illegal instruction". Here the model lives in a child process (`python -m
kohaku_rag.llm.model_process`) that the parent talks to over a pipe, so a dead model becomes
a `ModelCrashed` error naming the signal, the CPU variant and the fix; the next call starts a
new model process (a SIGILL first keeps that variant out: cpu_verdicts.record_crash).

The protocol is pickled tuples over the child's stdin/stdout: the parent sends
("complete_many", requests, stream) or ("prompt_tokens", messages); the child answers
("ready", backend line) once loaded, then ("piece", text) while a streamed reply is written
and ("result", value) or ("error", exception) per call. The child prints nothing else on
that stdout (llama.cpp's own output goes to stderr), and exits when its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from kohaku_rag.errors import BackendError
from kohaku_rag.llm.base import ChatRequest, ChatResult, Message, one_reply
from kohaku_rag.llm.cpu_verdicts import VARIANT_ENV, record_crash, signal_name, trusted_cpu_backend
from kohaku_rag.llm.llama import LlamaCppChat
from kohaku_rag.llm.reply_stream import reply_sink, streaming_reply

__all__ = ["ModelCrashed", "ModelProcess"]

_WHAT_SIGNALS_MEAN = {
    "SIGILL": "an instruction this CPU does not run",
    "SIGSEGV": "a memory fault in llama.cpp",
    "SIGBUS": "a memory fault in llama.cpp (a damaged or truncated model file?)",
    "SIGKILL": "killed from outside: the kernel's out-of-memory killer, or a person",
    "SIGABRT": "llama.cpp stopped itself on a failed check",
}


class ModelCrashed(BackendError):
    """The model process died while working. The message names the signal, the CPU variant it
    ran and what to do; the next call starts a new model process."""


class ModelProcess:
    """`ChatModel` over a `LlamaCppChat` living in a child process, started on first use and
    again after a crash. Calls are serialised (the model answers one call at a time anyway)."""

    def __init__(
        self,
        model_path: Path,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        state_dir: Path | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise BackendError(f"{self.model_path}: GGUF model file not found")
        self.model_id = f"llama.cpp:{self.model_path.stem}"
        self.context_window = n_ctx
        self._settings = {"model_path": self.model_path, "n_ctx": n_ctx, "n_threads": n_threads, "state_dir": state_dir}
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.backend = ""  # the child's "llama.cpp CPU backend: ..." line, once it has loaded
        self.starts = 0

    def __repr__(self) -> str:
        return f"ModelProcess({str(self.model_path)!r}, n_ctx={self.context_window})"

    @property
    def pid(self) -> int | None:
        """The model process's id while one runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    # ---- ChatModel ----------------------------------------------------------------------

    def complete(self, req: ChatRequest) -> ChatResult:
        return one_reply(self.complete_many([req]))

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        try:
            value = self._call(("complete_many", list(reqs), reply_sink() is not None))
        except ModelCrashed as exc:
            return [exc] * len(reqs)
        return list(value)

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        return int(self._call(("prompt_tokens", tuple(messages))))

    def close(self) -> None:
        """Stop the model process (it also stops by itself when this process ends)."""
        with self._lock:
            self._stop()

    # ---- the pipe -------------------------------------------------------------------------

    def _call(self, message: tuple[Any, ...]) -> Any:
        sink = reply_sink()
        with self._lock:
            proc = self._running()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                pickle.dump(message, proc.stdin)
                proc.stdin.flush()
                while True:
                    kind, value = pickle.load(proc.stdout)
                    if kind == "piece":
                        if sink is not None:
                            sink(value)
                        continue
                    if kind == "error":
                        raise value
                    return value
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                raise self._died("while answering") from exc

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._proc = None
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Not a new session: the child goes when this process's group is stopped.
        )
        self._proc = proc
        self.starts += 1
        assert proc.stdin is not None and proc.stdout is not None
        try:
            pickle.dump(self._settings, proc.stdin)
            proc.stdin.flush()
            kind, value = pickle.load(proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise self._died("while loading the model") from exc
        if kind == "error":
            self._stop()
            raise value
        self.backend = str(value)
        return proc

    def _died(self, when: str) -> ModelCrashed:
        proc, self._proc = self._proc, None
        code = _exit_code(proc)
        how = signal_name(code) if code is not None else "a closed pipe"
        variant = self.backend.removeprefix("llama.cpp CPU backend: ").split(" ", 1)[0] or "unknown"
        meaning = _WHAT_SIGNALS_MEAN.get(how, "")
        message = (
            f"the model process (llama.cpp, CPU variant {variant}) died with {how}"
            + (f" ({meaning})" if meaning else "")
            + f" {when}. "
        )
        if how == "SIGILL" and variant not in ("unknown", "built in"):
            record_crash(self.model_path, variant, how)
            message += (
                f"{variant} is kept out on this machine from now on; the next question loads the next "
                f"best variant. To choose one yourself, set {VARIANT_ENV} (e.g. {VARIANT_ENV}=x64); "
                "`kohaku doctor` shows the one in use."
            )
        else:
            message += (
                f"The next question starts it again. If it keeps dying, set {VARIANT_ENV}=x64 (the plainest "
                "CPU code) or a smaller n_ctx; `kohaku doctor` shows the CPU variant in use."
            )
        return ModelCrashed(message)

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __del__(self) -> None:
        # At interpreter shutdown anything may fail: the child then sees its stdin close.
        with contextlib.suppress(Exception):
            self._stop()


def _exit_code(proc: subprocess.Popen[bytes] | None) -> int | None:
    if proc is None:
        return None
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # the pipe broke but the process lives on: end it
        proc.kill()
        proc.wait()
        return None


# ---- the model process ------------------------------------------------------------------


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    def send(kind: str, value: object) -> None:
        try:
            pickle.dump((kind, value), replies)
        except (pickle.PicklingError, TypeError, AttributeError):  # an exception that won't pickle
            pickle.dump((kind, BackendError(str(value))), replies)
        replies.flush()

    settings = pickle.load(requests)
    try:
        chat = LlamaCppChat(**settings)
        chat.prompt_tokens((Message("user", "hi"),))  # loads the model and its CPU code now
        send("ready", str(trusted_cpu_backend(chat.model_path)))
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
        send("error", exc if isinstance(exc, BackendError) else BackendError(f"{type(exc).__name__}: {exc}"))
        return
    while True:
        try:
            kind, *args = pickle.load(requests)
        except EOFError:  # the parent closed the pipe or ended
            return
        try:
            if kind == "complete_many":
                reqs, stream = args
                if stream:
                    with streaming_reply(lambda piece: send("piece", piece)):
                        send("result", chat.complete_many(reqs))
                else:
                    send("result", chat.complete_many(reqs))
            elif kind == "prompt_tokens":
                send("result", chat.prompt_tokens(args[0]))
            else:
                send("error", BackendError(f"unknown model process request {kind!r}"))
        except Exception as exc:  # noqa: BLE001 - the call fails, the model process lives on
            send("error", exc if isinstance(exc, BackendError) else BackendError(f"{type(exc).__name__}: {exc}"))


def _main() -> int:
    # The protocol owns the real stdout; anything native code prints goes to stderr instead.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which closes our stdin
    _serve(sys.stdin.buffer, replies)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
