"""How fast `kohaku ui` (the real `dagster dev`) stops on SIGTERM and SIGINT, and whether
its port is free afterwards.

Starts `kohaku ui` on an empty lake and a free port, waits until the webserver answers,
sends the signal, and prints: seconds to start, seconds to exit, the exit code, whether the
port can be bound again, and how many processes of the UI's tree are left (the test,
tests/pipeline/test_ui_stop.py, checks the same on a small process tree; this runs the real
one, which takes ~45 s to start on 2 busy cores).

    python bench/serving/ui_stop.py [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.ports import free_port, port_free  # noqa: E402

START = "import sys; from kohaku_assets.cli import main; sys.exit(main())"


def left_over(port: int) -> int:
    """Processes still running with this port on their command line (the UI's tree)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if f"-p {port}" in line or f"--port {port}" in line)


def one(work: Path, signum: int) -> None:
    port = free_port()
    lake = work / f"lake-{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(lake / ".dagster")}
    cmd = [sys.executable, "-c", START, "ui", "--lake", str(lake), "--corpus", str(work), "--port", str(port)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while time.monotonic() - started < 180:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            time.sleep(0.5)
    up = time.monotonic() - started
    time.sleep(3)
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        code: int | str = proc.wait(60)
    except subprocess.TimeoutExpired:
        code = "still running after 60 s"
        proc.kill()
    took = time.monotonic() - sent
    time.sleep(1)
    name = signal.Signals(signum).name
    print(
        f"{name:8} started in {up:5.1f} s, exited in {took:5.1f} s (code {code}), "
        f"port free: {port_free(port)}, processes left: {left_over(port)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="kohaku-ui-stop-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            one(work, signum)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
