"""The code map (docs/explanation/architecture.md) and the package docstring stay true: every
module they name exists, and every room of the library is on the map."""

from __future__ import annotations

import re
from pathlib import Path

import kohaku_rag

REPO = Path(__file__).resolve().parents[2]
MAP = REPO / "docs" / "explanation" / "architecture.md"
_PATH = re.compile(r"`(kohaku_(?:rag|assets)/[\w/.]*)`")


def test_every_module_the_map_names_exists() -> None:
    named = _PATH.findall(MAP.read_text(encoding="utf-8"))
    assert len(named) > 20
    missing = [p for p in named if not (REPO / p).exists()]
    assert missing == []


def test_every_room_of_the_library_is_on_the_map() -> None:
    text = MAP.read_text(encoding="utf-8")
    rooms = sorted(p.name for p in (REPO / "kohaku_rag").iterdir() if (p / "__init__.py").exists())
    assert [r for r in rooms if f"`kohaku_rag/{r}/`" not in text] == []


def test_the_package_docstring_names_only_rooms_that_exist() -> None:
    doc = kohaku_rag.__doc__ or ""
    named = re.findall(r"`(\w+)/`", doc)
    assert {"parse", "answering", "serving", "experiments", "answers"} <= set(named)
    assert [n for n in named if not (REPO / "kohaku_rag" / n).is_dir()] == []
