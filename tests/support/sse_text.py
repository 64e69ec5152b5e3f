"""Reading a server-sent-events body: (event name, JSON data) per event, comments skipped."""

from __future__ import annotations

import json


def sse_events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        out.append((lines.get("event", "message"), json.loads(lines["data"])))
    return out
