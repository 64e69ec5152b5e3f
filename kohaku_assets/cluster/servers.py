"""Local PostgreSQL, Redis and Celery workers, started and stopped by whoever needs them
(the cluster test, `make cluster-demo`, bench/indexing/scale.py): each runs on a free port of
127.0.0.1 from a temporary directory and is stopped, by its own process id, on exit.

PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user (which
Debian's package creates) on a data directory owned by that user.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import yaml  # a dependency of dagster

from kohaku_assets.cluster import BROKER_ENV, PG_ENV, celery_config
from kohaku_assets.resources import REPO_ROOT
from kohaku_rag.errors import KohakuError

__all__ = [
    "Cluster",
    "ServerMissing",
    "celery_workers",
    "local_cluster",
    "local_postgres",
    "local_redis",
    "missing_servers",
    "pg_bin",
]

PG_VERSIONS = ("17", "16", "15")


class ServerMissing(KohakuError, RuntimeError):
    """PostgreSQL or Redis is not installed on this machine."""


def pg_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (Debian keeps them off PATH)."""
    for version in PG_VERSIONS:
        folder = Path(f"/usr/lib/postgresql/{version}/bin")
        if (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def missing_servers() -> list[str]:
    """What is missing to run a local cluster, as install hints (empty: all there)."""
    missing = []
    if pg_bin() is None:
        missing.append("PostgreSQL (apt-get install postgresql)")
    if shutil.which("redis-server") is None:
        missing.append("Redis (apt-get install redis-server)")
    if importlib.util.find_spec("dagster_celery") is None or importlib.util.find_spec("dagster_postgres") is None:
        missing.append("the cluster extra (pip install -e '.[cluster]')")
    return missing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, what: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f}s")


@contextmanager
def local_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server in its own temporary directory (the postgres user must
    own it, so not inside a private one); yields its URL (trust auth, 127.0.0.1 only)."""
    folder = pg_bin()
    if folder is None:
        raise ServerMissing("PostgreSQL is not installed (apt-get install postgresql)")
    with tempfile.TemporaryDirectory(prefix="kohaku-pg-") as tmp:
        workdir = Path(tmp)
        os.chmod(workdir, 0o755)
        data = workdir / "data"
        data.mkdir(mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(workdir, "postgres")
            shutil.chown(data, "postgres")
        port = free_port()
        _pg_run([str(folder / "initdb"), "-D", str(data), "-U", "kohaku", "--auth=trust", "-E", "UTF8"])
        options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        log = workdir / "postgres.log"
        _pg_run([str(folder / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"])
        try:
            # SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3; dagster-postgres brings psycopg2.
            yield f"postgresql+psycopg2://kohaku@127.0.0.1:{port}/postgres"
        finally:
            _pg_run([str(folder / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], check=False)


def _pg_run(cmd: list[str], *, check: bool = True) -> None:
    """Run a PostgreSQL program (as the postgres user when we are root)."""
    full = ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd
    done = subprocess.run(full, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")


@contextmanager
def local_redis(workdir: Path) -> Iterator[str]:
    """A throwaway Redis server without persistence; yields its URL (database 0)."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise ServerMissing("Redis is not installed (apt-get install redis-server)")
    port = free_port()
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
    with open(workdir / "redis.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_port(port, "redis-server", proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Stop a process we started in its own session, and every process of that session
    (`dagster-celery worker start` runs `celery`, which forks its pool): SIGTERM, then
    SIGKILL for what is still there after `timeout`."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextmanager
def celery_workers(n: int, env: Mapping[str, str], workdir: Path, *, concurrency: int = 1) -> Iterator[list[int]]:
    """`n` dagster-celery workers (each `concurrency` processes) started with `dagster-celery
    worker start`, importing the code location from `env`'s PYTHONPATH; yields their pids."""
    config = workdir / "celery.yaml"
    config.write_text(yaml.safe_dump({"execution": {"config": celery_config()}}), encoding="utf-8")
    exe = Path(sys.executable).parent / "dagster-celery"
    procs: list[subprocess.Popen[bytes]] = []
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    base_env = {
        **os.environ,
        **env,
        "PYTHONPATH": path,  # the workers import the code location from this checkout
        "PATH": f"{exe.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    try:
        for i in range(n):
            cmd = [str(exe), "worker", "start", "-A", "dagster_celery.app", "-y", str(config), "-n", f"kohaku{i}"]
            cmd += ["--", f"--concurrency={concurrency}"]
            # A worker's own instance only hosts its generated Celery config (one each: two
            # creating one SQLite instance at once collide); every step loads the lake's
            # instance from the reference its run sends.
            home = workdir / f"home{i}"
            home.mkdir(exist_ok=True)
            (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
            worker_env = {**base_env, "DAGSTER_HOME": str(home)}
            with open(workdir / f"worker{i}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(cmd, env=worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                )
        _wait_workers(n, workdir, procs)
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            _stop(proc)


def _wait_workers(n: int, workdir: Path, procs: list[subprocess.Popen[bytes]], timeout: float = 120.0) -> None:
    """Until every worker logged that it is ready (it imported Dagster and joined the broker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, proc in enumerate(procs):
            if proc.poll() is not None:
                log = (workdir / f"worker{i}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"celery worker {i} exited with code {proc.returncode}:\n{log}")
        ready = sum("ready." in (workdir / f"worker{i}.log").read_text(errors="replace") for i in range(n))
        if ready == n:
            return
        time.sleep(0.5)
    raise RuntimeError(f"celery workers not ready within {timeout:.0f}s (logs in {workdir})")


@dataclass(frozen=True)
class Cluster:
    """A running local cluster: the environment that points the lake's runs at it."""

    env: dict[str, str]
    workdir: Path
    worker_pids: list[int]


@contextmanager
def local_cluster(workers: int, *, concurrency: int = 1, workdir: Path | None = None) -> Iterator[Cluster]:
    """PostgreSQL + Redis + `workers` Celery workers; while inside, this process's
    environment points the lake at them (KOHAKU_DAGSTER_PG, KOHAKU_CELERY_BROKER), and on
    exit everything is stopped and the environment restored."""
    missing = missing_servers()
    if missing:
        raise ServerMissing("cannot start a local cluster, missing: " + "; ".join(missing))
    with ExitStack() as stack:
        root = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kohaku-cluster-")))
        (root / "redis").mkdir(exist_ok=True)
        (root / "workers").mkdir(exist_ok=True)
        pg = stack.enter_context(local_postgres())
        broker = stack.enter_context(local_redis(root / "redis"))
        env = {PG_ENV: pg, BROKER_ENV: broker}
        stack.enter_context(_environment(env))
        pids = stack.enter_context(celery_workers(workers, env, root / "workers", concurrency=concurrency))
        yield Cluster(env, root, pids)


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
