"""Cross-document questions without the LLM planner: one query per thing the question compares.

A question that combines two sources ("by what factor was the cost of GPT-4 greater than the
budget for FLM-101B?", "how many household-years is training the model equivalent to?")
needs evidence for each side, and one query finds the side its words dominate. These rules
split the question's own words (no LLM, no list of names), in order, first match wins:

* between:      "... improve between A and B"  -> "... improve A", "... improve B"
* alternatives: "which of the two mechanisms - A or B - uses less" (a dash, colon or "of"
                list of two to four, closed by "or"/"and")  -> "A ... uses less", "B ... uses less"
* comparison:   "X than Y", "X compared to / relative to / versus Y", "X equivalent to /
                comparable to Y", "the same ... as Y" (the last such cue; "more than 40%"
                is a quantity, not a cue)  -> "X", "Y" (a short Y with X's first common
                words, the quantity compared)
* references:   two or more "Name et al." -> the question naming each alone

Each query keeps the words around the entity (the measured quantity) so it finds the
entity's passage, not any mention of the name. A question no rule splits gets none.
"""

from __future__ import annotations

import re

MAX_ENTITIES = 4
_PREFIX = re.compile(r"^\s*(?:true or false\s*[:,-]\s*)?", re.IGNORECASE)
_QUESTION_WORDS = re.compile(
    r"^(?:by )?(?:what|which|how|when|where|who|whom|whose|is|are|was|were|do|does|did|can|could|would|will)"
    r"(?: (?:much|many|fold|factor|percentage|times|is|are|was|were|did|does|do))*\b\s*",
    re.IGNORECASE,
)
_BETWEEN = re.compile(r"^(?P<head>.*?)\bbetween (?P<a>.+?) and (?P<b>.+?)(?P<tail>[?.,;].*)?$", re.IGNORECASE)
_ALTERNATIVES = re.compile(
    r"^(?P<head>.*?)(?:\s[-–—:]\s*|-(?=[A-Z])|\bof\s)(?P<items>[^-–—:?]+?(?:,? or |,? and )[^-–—:?,]+?)"
    r"(?:\s*[-–—]\s*|\?|$)(?P<tail>.*)$",
    re.IGNORECASE,
)
_CUES = re.compile(
    r"\b(?:compared (?:to|with)|relative to|versus|vs\.?|than|equivalent to|comparable to|the same \w+(?: \w+)? as)\s",
    re.IGNORECASE,
)
_REFERENCE = re.compile(r"\b([A-Z][A-Za-z'-]+) et al\.?(?:,? \(?(?:19|20)\d\d\)?)?")
_WORD = re.compile(r"[A-Za-z0-9]")
_STOP = frozenset(
    ["the", "and", "for", "with", "was", "were", "that", "this", "from", "when", "using", "into", "over", "are", "did"]
    + ["does", "has", "have", "had"]
)
_NUMBER_AFTER = re.compile(r"\s*[$~≈]?\d")


def entity_queries(question: str) -> tuple[str, ...]:
    """One query per entity the question compares or combines (two to four), or () when no
    rule applies (see the module docstring)."""
    text = " ".join(_PREFIX.sub("", question).split())
    for rule in (_between, _alternatives, _comparison, _references):
        queries = [q for q in (_clean(q) for q in rule(text)) if _content_words(q) >= 2]
        distinct = list(dict.fromkeys(queries))
        if len(distinct) >= 2:
            return tuple(distinct[:MAX_ENTITIES])
    return ()


def _between(text: str) -> list[str]:
    m = _BETWEEN.match(text)
    if m is None:
        return []
    head, tail = m["head"], m["tail"] or ""
    return [f"{head} {m['a']} {tail}", f"{head} {m['b']} {tail}"]


def _alternatives(text: str) -> list[str]:
    if not re.search(r"\b(?:which|whether)\b", text, re.IGNORECASE):
        return []
    m = _ALTERNATIVES.match(text)
    if m is None:
        return []
    items = [i for i in re.split(r",? (?:or|and) |, ", m["items"]) if i.strip()]
    if not 2 <= len(items) <= MAX_ENTITIES:
        return []
    return [f"{item} {m['head']} {m['tail']}" for item in items]


def _comparison(text: str) -> list[str]:
    # "more than 40%" states a quantity, not a second thing compared
    cues = [c for c in _CUES.finditer(text) if not _NUMBER_AFTER.match(text, c.end())]
    if not cues:
        return []
    cue = cues[-1]
    left, right = text[: cue.start()], text[cue.end() :]
    if _content_words(_clean(right)) < 3:  # "V100 GPUs": with the quantity compared (no name)
        have = {w.lower() for w in right.split()}
        quantity = [w for w in _content(_clean(left)) if w.islower() and w.isalpha() and w not in have]
        right = f"{right} {' '.join(quantity[:3])}"
    return [left, right]


def _references(text: str) -> list[str]:
    names = list(dict.fromkeys(m.group(0) for m in _REFERENCE.finditer(text)))
    if len(names) < 2:
        return []
    out = []
    for name in names:
        rest = text
        for other in names:
            if other != name:
                rest = rest.replace(other, " ")
        out.append(rest)
    return out


def _clean(query: str) -> str:
    query = " ".join(query.replace("?", " ").split()).strip(" ,;:-–—")
    return _QUESTION_WORDS.sub("", query).strip(" ,;:-–—")


def _content(query: str) -> list[str]:
    return [w for w in query.split() if _WORD.search(w) and len(w) > 2 and w.lower() not in _STOP]


def _content_words(query: str) -> int:
    return len(_content(query))
