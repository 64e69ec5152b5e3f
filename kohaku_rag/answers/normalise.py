"""Turn an LLM's free-form answer into WattBot's canonical strings.

WattBot conventions (see the WattBot README (shared/wattbot/README.md)): numbers are plain, without
thousands separators or E-notation, with magnitude words expanded ("5.439 million liters"
-> `5439000`, unit `liters`; "$2.51 million" -> `2510000`, unit `USD`); percentages are
the bare number with unit `percent`; ranges are `[low,high]` without spaces; True/False
answers are `answer` TRUE/FALSE with `answer_value` 1/0; categories are kept as text;
`is_blank` fills empty fields; `ref_id` is a Python-list string of document ids.

`parse_value` is lenient on purpose: the scorer uses it on predictions too, so an answer
written "1,438 lbs" still matches gold `1438` (the official Kaggle metric likewise
normalises commas, magnitude suffixes, hedges and range strings before comparing).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from kohaku_rag.answers.records import BLANK, Answer

ValueKind = Literal["blank", "boolean", "number", "range", "text"]

# Tokens meaning "no answer". The official metric uses {"", "na", "n/a", "is_blank"} plus the
# fallback sentence; "nan"/"none"/"null" are added because pandas and JSON nulls stringify
# to them.
_BLANK_TOKENS = frozenset({"", "is_blank", "na", "n/a", "nan", "none", "null"})
_BLANK_PREFIX = "unable to answer with confidence"
_TRUE_TOKENS = frozenset({"true", "yes"})
_FALSE_TOKENS = frozenset({"false", "no"})

_MAGNITUDES = {
    "thousand": 3, "k": 3, "K": 3,
    "million": 6, "mn": 6, "M": 6,
    "billion": 9, "bn": 9, "B": 9,
    "trillion": 12, "tn": 12, "T": 12,
}  # fmt: skip
# Single lower-case "m"/"b"/"t" are left out: they read as metres, bits and tonnes.
_MAGNITUDE_WORDS = ("thousand", "million", "billion", "trillion")
_MAG = rf"(?i:{'|'.join(_MAGNITUDE_WORDS)})|mn|bn|tn|[kKMBT]"
_NUM = r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+\u2212]?\.\d+(?:[eE][-+]?\d+)?"
_HEDGE_WORDS = (
    "approximately", "approx.", "approx", "about", "around", "roughly", "nearly", "almost",
    "just over", "just under", "over", "under", "more than", "less than", "greater than",
    "fewer than", "up to", "at least", "at most", "an estimated", "estimated", "circa", "ca.",
)  # fmt: skip
_HEDGE = (
    r"(?:(?i:"
    + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(_HEDGE_WORDS, key=len, reverse=True))
    + r")\s+|[~\u2248\u2265\u2264<>]=?\s*)*"
)
_CURRENCY = {"$": "USD", "US$": "USD", "\u20ac": "EUR", "\u00a3": "GBP"}
_SUFFIX_UNITS = {"%": "percent", "percent": "percent", "per cent": "percent",
                 "x": "multiplier", "\u00d7": "multiplier", "times": "multiplier", "fold": "multiplier"}  # fmt: skip


def _quantity(i: int) -> str:
    """One number with its optional currency, magnitude and %/x suffix (groups end in i)."""
    return (
        rf"(?P<cur{i}>US\$|\$|\u20ac|\u00a3)?\s*(?P<num{i}>{_NUM})"
        rf"(?:\s*(?P<mag{i}>{_MAG})(?![A-Za-z]))?"
        rf"(?:\s*-?(?P<suf{i}>%|(?i:percent|per\s+cent|times|fold)(?![A-Za-z])|[x\u00d7](?![A-Za-z])))?"
    )


# A unit tail must be separated by whitespace (or start with "/"), so "3D parallelism",
# "4-bit" or "GPT-3" never read as numbers.
_TAIL = r"(?:\s+(?P<tail>\S.*?)|\s*(?P<slash>/.*?))?\s*"
_NUMBER_RE = re.compile(rf"^{_HEDGE}{_quantity(1)}{_TAIL}$", re.DOTALL)
_RANGE_RE = re.compile(
    rf"^{_HEDGE}(?:(?i:between|from)\s+)?{_quantity(1)}\s*(?:-|\u2013|\u2014|(?i:to|and)\s)\s*{_HEDGE}{_quantity(2)}{_TAIL}$",
    re.DOTALL,
)
_GROUPED_NUMBER = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?$")


@dataclass(frozen=True)
class ParsedValue:
    """An answer_value read into a type.

    `value` is the canonical WattBot string; `numbers` holds the Decimal for a number or
    boolean (1/0), or (low, high) for a range; `unit` is the unit the text itself implied
    ("USD" from "$", "percent" from "%", "multiplier" from "x", else trailing words), or
    None.
    """

    kind: ValueKind
    value: str
    numbers: tuple[Decimal, ...] = ()
    unit: str | None = None


def is_blank_value(value: object) -> bool:
    """True for WattBot's empty markers: None, "", is_blank, NA, n/a, nan, none, null,
    or the "Unable to answer with confidence ..." sentence (any case, surrounding space)."""
    if value is None:
        return True
    text = str(value).strip().lower()
    return text in _BLANK_TOKENS or text.startswith(_BLANK_PREFIX)


def format_number(number: Decimal) -> str:
    """Plain decimal notation, no exponent, no trailing zeros: 1.01E+11 -> 101000000000."""
    if number == 0:
        return "0"
    return format(number.normalize(), "f")


def parse_value(text: object, expected_unit: str | None = None) -> ParsedValue:
    """Read an answer_value (gold or LLM-written) into a `ParsedValue`.

    `expected_unit` is the question's answer_unit when known. A value that echoes it
    ("43 percent", "5.4 billion cubic meters" for unit "billion cubic meters") has the echo
    removed first, so a magnitude word that belongs to the unit is not expanded. When the
    expected unit is `is_blank` (categorical and True/False questions) a number must stand
    alone: "4 bit quantization" stays text there, while "40" still reads as a number.
    """
    raw = "" if text is None else str(text)
    # Superscript exponents first: NFKC would make "10¹⁸" read "1018".
    stripped = _unquote(unicodedata.normalize("NFKC", scientific_as_e(raw)).strip())
    if is_blank_value(stripped):
        return ParsedValue("blank", BLANK)
    word = stripped.rstrip(".").strip().lower()
    if word in _TRUE_TOKENS:
        return ParsedValue("boolean", "1", (Decimal(1),))
    if word in _FALSE_TOKENS:
        return ParsedValue("boolean", "0", (Decimal(0),))

    candidate = stripped[:-1].rstrip() if stripped.endswith(".") else stripped
    unit_known = expected_unit is not None and not is_blank_value(expected_unit)
    if unit_known:
        candidate = _strip_unit_echo(candidate, str(expected_unit))
    allow_tail = not (expected_unit is not None and not unit_known)

    parsed = _parse_bracket(candidate) or _parse_range(candidate, allow_tail) or _parse_number(candidate, allow_tail)
    return parsed or ParsedValue("text", stripped)


_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPT = str.maketrans(_SUPERSCRIPTS, "0123456789-+")
_POWER = r"10\s*(?:\^|\*\*)\s*(?P<open>\()?\s*(?P<exp>[-+−]?\d+)(?(open)\s*\))"
# "3.3 x 10^18", "3.3×10^18", "3.3*10**18", "3.3 · 10^18"
_TIMES_POWER = re.compile(rf"(?P<man>\d+(?:\.\d+)?)\s*(?:[x×*·⋅])\s*{_POWER}")
# "(3.3,10^18)": a mantissa and its power written as a pair (the bundled model's spelling)
_PAIR_POWER = re.compile(rf"^\(?\s*(?P<man>-?\d+(?:\.\d+)?)\s*,\s*{_POWER}\s*\)?$")
_BARE_POWER = re.compile(rf"(?<![\d.]){_POWER}")
_PARENTHESISED_E = re.compile(r"^\(\s*(-?\d+(?:\.\d+)?e[-+]?\d+)\s*\)$")
_SUPERSCRIPT_POWER = re.compile(f"10([{_SUPERSCRIPTS}]+)")


def scientific_as_e(text: str) -> str:
    """Scientific notation written out as E-notation: "3.3×10^18", "3.3 x 10¹⁸" and the pair
    "(3.3,10^18)" -> "3.3e18"; "10^9" -> "1e9". Anything else is returned unchanged."""
    if "10" not in text:
        return text
    flat = _SUPERSCRIPT_POWER.sub(lambda m: "10^" + m.group(1).translate(_SUPERSCRIPT), text)
    pair = _PAIR_POWER.match(flat)
    if pair:
        return f"{pair.group('man')}e{_exponent(pair)}"
    flat = _TIMES_POWER.sub(lambda m: f"{m.group('man')}e{_exponent(m)}", flat)
    flat = _BARE_POWER.sub(lambda m: f"1e{_exponent(m)}", flat)
    alone = _PARENTHESISED_E.match(flat)
    return alone.group(1) if alone else flat


def _exponent(match: re.Match[str]) -> str:
    return match.group("exp").replace("−", "-").lstrip("+")


def canonical_value(text: object, expected_unit: str | None = None) -> str:
    """The canonical answer_value string for `text` (see `parse_value`)."""
    return parse_value(text, expected_unit).value


def expand_stated_magnitude(value: str, unit: str, texts: Sequence[str]) -> str:
    """`value` scaled by the magnitude word the model's own words put after it.

    Small models copy the numeral of "5.4 million liters" into answer_value as "5.4" while
    their answer or explanation keeps "million". When `value` is a bare number and one of
    `texts` writes that same numeral followed by a magnitude word, the expanded number is
    returned; a unit that itself starts with the word ("million liters") keeps the value.
    """
    value = value.strip()
    unit_words = unit.strip().lower().split()
    if not re.fullmatch(_NUM, value) or (unit_words and unit_words[0] in _MAGNITUDES):
        return value
    stated = re.compile(rf"(?<![\d.,]){re.escape(value)}\s*({'|'.join(_MAGNITUDE_WORDS)})\b", re.IGNORECASE)
    # A short suffix ("$800M", "€2.5bn") only after a currency sign: elsewhere "8B" is a
    # model's name ("JetMoE-8B") as often as 8 billion.
    money = re.compile(rf"[$€£]\s*{re.escape(value)}\s*(mn|bn|tn|[kKMBT])(?![\w])")
    for text in texts:
        match = stated.search(text)
        if match:
            return format_number(_to_decimal(value, match[1].lower()))
        match = money.search(text)
        if match:
            return format_number(_to_decimal(value, match[1]))
    return value


def canon_text(text: object) -> str:
    """Comparison key for categorical answers: case, punctuation, a leading article and
    whitespace do not matter ("The ML.ENERGY Benchmark" == "ML.ENERGY Benchmark").

    Same rule as the WattBot 2026 metric's canon_text (punctuation to spaces, collapse,
    drop a leading the/a/an; internal articles are kept because they can be content).
    """
    folded = unicodedata.normalize("NFKC", "" if text is None else str(text)).lower()
    spaced = re.sub(r"\s+", " ", re.sub(r"[^\w\s]|_", " ", folded)).strip()
    return re.sub(r"^(?:the|a|an)\s+", "", spaced)


_COLLECTION_BRACKETS = {"(": ")", "[": "]", "{": "}"}


def split_collection(text: object) -> tuple[str, list[str]] | None:
    """A bracketed value's opening bracket and members: `(a,b)` (a WattBot 2026 list),
    `[a,b]`, `{a,b}` (a set of terms); None when `text` is not bracketed. Members are split
    on ", " when that gives several (so "1,000, 2,000" keeps its thousands separators),
    else on ","; ";" separates too; quotes around a member are dropped."""
    raw = unicodedata.normalize("NFKC", "" if text is None else str(text)).strip()
    if len(raw) < 2 or _COLLECTION_BRACKETS.get(raw[0]) != raw[-1]:
        return None
    inner = raw[1:-1].strip()
    if not inner:
        return raw[0], []
    spaced = [p for p in re.split(r"\s*[,;]\s+|\s*;\s*", inner) if p.strip()]
    parts = spaced if len(spaced) > 1 else [p for p in re.split(r"[,;]", inner) if p.strip()]
    return raw[0], [p.strip().strip("'\"`").strip() for p in parts]


def canonical_list(text: object, expected_unit: str | None = None) -> str | None:
    """The canonical WattBot 2026 list `(a,b,...)` for a bracketed value of two or more
    members (numbers written plainly, a unit echo dropped, terms trimmed); None for anything
    else, including a two-number `[lo,hi]`, which stays a range."""
    split = split_collection(text)
    if split is None or len(split[1]) < 2:
        return None
    if split[0] == "[" and parse_value(text, expected_unit).kind == "range":
        return None
    members = []
    for member in split[1]:
        parsed = parse_value(member, expected_unit)
        if parsed.kind == "blank":
            continue
        members.append(parsed.value if parsed.kind in ("number", "boolean", "range") else member)
    return "(" + ",".join(members) + ")" if len(members) >= 2 else None


def parse_ref_ids(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Document ids from any ref_id spelling, lower-cased, de-duplicated, in order.

    Accepts "['a','b']", "['a', 'b']", '["a","b"]', "[a, b]" (no quotes), a bare "a",
    "a, b" or "a; b", a list/tuple of such strings, and blank markers (-> ()).
    """
    if value is None:
        return ()
    pieces: list[str] = []
    if isinstance(value, str):
        text = value.strip()
        if is_blank_value(text):
            return ()
        if text.startswith(("[", "(")) and text.endswith(("]", ")")):
            text = text[1:-1]
        pieces = re.split(r"[,;]", text)
    else:
        for item in value:
            pieces.extend(parse_ref_ids(str(item)))
    ids: list[str] = []
    for piece in pieces:
        ref = piece.strip().strip("'\"`").strip().lower()
        if ref and not is_blank_value(ref) and ref not in ids:
            ids.append(ref)
    return tuple(ids)


def resolve_ref_ids(ids: Sequence[str], known_ids: Collection[str]) -> tuple[str, ...]:
    """Map ids that are not in `known_ids` to their unique close match, keep the rest.

    Fixes typos such as `cottier2025` for `cottier2024`. Candidates are the known ids with
    the same alphabetic author prefix (all known ids if none share it); the best
    difflib ratio must be >= 0.8 and strictly better than the runner-up, so
    `luccioni2025d` (a, b and c tie) or `wu2021` (a and b tie) stay unresolved.
    """
    known = {k.strip().lower() for k in known_ids}
    resolved: list[str] = []
    for ref in ids:
        ref = ref.strip().lower()
        match = ref if ref in known else _closest_id(ref, known)
        target = match or ref
        if target not in resolved:
            resolved.append(target)
    return tuple(resolved)


def normalise_answer(
    answer: Answer,
    expected_unit: str | None = None,
    known_ref_ids: Collection[str] | None = None,
) -> Answer:
    """A WattBot-canonical copy of an LLM's `answer`.

    * blank value (or `is_blank` set) -> `Answer.blank(unit)`: refs dropped, every
      evidence field `is_blank`, the unit kept.
    * True/False/yes/no (or value 1/0 with answer TRUE/FALSE) -> value "1"/"0", answer
      "TRUE"/"FALSE", unit `is_blank`; an answer word overrules a contradicting digit.
    * numbers and ranges -> canonical value; the unit is `expected_unit` when given
      (the test file states it), else the unit the text implied, else the answer's own.
    * a bracketed list of several values (not a two-number `[lo,hi]`) -> `(a,b,...)`, each
      member written as a value alone would be (`canonical_list`).
    * anything else -> categorical text, kept as written (trimmed, outer quotes removed).
    With `known_ref_ids`, typo'd ids are resolved and ids that match no document are
    dropped, since a WattBot reference must be a document of the corpus.
    """
    unit = (expected_unit if expected_unit is not None else answer.answer_unit).strip() or BLANK
    parsed = parse_value(answer.answer_value, expected_unit)
    if answer.is_blank or parsed.kind == "blank":
        return dataclasses.replace(Answer.blank(unit), confidence=answer.confidence)

    refs = parse_ref_ids(answer.ref_id)
    if known_ref_ids is not None:
        known = {k.strip().lower() for k in known_ref_ids}
        refs = tuple(r for r in resolve_ref_ids(refs, known) if r in known)

    answer_word = answer.answer.strip().rstrip(".").lower()
    if parsed.kind == "boolean" or (
        parsed.kind == "number" and parsed.value in ("0", "1") and answer_word in _TRUE_TOKENS | _FALSE_TOKENS
    ):
        # When the words and the digit disagree ("False", 1), the words win: a reply states
        # its verdict in words first, and a digit is easier to slip on.
        truth = answer_word in _TRUE_TOKENS if answer_word in _TRUE_TOKENS | _FALSE_TOKENS else parsed.value == "1"
        text, value, unit = ("TRUE" if truth else "FALSE"), ("1" if truth else "0"), BLANK
    elif parsed.kind in ("number", "range"):
        value = parsed.value
        if expected_unit is None:
            unit = (parsed.unit or answer.answer_unit).strip() or BLANK
        text = answer.answer.strip() or _display(value, unit)
    else:
        # A list of several values, "(3, 5 GPUs)" or "[GPT-3, BLOOM]", is written "(3,5)".
        value = canonical_list(answer.answer_value, expected_unit) or parsed.value
        text = answer.answer.strip() or value

    return dataclasses.replace(
        answer,
        answer=text,
        answer_value=value,
        answer_unit=unit,
        ref_id=refs,
        explanation=answer.explanation.strip() or BLANK,
        supporting_materials=answer.supporting_materials.strip() or BLANK,
        is_blank=False,
    )


# ── internals ──────────────────────────────────────────────────────────────


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        return text[1:-1].strip()
    return text


def _display(value: str, unit: str) -> str:
    return value if is_blank_value(unit) else f"{value} {unit}"


def _strip_unit_echo(text: str, unit: str) -> str:
    """Remove the expected unit (and a magnitude word it starts with) from the value's end."""
    unit = unit.strip()
    lowered = text.lower()
    if unit and lowered.endswith(unit.lower()):
        head = text[: len(text) - len(unit)]
        # Only a whole-word echo: "64.7GB"/"64.7 GB" for GB, never "MWh" inside "GWh".
        if not head or not head[-1].isalpha():
            text = head.rstrip()
    first_word = unit.split()[0] if unit.split() else ""
    if first_word.lower() in _MAGNITUDE_WORDS:
        text = re.sub(rf"\s+{first_word}$", "", text, flags=re.IGNORECASE)
    return text


def _to_decimal(number: str, magnitude: str | None) -> Decimal:
    cleaned = number.replace(",", "").replace("\u2212", "-")
    try:
        value = Decimal(cleaned)
    except InvalidOperation as exc:  # the regexes only admit valid numerals
        raise ValueError(f"cannot read {number!r} as a number") from exc
    if magnitude:
        key = magnitude if magnitude in _MAGNITUDES else magnitude.lower()
        value = value.scaleb(_MAGNITUDES[key])
    return value


def _implied_unit(currency: str | None, suffix: str | None, tail: str | None) -> str | None:
    tail = tail.strip().rstrip(".").strip() if tail else None
    if currency:
        base = _CURRENCY[currency]
        return f"{base} {tail}" if tail else base
    if suffix:
        return _SUFFIX_UNITS[re.sub(r"\s+", " ", suffix.lower())]
    return tail or None


def _tail(match: re.Match[str]) -> str | None:
    return match.group("tail") or match.group("slash")


def _parse_number(text: str, allow_tail: bool) -> ParsedValue | None:
    match = _NUMBER_RE.match(text)
    if not match or (_tail(match) and not allow_tail):
        return None
    number = _to_decimal(match["num1"], match["mag1"])
    unit = _implied_unit(match["cur1"], match["suf1"], _tail(match))
    return ParsedValue("number", format_number(number), (number,), unit)


def _parse_range(text: str, allow_tail: bool) -> ParsedValue | None:
    match = _RANGE_RE.match(text)
    if not match or (_tail(match) and not allow_tail):
        return None
    # "2.5-3 million", "80-90%", "$1-2 billion": a marker written once applies to both ends.
    magnitude = match["mag2"] or match["mag1"]
    low = _to_decimal(match["num1"], match["mag1"] or magnitude)
    high = _to_decimal(match["num2"], magnitude)
    unit = _implied_unit(match["cur1"] or match["cur2"], match["suf2"] or match["suf1"], _tail(match))
    return _range(low, high, unit)


def _parse_bracket(text: str) -> ParsedValue | None:
    """`[lo,hi]`, `[lo, hi]`, and `[1,000,2,000]` (thousands separators left inside)."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    inner = text[1:-1].strip()
    spaced = [p.strip() for p in re.split(r",\s+", inner)]
    if len(spaced) == 2 and all(_GROUPED_NUMBER.match(p) for p in spaced):
        ends = spaced
    else:
        parts = [p.strip() for p in inner.split(",")]
        splits = [
            (",".join(parts[:i]), ",".join(parts[i:]))
            for i in range(1, len(parts))
            if _GROUPED_NUMBER.match(",".join(parts[:i])) and _GROUPED_NUMBER.match(",".join(parts[i:]))
        ]
        if len(splits) > 1:  # "[1,100,200]": only one reading has low <= high
            splits = [(a, b) for a, b in splits if _to_decimal(a, None) <= _to_decimal(b, None)]
        if len(splits) != 1:
            return None  # a categorical list, or a genuinely ambiguous "[1,000,000]"
        ends = list(splits[0])
    low, high = (_to_decimal(e, None) for e in ends)
    return _range(low, high, None)


def _range(low: Decimal, high: Decimal, unit: str | None) -> ParsedValue:
    low, high = sorted((low, high))
    return ParsedValue("range", f"[{format_number(low)},{format_number(high)}]", (low, high), unit)


def _author(ref: str) -> str:
    match = re.match(r"[a-z]*", ref)
    return match[0] if match else ""


def _closest_id(ref: str, known: set[str]) -> str | None:
    same_author = sorted(k for k in known if _author(ref) and _author(k) == _author(ref))
    candidates = same_author or sorted(known)
    scored = sorted(((difflib.SequenceMatcher(None, ref, k).ratio(), k) for k in candidates), reverse=True)
    if not scored or scored[0][0] < 0.8:
        return None
    if len(scored) > 1 and scored[1][0] == scored[0][0]:
        return None
    return scored[0][1]


# ── unit conversion (for grouping votes) ────────────────────────────────────

_SI_PREFIXES = {"": 0, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15, "m": -3, "\u00b5": -6, "u": -6, "n": -9}
# Units a prefix scales (SI and the few the WattBot answers use); "W" and "Wh" stay apart.
_SI_BASES = ("Wh", "W", "J", "g", "gCO2e", "gCO2", "tCO2e", "tCO2", "t", "B", "Hz", "L", "FLOP", "FLOPs", "FLOPS", "eV")


def _split_prefix(unit: str) -> tuple[int, str] | None:
    unit = unit.strip()
    for base in sorted(_SI_BASES, key=len, reverse=True):
        if unit.endswith(base) and unit[: len(unit) - len(base)] in _SI_PREFIXES:
            return _SI_PREFIXES[unit[: len(unit) - len(base)]], base
    return None


def unit_factor(from_unit: str, to_unit: str) -> Decimal | None:
    """The factor that turns a number in `from_unit` into `to_unit` when they differ only by
    an SI prefix ("kW" -> "MW": 0.001; "W" -> "MW": 1e-6); None when they are not the same
    base unit (or are equal)."""
    a, b = _split_prefix(from_unit), _split_prefix(to_unit)
    if a is None or b is None or a[1] != b[1] or a[0] == b[0]:
        return None
    return Decimal(10) ** (a[0] - b[0])


def in_unit(value: ParsedValue, unit: str) -> ParsedValue:
    """A number or range whose text named another prefix of `unit` ("1500 kW" for "MW"),
    converted to `unit` ("1.5"); anything else unchanged."""
    if value.kind not in ("number", "range") or not value.unit or is_blank_value(unit):
        return value
    factor = unit_factor(value.unit, unit)
    if factor is None:
        return value
    numbers = tuple(n * factor for n in value.numbers)
    if value.kind == "number":
        return ParsedValue("number", format_number(numbers[0]), numbers, None)
    return ParsedValue("range", f"[{format_number(numbers[0])},{format_number(numbers[1])}]", numbers, None)
