"""The query-expansion dictionary: abbreviations and units with the long forms they stand for.

HERO (WattBot 2025) expanded 47 hand-made terms (tCO2e -> "tons carbon dioxide equivalent
emissions", MWh, FLOP, kWh, TPU) before retrieval. Here the dictionary is also read from
the corpus itself: every definition written "long form (ABBR)" or "ABBR (long form)" in a
document (the long form checked letter by letter against the abbreviation, after Schwartz
& Hearst, "A simple algorithm for identifying abbreviation definitions in biomedical text",
PSB 2003), merged with a small built-in unit list (HERO's kind of hand-made terms) and the
corpus's optional `expansions.csv` (`term,expansion` rows, which win).

`expand_query` adds to a query the long forms of the abbreviations it uses and the
abbreviations of the long forms it spells out, so BM25 meets either spelling.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BUILTIN_TERMS",
    "EXTRACTOR_VERSION",
    "USER_FILE",
    "Expansions",
    "count_definitions",
    "define_pairs",
    "merge_definitions",
    "read_user_file",
]

# Bump when `define_pairs` changes: per-document definitions are cached under it.
EXTRACTOR_VERSION = "1"
USER_FILE = "expansions.csv"  # in the corpus folder, beside metadata.csv
MAX_FORMS = 2  # long forms kept per abbreviation (the most frequent in the corpus)

# Units and hardware terms the energy/AI literature uses without defining them (HERO's kind of
# hand-made list); a corpus definition or the user file adds to or overrides them.
BUILTIN_TERMS: dict[str, str] = {
    "kWh": "kilowatt hours",
    "MWh": "megawatt hours",
    "GWh": "gigawatt hours",
    "TWh": "terawatt hours",
    "kW": "kilowatts",
    "MW": "megawatts",
    "GW": "gigawatts",
    "tCO2e": "tons carbon dioxide equivalent emissions",
    "CO2e": "carbon dioxide equivalent",
    "kgCO2e": "kilograms carbon dioxide equivalent",
    "gCO2e": "grams carbon dioxide equivalent",
    "CO2": "carbon dioxide",
    "GHG": "greenhouse gas",
    "FLOP": "floating point operations",
    "FLOPs": "floating point operations",
    "FLOPS": "floating point operations per second",
    "PFLOPS": "petaflops floating point operations per second",
    "TPU": "tensor processing unit",
    "GPU": "graphics processing unit",
    "CPU": "central processing unit",
    "PUE": "power usage effectiveness",
    "WUE": "water usage effectiveness",
    "TDP": "thermal design power",
    "LLM": "large language model",
    "NLP": "natural language processing",
    "HPC": "high performance computing",
}

_ABBR = r"[A-Za-z]*[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*"  # two or more capitals/digits, no spaces
_LONG_THEN_ABBR = re.compile(rf"((?:[\w-]+[ ]+){{1,12}}?[\w-]+)[ ]*\((\s*{_ABBR}s?\s*)\)")
_ABBR_THEN_LONG = re.compile(rf"\b({_ABBR})s?[ ]*\(([A-Za-z][\w -]{{3,100}})\)")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _singular(abbr: str) -> str:
    """GPUs -> GPU (an all-capital abbreviation with a plural s)."""
    return abbr[:-1] if abbr.endswith("s") and len(abbr) > 2 and abbr[:-1].isupper() else abbr


def _valid_abbr(abbr: str) -> bool:
    capitals = sum(c.isupper() for c in abbr)
    return 2 <= len(abbr) <= 10 and capitals >= 2 and not abbr.isdigit() and abbr[0].isalpha()


def match_long_form(abbr: str, words: str) -> str | None:
    """The shortest tail of `words` whose letters spell `abbr` in order, the first letter
    starting a word (Schwartz & Hearst's check), or None."""
    short = abbr.lower()
    text = words.lower()
    s, t = len(short) - 1, len(text) - 1
    while s >= 0:
        c = short[s]
        if not c.isalnum():
            s -= 1
            continue
        while t >= 0 and (text[t] != c or (s == 0 and t > 0 and text[t - 1].isalnum())):
            t -= 1
        if t < 0:
            return None
        t -= 1
        s -= 1
    start = text.rfind(" ", 0, t + 1) + 1
    long_form = words[start:].strip()
    n_words = len(long_form.split())
    if len(long_form) <= len(abbr) or not 2 <= n_words <= min(len(abbr) + 5, 2 * len(abbr)):
        return None
    return long_form


def define_pairs(text: str) -> list[tuple[str, str]]:
    """(abbreviation, long form) for each definition in `text`, in order."""
    out: list[tuple[str, str]] = []
    flat = " ".join(text.split())
    for m in _LONG_THEN_ABBR.finditer(flat):
        abbr = _singular(m.group(2).strip())
        if _valid_abbr(abbr):
            long_form = match_long_form(abbr, m.group(1))
            if long_form:
                out.append((abbr, long_form))
    for m in _ABBR_THEN_LONG.finditer(flat):
        abbr, inside = _singular(m.group(1)), m.group(2).strip()
        long_form = match_long_form(abbr, inside) if _valid_abbr(abbr) else None
        if long_form and long_form == inside:  # the whole parenthesis, not part of a phrase
            out.append((abbr, long_form))
    return out


def _clean(long_form: str) -> str:
    return " ".join(long_form.lower().replace("-", " ").split())


def merge_definitions(
    counts: Mapping[tuple[str, str], int], user: Mapping[str, str] | None = None, *, builtin: bool = True
) -> dict[str, tuple[str, ...]]:
    """abbreviation -> its long forms: the built-in list, then the corpus's (at most
    MAX_FORMS per abbreviation, most frequent first), then the user's, which replace both."""
    merged: dict[str, list[str]] = {a: [_clean(f)] for a, f in BUILTIN_TERMS.items()} if builtin else {}
    by_abbr: dict[str, Counter[str]] = {}
    for (abbr, long_form), n in counts.items():
        by_abbr.setdefault(abbr, Counter())[_clean(long_form)] += n
    for abbr, forms in sorted(by_abbr.items()):
        kept = merged.setdefault(abbr, [])
        for form, _n in sorted(forms.items(), key=lambda kv: (-kv[1], kv[0])):
            if form not in kept and len(kept) < MAX_FORMS:
                kept.append(form)
    for abbr, form in (user or {}).items():
        merged[abbr] = [_clean(f) for f in form.split("|") if f.strip()]
    return {a: tuple(f) for a, f in sorted(merged.items()) if f}


def read_user_file(path: Path) -> dict[str, str]:
    """`term,expansion` rows (a header row naming them, `|` between several expansions).
    A malformed row is an error naming the file and line: a silently ignored term would be
    a silent change of retrieval."""
    out: dict[str, str] = {}
    with Path(path).open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or {"term", "expansion"} - set(reader.fieldnames):
            raise ValueError(f"{path}: needs a header row with the columns term,expansion")
        for row in reader:
            term, expansion = (row.get("term") or "").strip(), (row.get("expansion") or "").strip()
            if not term or not expansion or None in row:
                raise ValueError(f"{path}, line {reader.line_num}: expected term,expansion (both non-empty)")
            out[term] = expansion
    return out


@dataclass(frozen=True)
class Expansions:
    """The merged dictionary, ready to expand queries."""

    forms: Mapping[str, tuple[str, ...]]
    _by_long: dict[str, list[str]] = field(init=False, repr=False, compare=False)
    _long_pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_long: dict[str, list[str]] = {}
        for abbr, forms in self.forms.items():
            for form in forms:
                by_long.setdefault(form, []).append(abbr)
        object.__setattr__(self, "_by_long", by_long)
        # One alternation over every long form (longest first), matched on whole words.
        alternatives = sorted(by_long, key=len, reverse=True)
        pattern = re.compile(r"\b(" + "|".join(re.escape(f) for f in alternatives) + r")s?\b") if by_long else None
        object.__setattr__(self, "_long_pattern", pattern)

    def __len__(self) -> int:
        return len(self.forms)

    def additions(self, query: str) -> list[str]:
        """What the query's terms stand for: long forms of its abbreviations (matched as
        written, or with a plural s: "GPUs"), abbreviations of its long forms."""
        out: list[str] = []
        for word in _WORD.findall(query):
            for key in (word, word[:-1] if word.endswith("s") else None):
                if key and key in self.forms:
                    out += [f for f in self.forms[key] if f not in out]
                    break
        if self._long_pattern is not None:
            folded = " ".join(query.lower().replace("-", " ").split())
            for m in self._long_pattern.finditer(folded):
                out += [a for a in self._by_long[m.group(1)] if a not in out and a not in query]
        return out

    def expand_query(self, query: str) -> str:
        extra = self.additions(query)
        return f"{query} {' '.join(extra)}" if extra else query


def count_definitions(texts: Iterable[str]) -> Counter[tuple[str, str]]:
    """How often each (abbreviation, long form) is defined over `texts` (one document)."""
    counts: Counter[tuple[str, str]] = Counter()
    for text in texts:
        counts.update(define_pairs(text))
    return counts


def as_rows(forms: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    return [(abbr, form) for abbr, fs in forms.items() for form in fs]
