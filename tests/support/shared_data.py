"""Where the shared benchmark data lives: `$KOHAKU_SHARED`, else `../shared` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path


def _shared_root() -> Path:
    if env := os.environ.get("KOHAKU_SHARED"):
        return Path(env)
    beside = Path(__file__).resolve().parents[3] / "shared"
    return beside if beside.is_dir() else Path("/work/shared")


SHARED = _shared_root()
PDFS = SHARED / "pdfs"
WATTBOT = SHARED / "wattbot"
