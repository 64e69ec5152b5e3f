"""Sentence splitting with NLTK Punkt built from parameters.

NLTK's trained models are a download, which fails offline; Punkt with an explicit
abbreviation list handles scientific prose ("Fig. 3", "et al.", "e.g.") well enough
and is deterministic.
"""

from __future__ import annotations

import re
from functools import lru_cache

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

ABBREVIATIONS: frozenset[str] = frozenset(
    {
        "fig",
        "figs",
        "eq",
        "eqs",
        "sec",
        "secs",
        "tab",
        "tbl",
        "ref",
        "refs",
        "al",
        "e.g",
        "i.e",
        "cf",
        "vs",
        "approx",
        "resp",
        "no",
        "nos",
        "vol",
        "pp",
        "p",
        "ch",
        "app",
        "dept",
        "univ",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "inc",
        "ltd",
        "co",
        "corp",
        "jr",
        "sr",
        "st",
        "u.s",
        "u.k",
        "e.u",
        "est",
        "min",
        "max",
        "avg",
        "std",
        "incl",
        "excl",
        "alg",
        "thm",
        "def",
        "prop",
        "lem",
        "cor",
        "ex",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    }
)

_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _tokenizer() -> PunktSentenceTokenizer:
    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    return PunktSentenceTokenizer(params)


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` with internal whitespace folded to single spaces."""
    flat = _SPACES.sub(" ", text).strip()
    if not flat:
        return []
    return [s.strip() for s in _tokenizer().tokenize(flat) if s.strip()]
