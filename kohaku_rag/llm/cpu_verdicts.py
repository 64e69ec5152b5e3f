"""Which llama.cpp CPU variant this machine runs: each is tried in a child process before it
is trusted, and the verdict is kept beside the model file.

Why: llama.cpp picks the variant whose instruction sets the CPU's flags advertise, and a flag
is a claim, not a fact. On a Sapphire Rapids VM the AMX variant dies with SIGILL at the first
matrix product (the tile permission is granted per thread, and a hypervisor may withhold
it), killing whatever process loaded it: `kohaku ask`, a Dagster run, `kohaku serve`. So
the first time a machine meets a build, the variant llama.cpp would pick runs a tiny real
computation in a child process: the model itself, a batched prefill (the matrix-matrix
kernels) and a few generated tokens (the matrix-vector ones), on every core (the worker
threads). A crash (any signal), a hang (`TRIAL_SECONDS`) or a wrong continuation moves to the
next best variant, down to `x64`.

The verdict is a small JSON file named by the build's key (llama.cpp's version, the variant
libraries' bytes, the CPU's identity and flags), so later processes load the proven variant
at once, and a new build or another CPU (a lake copied to another machine's cache) is tried
again. A variant that dies later, while answering, is added to the verdict's kept-out list
(`record_crash`) and the next load tries the next one. `KOHAKU_LLAMA_CPU=<variant>` picks
one by hand, without a trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kohaku_rag.lake.atomic import atomic_path
from kohaku_rag.llm.cpu_backends import (
    CpuBackend,
    builtin_backend,
    llama_package_dir,
    load_variant,
    variant_folder,
    variant_libraries,
    variant_score,
)

__all__ = [
    "TRIAL_SECONDS",
    "VARIANT_ENV",
    "Trial",
    "Verdict",
    "build_key",
    "kept_verdict",
    "record_crash",
    "signal_name",
    "trusted_cpu_backend",
    "verdict_dir",
    "verdict_line",
]

log = logging.getLogger(__name__)

VARIANT_ENV = "KOHAKU_LLAMA_CPU"
# A trial loads the model (1.1 GB, from disk the first time) and runs ~50 tokens.
TRIAL_SECONDS = 300.0
VERDICT_VERSION = 1
# The trial's computation: counting has one right continuation for any language model, so
# a variant that computes wrong (garbage, NaN, the wrong column of a product) fails it.
_COUNT_TO = 16
TRIAL_PROMPT = ", ".join(str(i) for i in range(1, _COUNT_TO + 1)) + ","
TRIAL_EXPECTED = f" {_COUNT_TO + 1}, {_COUNT_TO + 2}"
_TRIAL_TOKENS = 8

_lock = threading.Lock()
_loaded: CpuBackend | None = None


@dataclass(frozen=True)
class Trial:
    """One variant's run on this machine. `outcome` is "ran", "crashed", "hung", "wrong" or
    "refused"; `detail` says how ("SIGILL", "wrote ' 7, 7' for ' 25, 26'")."""

    variant: str
    outcome: str
    detail: str = ""
    seconds: float = 0.0

    def reason(self) -> str:
        return f"{self.outcome} here" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Verdict:
    """The variant this machine runs for one build, and the better ones kept out."""

    key: str
    variant: str | None  # None: every trusted variant has since crashed; try the rest
    trials: tuple[Trial, ...]

    def kept_out(self) -> tuple[tuple[str, str], ...]:
        return tuple((t.variant, t.reason()) for t in self.trials if t.outcome != "ran")

    def to_json(self) -> str:
        return json.dumps(
            {"version": VERDICT_VERSION, "key": self.key, "variant": self.variant,
             "trials": [dataclasses.asdict(t) for t in self.trials]},
            indent=1,
        )  # fmt: skip

    @staticmethod
    def from_json(text: str) -> Verdict:
        data = json.loads(text)
        if data.get("version") != VERDICT_VERSION:
            raise ValueError(f"verdict version {data.get('version')!r}")
        trials = tuple(Trial(**t) for t in data["trials"])
        return Verdict(str(data["key"]), data["variant"], trials)


def signal_name(returncode: int) -> str:
    """'SIGILL' for a process killed by signal 4 (returncode -4); 'exit code 3' otherwise."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def build_key(libraries: dict[str, Path]) -> str:
    """What a verdict holds for: llama.cpp's version, the variant libraries' bytes, and this
    CPU (vendor, model, flags). Anything else is another build or another machine."""
    import llama_cpp

    digest = hashlib.sha256(f"{llama_cpp.__version__}\n".encode())
    for name, path in sorted(libraries.items()):
        digest.update(f"{name}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update(_cpu_identity().encode())
    return digest.hexdigest()[:24]


def verdict_dir(model_path: Path) -> Path:
    """Where verdicts are kept: beside the model file, like its prefix states (one per machine)."""
    return Path(model_path).parent / "cpu-verdicts"


def kept_verdict(model_path: Path) -> Verdict | None:
    """The verdict kept for this install on this machine, if it was tried (no trial runs)."""
    package = llama_package_dir()
    folder = variant_folder(package)
    if folder is None:
        return None
    return _read(verdict_dir(model_path) / f"{build_key(variant_libraries(folder))}.json")


def verdict_line(model_path: Path) -> str:
    """What `kohaku doctor` says of the model's CPU code on this machine (no trial runs)."""
    if os.environ.get(VARIANT_ENV):
        return f"llama.cpp CPU backend: {os.environ[VARIANT_ENV]} (chosen by {VARIANT_ENV}, untried)"
    try:
        verdict = kept_verdict(model_path)
    except ImportError:
        return "llama.cpp CPU backend: llama-cpp-python is not installed (`make install`)"
    if verdict is None:
        package = llama_package_dir()
        if variant_folder(package) is None:
            return "llama.cpp CPU backend: built in (one CPU build, nothing to choose)"
        return "llama.cpp CPU backend: not tried on this machine yet (the first answer tries the variants)"
    if verdict.variant is None:
        return f"{CpuBackend('none trusted', kept_out=verdict.kept_out())}: the next answer tries the rest"
    chosen = CpuBackend(verdict.variant, kept_out=verdict.kept_out())
    return f"{chosen}; to choose another: {VARIANT_ENV}=<variant>"


def trusted_cpu_backend(model_path: Path) -> CpuBackend:
    """Load llama.cpp's CPU code for this process: the variant this machine's verdict names,
    trying variants first when there is none. Idempotent and thread-safe; call it before the
    first `llama_cpp.Llama(...)`. Raises RuntimeError naming the fix when no variant runs."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        package = llama_package_dir()
        quiet = logging.getLogger("llama-cpp-python")  # ggml's "load_backend: ..." line; we report our own
        if quiet.level == logging.NOTSET:
            quiet.setLevel(logging.ERROR)
        _loaded = builtin_backend(package) or _choose(package, Path(model_path))
        return _loaded


def record_crash(model_path: Path, variant: str, how: str) -> None:
    """A variant that died while answering is kept out from now on: the next load tries the
    next best (a crash the trial could not provoke is still a crash)."""
    package = llama_package_dir()
    folder = variant_folder(package)
    if folder is None:
        return
    key = build_key(variant_libraries(folder))
    path = verdict_dir(model_path) / f"{key}.json"
    with _verdict_lock(path.parent):
        old = _read(path)
        trials = tuple(t for t in (old.trials if old else ()) if t.variant != variant)
        _write(path, Verdict(key, None, (*trials, Trial(variant, "crashed", f"{how} while answering"))))


def _choose(package: Path, model_path: Path) -> CpuBackend:
    folder = variant_folder(package)
    if folder is None:
        raise RuntimeError(
            f"llama.cpp in {package} was built with dynamic backends but has no CPU variant library "
            "(libggml-cpu-*.so); reinstall it with `make install`"
        )
    libraries = variant_libraries(folder)
    by_hand = os.environ.get(VARIANT_ENV)
    if by_hand:
        if by_hand not in libraries:
            raise RuntimeError(
                f"{VARIANT_ENV}={by_hand}: no such llama.cpp CPU variant in {folder}; "
                f"choose one of {', '.join(libraries)}"
            )
        return load_variant(package, libraries[by_hand])
    verdict = _settled_verdict(folder, libraries, model_path)
    assert verdict.variant is not None  # _settled_verdict raises when nothing ran
    backend = load_variant(package, libraries[verdict.variant])
    return dataclasses.replace(backend, kept_out=verdict.kept_out())


def _settled_verdict(folder: Path, libraries: dict[str, Path], model_path: Path) -> Verdict:
    """The kept verdict, or a new one from trials (one process tries; others wait for it)."""
    key = build_key(libraries)
    path = verdict_dir(model_path) / f"{key}.json"
    kept = _read(path)
    if kept is not None and kept.variant in libraries:
        return kept
    with _verdict_lock(path.parent):
        kept = _read(path)
        if kept is not None and kept.variant in libraries:
            return kept
        earlier = tuple(t for t in (kept.trials if kept else ()) if t.outcome != "ran")
        started = time.perf_counter()
        verdict = _trial_run(key, folder, libraries, model_path, earlier)
        _write(path, verdict)
    backend = CpuBackend(verdict.variant or "", kept_out=verdict.kept_out())
    level = logging.WARNING if verdict.kept_out() else logging.INFO
    log.log(level, "%s (tried on this machine in %.1f s, kept in %s)", backend, time.perf_counter() - started, path)
    return verdict


def _trial_run(
    key: str, folder: Path, libraries: dict[str, Path], model_path: Path, earlier: tuple[Trial, ...]
) -> Verdict:
    trials = list(earlier)
    out = {t.variant for t in earlier}
    while True:
        ranked, scoring_crashes = _ranked(folder, out)
        trials += scoring_crashes
        out |= {t.variant for t in scoring_crashes}
        candidates = [name for name in ranked if name not in out]
        if not candidates:
            tried = "; ".join(f"{t.variant} {t.reason()}" for t in trials) or "none scored above 0"
            raise RuntimeError(
                f"no llama.cpp CPU variant in {folder} runs on this machine ({tried}); reinstall llama.cpp "
                f"with `make install`, or set {VARIANT_ENV} to a variant to use it untried"
            )
        trial = _try(candidates[0], libraries[candidates[0]], model_path)
        trials.append(trial)
        if trial.outcome == "ran":
            return Verdict(key, trial.variant, tuple(trials))
        out.add(trial.variant)


def _ranked(folder: Path, skip: set[str]) -> tuple[list[str], list[Trial]]:
    """The variants that score above 0 on this CPU, best first, scored in a child process
    (opening a library runs its code). A library that kills the scorer is kept out."""
    crashes: list[Trial] = []
    while True:
        done = _child(["rank", str(folder), ",".join(sorted(skip))], TRIAL_SECONDS)
        if done.result is not None:
            return list(done.result), crashes
        blamed = done.last_step
        if not done.killed or blamed is None or blamed in skip:
            raise RuntimeError(f"scoring llama.cpp's CPU variants in {folder} failed: {done.how}")
        crashes.append(Trial(blamed, "crashed", f"{done.how} when opened"))
        skip = skip | {blamed}


def _try(name: str, library: Path, model_path: Path) -> Trial:
    started = time.perf_counter()
    done = _child(["try", str(library), str(model_path)], TRIAL_SECONDS)
    seconds = round(time.perf_counter() - started, 2)
    if done.result is None and not done.killed:  # a Python error: ours, not the variant's
        raise RuntimeError(f"trying llama.cpp's CPU variant {name} failed: {done.how}")
    if done.result is None:
        outcome = "hung" if done.how.startswith("no result") else "crashed"
        return Trial(name, outcome, done.how, seconds)
    if "refused" in done.result:
        return Trial(name, "refused", str(done.result["refused"]), seconds)
    if "unloadable" in done.result:  # the model's fault, not the variant's: no verdict
        raise RuntimeError(f"{model_path}: llama.cpp could not load the model: {done.result['unloadable']}")
    text = str(done.result["text"])
    if not text.startswith(TRIAL_EXPECTED):
        return Trial(name, "wrong", f"wrote {text[:40]!r} for {TRIAL_EXPECTED!r}", seconds)
    return Trial(name, "ran", "", seconds)


@dataclass(frozen=True)
class _ChildOutcome:
    result: Any  # the child's final JSON value; None when it did not finish
    how: str  # why not: "SIGILL", "no result in 300 s", "exit code 1: ..."
    last_step: str | None  # the last "step" line it printed before dying
    killed: bool = False  # ended by a signal or the time limit, not by an exit of its own


def _child(args: list[str], timeout: float) -> _ChildOutcome:
    """Run this module as a trial process; its stdout is step lines, then one result line."""
    command = [sys.executable, "-m", __name__, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return _ChildOutcome(None, f"no result in {timeout:.0f} s", _last_step(stdout), killed=True)
    for line in reversed(stdout.splitlines()):
        if line.startswith("result "):
            return _ChildOutcome(json.loads(line[len("result ") :]), "", None)
    tail = stderr.strip().splitlines()[-1:] if code > 0 else []
    how = signal_name(code) + "".join(f": {t}" for t in tail)
    return _ChildOutcome(None, how, _last_step(stdout), killed=code < 0)


def _last_step(stdout: str) -> str | None:
    steps = [line[len("step ") :] for line in stdout.splitlines() if line.startswith("step ")]
    return steps[-1] if steps else None


def _cpu_identity() -> str:
    """The CPU's vendor, model and flags (Linux); the platform's name elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    first = text.split("\n\n", 1)[0]
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    keep = ("vendor_id", "model name", "flags", "Features", "isa")
    return "\n".join(f"{k}: {' '.join(sorted(fields[k].split())) if k != 'model name' else fields[k].strip()}"
                     for k in keep if k in fields)  # fmt: skip


def _read(path: Path) -> Verdict | None:
    try:
        return Verdict.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: unreadable llama.cpp CPU verdict (%s); the variants are tried again", path, exc)
        return None


def _write(path: Path, verdict: Verdict) -> None:
    try:
        with atomic_path(path) as tmp:
            tmp.write_text(verdict.to_json(), encoding="utf-8")
    except OSError as exc:  # a read-only cache: this process still runs the proven variant
        log.warning("%s: could not keep the llama.cpp CPU verdict (%s); the next process tries again", path, exc)


@contextlib.contextmanager
def _verdict_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock beside the verdicts: one process runs the trials, others wait. A
    read-only cache gets no lock (and no verdict is written there either)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = (directory / ".trial.lock").open("a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# ---- the trial process ------------------------------------------------------------------


def _rank_here(folder: Path, skip: set[str]) -> list[str]:
    llama_package_dir()  # loads libggml-base, which every variant library links to
    scores = []
    for name, library in variant_libraries(folder).items():
        if name in skip:
            continue
        print(f"step {name}", flush=True)
        try:
            score = variant_score(library)
        except (OSError, AttributeError) as exc:  # not loadable here, or not a ggml backend
            print(f"{library}: {exc}", file=sys.stderr)
            continue
        if score > 0:
            scores.append((score, name))
    return [name for _, name in sorted(scores, reverse=True)]


def _try_here(library: Path, model_path: Path) -> dict[str, object]:
    from llama_cpp import Llama

    try:
        load_variant(llama_package_dir(), library)
    except RuntimeError as exc:
        return {"refused": str(exc)}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # Every core: the matrix kernels run in ggml's worker threads, where the AMX crash was.
    try:
        llm = Llama(model_path=str(model_path), n_ctx=256, n_threads=cores, n_threads_batch=cores, verbose=False)
    except ValueError as exc:
        return {"unloadable": str(exc)}
    out: Any = llm(TRIAL_PROMPT, max_tokens=_TRIAL_TOKENS, temperature=0.0)
    return {"text": out["choices"][0]["text"]}


def _main(argv: list[str]) -> int:
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    if argv[:1] == ["rank"] and len(argv) == 3:
        value: object = _rank_here(Path(argv[1]), {s for s in argv[2].split(",") if s})
    elif argv[:1] == ["try"] and len(argv) == 3:
        value = _try_here(Path(argv[1]), Path(argv[2]))
    else:
        print("usage: python -m kohaku_rag.llm.cpu_verdicts rank FOLDER SKIP | try LIBRARY MODEL", file=sys.stderr)
        return 2
    print("result " + json.dumps(value), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
