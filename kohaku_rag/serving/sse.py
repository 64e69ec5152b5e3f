"""Server-sent events: one event as text (an answer's events come from `jobs.AnswerJobs`)."""

from __future__ import annotations

import json
from typing import Any


def event(name: str | None, data: Any) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"
