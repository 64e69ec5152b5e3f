"""What `kohaku serve` was started with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class ServeSettings:
    lake: Path
    config: str | None = None  # the config a request without one gets (None: "default")
    api_key: str | None = None  # every request but the page's files needs `Authorization: Bearer <key>`
    cors_origin: str | None = None  # the one origin allowed cross-origin calls (None: no CORS)
    max_body_bytes: int = 64_000
    # `/v1/chat/completions` carries the whole conversation a chat front end holds: its cap
    # stops abuse, far above any chat (a 1,500-character reply a turn: ~2,500 exchanges)
    max_chat_body_bytes: int = 4_000_000
    max_question_chars: int = 2_000
    queue_size: int = 8  # requests that may wait for a busy LLM backend; more get a 429
    render_dpi: int = 110  # page images
    feedback_per_minute: int = 30  # feedback posts one client address may send per minute (this process)
    feedback_per_answer: int = 20  # verdicts kept on one answer (all processes); more get a 429
    # reverse proxies (addresses or networks) whose X-Forwarded-For names the client; from
    # any other peer the header is ignored, so a client cannot pick its own rate budget
    trusted_proxies: tuple[str, ...] = ()
    abandon_after: float = 2.0  # seconds a queued question nobody follows keeps its place (a reload reconnects)
    # seconds a process's hold on the jobs it answers lasts unless renewed (it renews four
    # times a lease): a job whose process died is taken over or failed within about 1.25 leases
    job_lease: float = 20.0
    # seconds between two reads of the served index against its checksums (also read at start)
    verify_every: float = 600.0


def check_exposure(host: str, api_key: str | None, no_auth: bool) -> str | None:
    """Refuse to listen beyond this machine without a key, unless told to; returns the
    warning to print when the server is open to the network."""
    if host in LOOPBACK or api_key:
        return None
    if not no_auth:
        raise ValueError(
            f"--host {host} listens beyond this machine: give --api-key-env VAR (clients then send "
            "'Authorization: Bearer <key>') or --no-auth to serve anyone who can reach it"
        )
    return f"warning: serving {host} without authentication: anyone who can reach it can ask and read the documents"
