"""Errors that name the input they are about and say what to do."""

from __future__ import annotations

from pathlib import Path


class KohakuError(Exception):
    """Base class: every message names its input and, where it can, the fix."""


class DocumentError(KohakuError):
    """One document cannot be read; only its own partition fails."""

    def __init__(self, source: str | Path, reason: str) -> None:
        self.source = str(source)
        self.reason = reason
        super().__init__(f"{self.source}: {reason}")


class BackendError(KohakuError):
    """A model backend (embedding, LLM, captioner) failed after its retries."""


class RetriesExhausted(BackendError):
    """Every attempt failed with a transient error (timeouts, 429, 5xx, dropped
    connections): the endpoint is down or overloaded, not the request wrong. Whatever was
    being computed failed; asking again later may succeed."""


class MissingPredictions(KohakuError):
    """An ensemble member has nothing stored to vote with; the message gives the command
    that computes it."""


class DamagedRows(KohakuError):
    """A document's stored index rows differ from the checksum they were written with:
    they are set aside, and the document is recomputed from its corpus file."""

    def __init__(self, doc_id: str, message: str) -> None:
        self.doc_id = doc_id
        super().__init__(message)


class IndexUnavailable(KohakuError):
    """An index file is missing or unreadable: searching it would return nothing or crash.
    The message names the file and the fix (`kohaku index` rebuilds it from the stored rows)."""
