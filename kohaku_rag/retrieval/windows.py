"""Sentence-window packing (`pack = "windows"`): more evidence per character.

Whole paragraphs fill a 4,000-character budget with ~5 units, most of each unit beside the
point. A window pack keeps, of each unit in rank order, its best-matching sentences with
their neighbours (overlapping windows merged, document order kept, gaps shown as " … "),
and fills the budget with the next units. A short unit, a table or a figure stays whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kohaku_rag.document.table_record import TABLE_LABEL

GAP = " … "
# A table or figure caption ("Table 3: Large language models used ..."): kept in every window
# pack of its unit, since it says what the unit's numbers are.
CAPTION = re.compile(rf"\b(?:{TABLE_LABEL}|(?:figure|fig\.)\s*[0-9IVX]+)\s*[:.]\s", re.I)


def window_spans(
    scores: Sequence[float], best: int, neighbours: int, keep: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """Merged [start, end) sentence spans around the `best` highest-scoring sentences (score
    > 0; ties keep document order), each widened by `neighbours` on both sides, and the
    sentences in `keep` alone. With no sentence scoring above 0, the unit's opening sentences."""
    n = len(scores)
    if n == 0:
        return []
    picked = sorted((i for i in range(n) if scores[i] > 0), key=lambda i: (-scores[i], i))[:best]
    if not picked:
        picked = [0]
    wanted = {i: neighbours for i in picked} | {i: 0 for i in keep if 0 <= i < n and i not in picked}
    spans: list[tuple[int, int]] = []
    for i in sorted(wanted):
        start, end = max(0, i - wanted[i]), min(n, i + wanted[i] + 1)
        if spans and start <= spans[-1][1]:  # overlapping or touching: one window
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def window_text(sentences: Sequence[str], scores: Sequence[float], best: int, neighbours: int) -> str:
    """The unit's windows as one text: sentences joined by a space inside a window, windows
    by " … " (and a leading/trailing " … " where the unit goes on)."""
    keep = [i for i, s in enumerate(sentences) if CAPTION.search(s + " ")]
    spans = window_spans(scores, best, neighbours, keep)
    parts = [" ".join(s.strip() for s in sentences[a:b]) for a, b in spans]
    text = GAP.join(parts)
    if spans and spans[0][0] > 0:
        text = GAP.lstrip() + text
    if spans and spans[-1][1] < len(sentences):
        text = text + GAP.rstrip()
    return text
