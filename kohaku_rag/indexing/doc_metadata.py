"""Document metadata a question can name: authors' surnames, the publication year, the title.

Read from the corpus's `metadata.csv` (`citation`, `year`, `title` columns, as in WattBot's)
when the search aids are assembled, so HERO's metadata boost ("a question naming Strubell
or 2023 boosts that document", 2.0x) works from the lake's own data.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

__all__ = ["DocMetadata", "authors_of", "matching_documents"]

_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
# Where the author list of a citation ends: at "(2023)", else at the first ". " that
# does not follow an initial ("Jeff J. Ma").
_YEAR_PAREN = re.compile(r"\(\s*(?:1[89]|20)\d\d[a-z]?\s*\)")
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])\.\s")
# Words that end an organisation's name rather than being a surname ("Amazon Staff").
_NOT_SURNAMES = frozenset({"staff", "team", "inc", "ltd", "llc", "corporation", "group", "al", "et", "others"})
_WORD = re.compile(r"[^\W\d_][\w'’-]*")


@dataclass(frozen=True)
class DocMetadata:
    doc_id: str
    title: str = ""
    year: str = ""
    authors: tuple[str, ...] = ()  # surnames (an organisation's first word)

    def __post_init__(self) -> None:
        object.__setattr__(self, "authors", tuple(self.authors))


def authors_of(citation: str) -> tuple[str, ...]:
    """Surnames from a citation's author list ("Emma Strubell, Ananya Ganesh, and Andrew
    McCallum. (2019). ..." -> Strubell, Ganesh, McCallum); names of any length
    ("Wu", "Li") are kept: matching is case-sensitive."""
    end = _YEAR_PAREN.search(citation) or _SENTENCE_END.search(citation)
    head = citation[: end.start()] if end else ""
    out: list[str] = []
    for name in re.split(r",|;|\band\b|&", head):
        words = _WORD.findall(name)
        if not words:
            continue
        surname = words[-1] if len(words) == 1 or words[-1].lower() not in _NOT_SURNAMES else words[0]
        if len(surname) >= 2 and surname.lower() not in _NOT_SURNAMES and surname not in out:
            out.append(surname)
    return tuple(out)


def _fold(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def matching_documents(query: str, docs: Iterable[DocMetadata], fields: Collection[str]) -> set[str]:
    """Documents the query names by an author's surname (a whole, capitalised word as in
    the citation), a publication year, or its whole title."""
    years = set(_YEAR.findall(query)) if "year" in fields else set()
    words = set(re.findall(r"[^\W\d_][\w'’-]*", query)) if "author" in fields else set()
    words |= {w.removesuffix("'s").removesuffix("’s") for w in words}
    folded = f" {_fold(query)} " if "title" in fields else ""
    out: set[str] = set()
    for doc in docs:
        if (
            (doc.year and doc.year in years)
            or any(a in words for a in doc.authors)
            or (folded and len(_fold(doc.title).split()) >= 3 and f" {_fold(doc.title)} " in folded)
        ):
            out.add(doc.doc_id)
    return out
