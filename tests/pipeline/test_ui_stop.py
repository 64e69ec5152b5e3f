"""`kohaku ui` stops promptly on SIGTERM or Ctrl-C and frees its port: the command it runs
(`dagster dev`) is a process tree whose children hold the port, so the whole tree is
stopped, not only its root. Here the tree is a real one shaped like `dagster dev`'s: a
parent that ignores SIGTERM and a child serving HTTP on the port (a real `dagster dev` is
measured by bench/serving/ui_stop.py; it takes ~45 s to start on this machine)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.support.ports import free_port, port_free, wait_listening

# The stand-in for `dagster dev`: it ignores SIGTERM (dagster dev takes 20+ s to wind down)
# and leaves the port to its own child, an HTTP server.
TREE = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-m", "http.server", sys.argv[1], "--bind", "127.0.0.1"])
time.sleep(600)
"""
SUPERVISOR = """
import sys
from kohaku_assets.cli.supervise import supervise
sys.exit(supervise([sys.executable, "-c", sys.argv[1], sys.argv[2]], {}, grace=float(sys.argv[3])))
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_whole_tree_promptly_and_frees_the_port(signum) -> None:
    port, grace = free_port(), 1.0
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, TREE, str(port), str(grace)], stderr=subprocess.PIPE, text=True
    )
    try:
        wait_listening(port)
        started = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=grace + 10)
        seconds = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0 and seconds < grace + 3
    assert f"{signal.Signals(signum).name} received; stopping the Dagster UI" in proc.stderr.read()
    assert port_free(port)  # the child that held it is gone too


def test_the_commands_own_exit_code_is_passed_on() -> None:
    from kohaku_assets.cli.supervise import supervise

    assert supervise([sys.executable, "-c", "raise SystemExit(3)"], {}) == 3
