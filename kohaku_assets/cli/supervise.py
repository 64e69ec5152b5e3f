"""Run a server command (`dagster dev`) until it exits or this process is told to stop.

`dagster dev` starts a webserver, a daemon and code servers as its own children. Stopped
the ordinary way (subprocess.call, then SIGTERM or Ctrl-C), the `kohaku` process dies or
kills only `dagster dev` itself, and its children keep the port for 20 s or more. Here the
command runs in its own process group: SIGTERM or SIGINT asks the whole group to stop, and
what is left after `grace` seconds is killed, so the port is free when `supervise` returns.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from types import FrameType

GRACE_SECONDS = 5.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group has already gone
        os.killpg(pgid, signum)


def supervise(cmd: Sequence[str], env: Mapping[str, str], grace: float = GRACE_SECONDS) -> int:
    """`cmd`'s exit code, or 0 when it was stopped by SIGTERM/SIGINT sent to this process."""
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    proc = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True)
    try:
        while proc.poll() is None and not stop.wait(0.2):
            pass
        if proc.poll() is None:
            name = signal.Signals(received[0]).name if received else "a signal"
            print(f"kohaku: {name} received; stopping the Dagster UI", file=sys.stderr, flush=True)
            _signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace)
    finally:
        # Whatever of the group is left (the leader, or a code server it left behind).
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0 if received else proc.returncode
