"""A real `kohaku serve` process on a lake, from this checkout, on a free local port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.ports import free_port

# `kohaku` from this checkout (the installed script may belong to another one)
KOHAKU = "import sys; from kohaku_assets.cli import main; sys.exit(main(sys.argv[1:]))"


@contextmanager
def kohaku_serve(lake: Path, *extra: str) -> Iterator[str]:
    """A `kohaku serve` process on the lake; yields its URL once it answers."""
    with kohaku_serve_process(lake, *extra) as (url, _proc):
        yield url


@contextmanager
def kohaku_serve_process(lake: Path, *extra: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`kohaku_serve`, yielding the process too (a test may kill it)."""
    port = free_port()
    cmd = [sys.executable, "-c", KOHAKU, "serve", "--lake", str(lake), "--port", str(port), *extra]
    env = {**os.environ, "KOHAKU_LAKE": str(lake)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "kohaku serve did not start"
                time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=20)
        assert "Traceback" not in err, err
