"""Tables recovered from extracted text (JSON payloads, plain text), where a table is a
block of lines: header lines ("inference energy (kWh)" / "task mean std"), then one line
per row ("text generation 0.047 0.03"), with its "Table N" caption above or below.

A block is a run of lines that end in the same number of numeric cells. Its column names
come from the lines just above it (or, failing that, just below it): all of them joined, or
the last one alone with the lines above it as the group every column shares. When no
reading gives exactly one name per cell column, the block is kept as a table of plain
lines (`TextTable.record` is None): never aligned by guess.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kohaku_rag.document.table_record import GROUP_SEP, TABLE_LABEL, TableRecord, TableRow, caption_label

__all__ = ["TextTable", "split_tables"]

# A numeric cell: 0.047, 1,171, 3.55e6, 175B, 52.88%, $40M, (12.3), ~5, 10^20, 2.1x, 48GB, a range
# "35–65%" or "$433–$1472", a value and its interval "2.4[2.0,2.9]"
_NUMERIC = re.compile(
    r"^[(]?[-+−~≈<>≤≥$€£]*\d[\d,]*(?:\.\d+)?(?:[eE][-+−]?\d+)?(?:\^\d+)?(?:%?[–-][$€£]?\d[\d,]*(?:\.\d+)?)?"
    r"(?:×10\^[-−]?\d+)?(?:%|×|x|[KMGT]i?B|[kMG]?Wh?|ms|[KMBGTkmb])?(?:\([-−\d.,]+\)|\[[-−\d.,]+\])?(?:±\d[\d,]*(?:\.\d+)?|\(±\d[\d,]*(?:\.\d+)?\))?[)\]]?[*†‡]*$"
)
_EMPTY_CELLS = frozenset({"-", "–", "—", "--", "n/a", "N/A", "NA", "N.A."})
_WORD_CELLS = frozenset({"∞", "inf", "Inf"})
# "258 bil.": a number and its short magnitude word are one cell
_MAGNITUDE = re.compile(r"(\d)\s+(bil\.|mil\.|bn|mn|billion|million|thousand|k|M|B|T)(?=\s|$)")
# "64.7 GB", "13.3 ms": a number and its unit are one cell (chen2024's "LLaMA-33B 64.7 GB 60 6656 1")
_UNIT = re.compile(
    r"(\d)\s+((?:[kMGT]i?B|KB|[kMGT]?Wh?|[kMG]?J|ms|s|hrs?|GPUs?|tCO2e?|kgCO2e?|kg|TFLOPS|GFLOPS)(?:/s)?)(?=\s|$)"
)
_CAPTION = re.compile(rf"^\s*{TABLE_LABEL}\s*[:.]", re.IGNORECASE)
_CITATION = re.compile(r"\((?:[^()]*\bet al\.?[^()]*|[^()]*\b(?:19|20)\d\d[a-z]?)\)|\[[\d,\s–-]+\]")
_SENTENCE_END = re.compile(r"[.:?!]['\")\]]?$")
_PLUS_MINUS = re.compile(r"\s*±\s*")
# "201.37 ( ±28.77)": the spread belongs to the cell before it
_SPREAD = re.compile(r"(\d)\s+\(\s*±\s*")
# "7(6, 8)": a value and its interval are one cell
_INTERVAL = re.compile(r"(\d)\(\s*([-−\d.]+),\s*([-−\d.]+)\s*\)")
# "2.4 [2.0, 2.9]" or "8B [23, 80]": numbers in brackets after a token (see _bracketed)
_BRACKETED = re.compile(r"(\S+)\s*\[\s*(\d[\d.,\s–-]*?)\s*\]")
_LABEL_END = "\u2063"  # stands for a dropped citation until the label is cut from the cells
# "6 Evaluation", "4.2 Hyper-parameters": a section's heading, never a table's header line
_HEADING = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.|[IVX]+\.)\s+[A-Z][\w-]*(?:\s+[\w-]+){0,5}$")
# A footnote's link or a lone page number: where a header above a table cannot reach
# and a table's label alone ("TABLE IV") or its title in capitals (with a small word: "COST OF")
_NOT_HEADER = re.compile(
    r"https?://|\bwww\.|^\d{1,3}$|^(?:TABLE|Table)\s+[IVXLC\d]+$|^(?=.*\b(?:OF|ON|AND|FOR|WITH|THE|IN)\b)[A-Z][A-Z\s,.:;()-]{15,}$"
)
# "600Time in Seconds": a figure's axis number glued onto its title, never a column's name
_GLUED = re.compile(r"^\d+[A-Z][a-z]")
# "and hyperparameters. Whereas a decade": one sentence ending and the next starting: prose
_SENTENCE_INSIDE = re.compile(r"[a-z]{3,}\. [A-Z][a-z]+ [a-z]")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")  # "2022-09-21": one cell
# "Consumer Renew. Gas Coal Nuc.": a line of names may end in a short abbreviation's full stop
_ABBREVIATION_END = re.compile(r"(?:^|\s)[A-Z][a-z]{0,4}\.$")
# "1.0 × 10−4" as printed: one cell, "1.0×10^-4"
_POWER_OF_TEN = re.compile(r"(\d)\s*[×x]\s*10\s*([−-]?)\s*(\d+)")

MAX_LABEL_CHARS = 60
MAX_LABEL_WORDS = 8
MAX_HEADER_LINES = 24
MAX_CAPTION_DISTANCE = 15  # lines between a caption above and its table's first row


@dataclass(frozen=True)
class TextTable:
    """A table found in a run of lines: `lines[start:end]` (caption and header included)."""

    start: int
    end: int
    record: TableRecord | None  # None: not aligned, kept as its plain lines
    caption: str
    lines: tuple[str, ...]

    def text(self) -> str:
        """The table as plain lines (its caption first), for a table that was not aligned."""
        body = [ln for ln in self.lines if ln.strip() and ln.strip() != self.caption]
        return "\n".join([self.caption, *body] if self.caption else body)


def _is_numeric(token: str) -> bool:
    number, _, magnitude = token.partition("\u2060")
    return token in _EMPTY_CELLS or token in _WORD_CELLS or bool(_NUMERIC.match(number) or _DATE.match(token))


def _number(token: str) -> float | None:
    digits = re.sub(r"[^\d.]", "", token.replace("−", "-"))
    try:
        return float(digits)
    except ValueError:
        return None


def _bracketed(match: re.Match[str]) -> str:
    """Numbers in brackets: the interval of the value before them when they bracket it ("9 [8,
    12]": one cell "9[8,12]"), else a citation ("8B [23, 80]", "[3]"), dropped from the line;
    anything else (a year range, a list of words) is left as it is."""
    before, inner = match.group(1), match.group(2)
    parts = [p.strip() for p in inner.split(",")]
    if not all(re.fullmatch(r"[-−]?\d[\d.]*", p) for p in parts):
        return match.group(0)
    value = _number(before) if _NUMERIC.match(before) else None
    if len(parts) == 2 and value is not None:
        low, high = _number(parts[0]), _number(parts[1])
        if low is not None and high is not None and low <= value <= high:
            return f"{before}[{parts[0]},{parts[1]}]"
    if all(p.isdigit() for p in parts):
        return f"{before} {_LABEL_END}"  # where the label ends: the numbers after it are cells
    return match.group(0)


def numeric_tail(line: str) -> tuple[str, list[str]]:
    """(label, cells): the line's trailing numeric cells and the text before them."""
    line = _SPREAD.sub(r"\1(±", _PLUS_MINUS.sub("±", line.strip()))
    line = _INTERVAL.sub(r"\1(\2,\3)", line)
    line = _BRACKETED.sub(_bracketed, line)
    line = _POWER_OF_TEN.sub(r"\1×10^\2\3", line)
    line = _MAGNITUDE.sub("\\1\u2060\\2", line)
    line = _UNIT.sub("\\1\u2060\\2", line)
    tokens = line.split()
    k = len(tokens)
    while k > 0 and _is_numeric(tokens[k - 1]):
        k -= 1
    if 0 < k < len(tokens) and _qualifies_label(tokens[k - 1], tokens[k]):
        k += 1
    return " ".join(t for t in tokens[:k] if t != _LABEL_END), tokens[k:]


def _qualifies_label(word: str, token: str) -> bool:
    """ "Llama (13B)": a size in parentheses after a word of the label is the label's (a cell in
    parentheses holds digits alone: "(12.3)")."""
    return (
        token.startswith("(")
        and token.endswith(")")
        and any(ch.isalpha() for ch in token)
        and not _is_numeric(word)
        and any(ch.isalpha() for ch in word)
    )


def _row_shape(line: str) -> int:
    """How many numeric cells a line ends with, when it reads as a table row (0 when not)."""
    label, cells = numeric_tail(line)
    if len(cells) < 2 or all(c in _EMPTY_CELLS for c in cells):
        return 0
    if len(label) > MAX_LABEL_CHARS or len(label.split()) > MAX_LABEL_WORDS or _SENTENCE_END.search(label):
        return 0
    return len(cells)


MIN_SINGLE_VALUE_ROWS = 4


def _single_value_row(line: str) -> bool:
    """A line of a label and one value ("Transformer (big) 192")."""
    label, cells = numeric_tail(line)
    return (
        len(cells) == 1
        and cells[0] not in _EMPTY_CELLS
        and bool(re.search(r"[^\W\d_]", label))
        and len(label) <= MAX_LABEL_CHARS
        and len(label.split()) <= MAX_LABEL_WORDS
        and not _SENTENCE_END.search(label)
    )


def _with_single_value_rows(shapes: list[int], lines: Sequence[str], typical: float) -> list[int]:
    """`shapes` with runs of lines of one value a row (width 1) added, where such a run has a
    "Table N" caption right after it: lines ending in one number are a table only then."""
    singles = [0 if shape else int(_single_value_row(ln)) for shape, ln in zip(shapes, lines, strict=True)]
    out = list(shapes)
    for start, end in _runs(singles, lines, typical):
        rows = sum(singles[start:end])
        captioned = any(_CAPTION.match(ln) for ln in lines[end : end + 2])
        if rows >= MIN_SINGLE_VALUE_ROWS and captioned and not any(shapes[start:end]):
            out[start:end] = singles[start:end]
    return out


def _typical(lines: Sequence[str]) -> float:
    lengths = [len(ln.strip()) for ln in lines if len(ln.strip()) > 20]
    return statistics.median(lengths) if lengths else 80.0


def _is_prose(line: str, typical: float) -> bool:
    """A line of running text: long and made of sentences' small words, or ending one (a
    long header line is a row of names: "Params Tensor Pipeline Data Number Batch ...")."""
    s = line.strip()
    if len(s) > 40 and _SENTENCE_END.search(s):
        return True
    if len(s) <= max(60.0, 0.7 * typical):
        return False
    words = s.lower().split()
    return sum(w in _STOPWORDS for w in words) >= 0.12 * len(words)


def _runs(shapes: Sequence[int], lines: Sequence[str], typical: float) -> list[tuple[int, int]]:
    """[start, end) runs of row lines; up to two short non-numeric lines inside a run (a row
    label wrapped onto its own line, a group of rows' name) stay in it."""
    runs: list[tuple[int, int]] = []
    i, n = 0, len(lines)
    while i < n:
        if not shapes[i]:
            i += 1
            continue
        start, end, rows = i, i + 1, 1
        j = i + 1
        while j < n:
            if shapes[j]:
                end, rows, j = j + 1, rows + 1, j + 1
                continue
            gap = j
            while gap < n and gap - j < 2 and not shapes[gap] and _fragment(lines[gap], typical):
                gap += 1
            if gap < n and gap > j and shapes[gap]:
                j = gap
                continue
            break
        if rows >= 2:
            runs.append((start, end))
        i = end
    return runs


def _fragment(line: str, typical: float) -> bool:
    s = line.strip()
    return bool(s) and not _CAPTION.match(s) and not _is_prose(s, typical) and len(s) <= 40


def _names(text: str) -> list[str]:
    """A header line's names: words, a unit in parentheses kept with the name before it
    ("TDP (W)"), citations dropped."""
    names: list[str] = []
    for word in _words(text):
        if names and (word.startswith("(") and word.endswith(")") and not names[-1].endswith(")") or names[-1] == "#"):
            names[-1] = f"{names[-1]} {word}"  # "TDP (W)", "# Requests"
        else:
            names.append(word)
    return names


def _joined_names(text: str) -> list[str]:
    """A second reading of a header line's names, for when one name a word gives no fit: a
    sign joins the name before it ("PyTorch % ∆"), and so does a word all in lower case ("TPU
    v6e", "Max batch size"; not "vLLM"), since names start with a capital or a digit."""
    names: list[str] = []
    for word in _names(text):
        sign = not any(ch.isalnum() for ch in word)
        if names and (sign or word.islower()):
            names[-1] = f"{names[-1]} {word}"
        else:
            names.append(word)
    return names


def _words(text: str) -> list[str]:
    return _PLUS_MINUS.sub("±", _CITATION.sub(" ", text).replace("|", " ")).split()


# Words a column name is never made of alone: a "header" holding them is a prose fragment.
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "were",
        "with",
    }
)


MAX_NAME_CHARS = 40


def _plausible(names: Sequence[str]) -> bool:
    """Column names, not a row of numbers, a figure's axis or a piece of a sentence."""

    # A one-letter name ("L", "d": a model's layers and width) is a column's only beside
    # names of words; a header of letters alone is a figure's axis.
    worded = sum(len(n) > 1 and not _is_numeric(n) for n in names) >= 2

    def name(n: str) -> bool:
        words = n.split()
        letter = worded and len(n) == 1 and n.isalpha()
        return (
            bool(words)
            and len(n) <= MAX_NAME_CHARS
            and (letter or not all(_is_numeric(w) or len(w) == 1 for w in words))
            and n.lower() not in _STOPWORDS
            and not re.search(r"[:;,]($|\s)", n)
            and not _GLUED.match(n)
        )

    return all(name(n) for n in names)


def _columns(header: Sequence[str], width: int, labelled: bool = True) -> tuple[str, tuple[str, ...]] | None:
    """(label header, column names) from header lines, or None when they do not give one
    name per cell column (`width`), with or without a name for the label column: one name a
    word first, then names of several words (`_joined_names`) as a last resort. Over rows
    without labels (`labelled` False) a reading naming a label column is no reading: its
    first name is a cell column's."""
    readings = (_word_columns, _numbered_columns, _first_then_group, _joined_columns)
    for read in readings:
        cols = read(header, width)
        if cols is not None and (labelled or not cols[0] or len(cols[1]) < width):
            return cols
    return None


def _first_then_group(header: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    """ "Year Electricity Generation Emission(Metric Ton)" over "NOx SO2 PM2.5 VOC", one name
    short: the upper line's first word names the first cell column (the years), which names
    the rows (their labels: one column fewer than `width`), the rest of it is the group over
    the names below."""
    if len(header) != 2:
        return None
    upper, lower = _names(header[0]), _names(header[1])
    # two names below at least: one alone may be a row label's first part ("BLOOMz" over "7B")
    if len(lower) != width - 1 or len(lower) < 2 or not 2 <= len(upper) <= 7 or not _plausible(upper + lower):
        return None
    if any(n.startswith("(") for n in lower):
        return None  # units under names ("(billion) Rate"): the lines stack one header, no group
    group = " ".join(upper[1:])
    return upper[0], tuple(f"{group}{GROUP_SEP}{n}" for n in lower)


def _increasing(tokens: Sequence[str]) -> bool:
    """ "2019 2020 2021", "4 8 16 32": whole numbers rising, as columns are numbered (a row of
    values seldom is)."""
    if len(tokens) < 2 or not all(t.isdigit() for t in tokens):
        return False
    values = [int(t) for t in tokens]
    return all(a < b for a, b in zip(values, values[1:], strict=False))


def _numbered_columns(header: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    """Columns named by a rising run of numbers: on the header's one line after the labels'
    name and before at most one more name ("Carbon Intensity 2019 2020 2021 YoY%"), or on its
    second line under a group name, after the labels' name and the other columns' names
    ("Model TP Max batch size" over "4 8 16 32 64"), or on its last line under a title."""
    if len(header) == 1:
        words = _words(header[0])
        for tail in (0, 1):
            run = words[len(words) - width : len(words) - tail]
            label = words[: len(words) - width]
            named = all(any(ch.isalpha() for ch in w) for w in label)
            if len(words) >= width and _increasing(run) and (not tail or not words[-1][0].isdigit()) and named:
                return " ".join(label), tuple(words[len(words) - width :])
        return None
    titled = _numbered_columns(header[-1:], width) if 2 <= len(header) <= 3 else None
    title = " ".join(header[:-1])
    if titled is not None and not titled[0] and any(w.lower() in _STOPWORDS for w in title.split()):
        # a title over the numbered columns ("The Climate Pledge by the Numbers"): their group
        return "", tuple(f"{title}{GROUP_SEP}{n}" for n in titled[1])
    if len(header) == 2 and _increasing(numbers := _words(header[1])) and len(numbers) < width:
        names = _joined_names(header[0])
        others = width - len(numbers)
        if len(names) == others + 2 and _plausible(names):
            group = names[-1]
            return names[0], (*names[1:-1], *(f"{group}{GROUP_SEP}{n}" for n in numbers))
    return None


def _joined_columns(header: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    """Names of several words, on the header's last line (over several, a word's line tells more
    than its case) when none starts with a word all in lower case (a header in lower case,
    "task mean std", gives no cue where a name starts) and each has a letter (not a value
    with its stars: "0.090 ∗∗∗"); a line above it with fewer names is their group
    ("Estimated cost (USD)" over "Models Hours Cloud compute Electricity")."""
    if not 1 <= len(header) <= 2:
        return None
    group = _names(header[0]) if len(header) == 2 else []
    if group and (len(group) >= width or not _plausible(group)):
        return None
    prefix = f"{' '.join(group)}{GROUP_SEP}" if group else ""
    names = _joined_names(header[-1])
    if not names or any(n.split()[0].islower() or not re.search(r"[^\W\d_]", n) for n in names):
        return None
    if not _plausible(names):
        return None
    if len(names) == width:
        return "", tuple(prefix + n for n in names)
    if len(names) == width + 1 and not any(ch.isdigit() for ch in names[0]):
        return names[0], tuple(prefix + n for n in names[1:])
    return None


def _word_columns(header: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    if not header:
        return None

    def fit(names: list[str], group: str = "") -> tuple[str, tuple[str, ...]] | None:
        prefix = f"{group}{GROUP_SEP}" if group else ""
        if not _plausible(names) or any(n.startswith("(") and n.endswith(")") for n in names):
            return None  # (a unit alone is the second half of a name, not a column's name)
        if len(names) == width:
            return "", tuple(prefix + n for n in names)
        # One name more than cells names the row labels first ("Model", "Metric"); a first
        # name with a digit ("H100 H20 TPU v6e") is a column's, and the extra name is a
        # split one: no guess.
        if len(names) == width + 1 and not any(ch.isdigit() for ch in names[0]):
            return names[0], tuple(prefix + n for n in names[1:])
        return None

    per_line = [_names(h) for h in header]
    header_text = " ".join(header)
    whole = fit(_names(header_text)) or fit(_words(header_text))
    if whole is not None:
        return whole
    per_line = [_words(h) for h in header]
    if 2 <= len(header) <= 3 and all(len(names) in (width, width + 1) for names in per_line):
        # one name per column on each header line ("Energy" over "(kWh)"); a line with one
        # more names the row labels first ("Model BERT 6B ..." over "finetune Transf. ...")
        labels = [names[0] for names in per_line if len(names) == width + 1]
        stacked = [names[len(names) - width :] for names in per_line]
        joined = [" ".join(parts) for parts in zip(*stacked, strict=True)]
        units_above = any(n.startswith("(") for names in stacked[:-1] for n in names)
        # "Params Learning ..." (N+1) over "(billion) Rate ..." (N): the unit may be the labels'
        units_above |= bool(labels) and any(len(names) == width and names[0].startswith("(") for names in per_line)
        if len(labels) <= 1 and not units_above and _plausible(joined) and _plausible(labels):
            return (labels[0] if labels else ""), tuple(joined)
    if len(header) > 3:
        return _stacked_columns([" ".join(names) for names in per_line if names], width)
    last = _names(header[-1])
    group_names = [n for names in per_line[:-1] for n in names]
    # Upper lines are a group over every value column ("inference energy (kWh)" over "task
    # mean std") only when they cannot be one name per column themselves, and read as a name.
    if group_names and (len(group_names) >= width and len(last) != width + 1 or not _plausible(group_names)):
        return None
    if len(group_names) > 6:
        return None
    repeated = _repeated_groups(last, group_names, width)
    if repeated is not None:
        return repeated if repeated is not _NO_READING and _plausible(list(repeated[1])) else None
    return fit(last, " ".join(group_names))


def _repeated_groups(last: Sequence[str], group_names: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    """Names repeated along the last header line ("Energy (Wh) Accuracy Energy (Wh) Accuracy")
    under one group word each ("news yelp", maybe after a title: "Dataset news yelp"); None
    when the names do not repeat, `_NO_READING` when the group words do not match the repeats
    (one group over all of them would be wrong)."""
    label = last[0] if len(last) == width + 1 else ""
    names = list(last[1:] if label else last)
    if len(names) != width:
        return None
    period = next((m for m in range(1, width // 2 + 1) if width % m == 0 and names == names[:m] * (width // m)), 0)
    if not period:
        return None
    k = width // period
    if len(group_names) not in (k, k + 1):
        return _NO_READING
    title = f"{group_names[0]} " if len(group_names) == k + 1 else ""
    groups = group_names[len(group_names) - k :]
    return label, tuple(f"{title}{g}{GROUP_SEP}{n}" for g in groups for n in names[:period])


def _boundary_score(before: str, after: str) -> int:
    """How well a column boundary fits between two stacked header pieces: after a unit in
    parentheses, before a capitalised word or "#", never before a lowercase word or "("."""
    if after[:1].islower() or after.startswith("("):
        return -100
    score = 2 if before.endswith(")") else 0
    if after.startswith("#"):
        score += 2
    elif after[:1].isupper():
        score += 1
    return score


def _stacked_columns(pieces: Sequence[str], width: int) -> tuple[str, tuple[str, ...]] | None:
    """A header printed one or two words a line, column after column ("GPU" / "Power" /
    "Usage" / "(kWh)"): the pieces cut into exactly `width` (+1 for the label column) names
    at the best-fitting boundaries; None unless every boundary fits (score > 0)."""
    if any(len(p.split()) > 3 or re.search(r"\)\s+\S", p) for p in pieces):
        return None  # a piece holding a boundary ("(A100) Unon-GPU total"): the cuts cannot tell
    for groups in (width + 1, width):
        if len(pieces) < groups:
            continue
        cut = _best_cuts(pieces, groups)
        if cut is _TIE and _boundary_score(pieces[0], pieces[1]) > 0:
            # the first piece may name the row labels ("Region" / "Average" / "Packaging"),
            # but which of the others start names is a guess: so is reading it with no label
            return None
        if cut is None or cut is _TIE:
            continue
        names = [" ".join(pieces[a:b]) for a, b in zip([0, *cut], [*cut, len(pieces)], strict=True)]
        if groups == width + 1:
            return names[0], tuple(names[1:])
        return "", tuple(names)
    return None


_NO_READING: tuple[str, tuple[str, ...]] = ("", ())  # repeated names the group words do not fit
_TIE: list[int] = []  # _best_cuts: cuts were possible, but two sets scored best


def _best_cuts(pieces: Sequence[str], groups: int) -> list[int] | None:
    """The `groups - 1` cut positions with the highest total score, each scoring above 0 and
    the best unique (None: no such cuts; `_TIE`: a tie, a guess)."""
    n = len(pieces)
    scores = [_boundary_score(pieces[i - 1], pieces[i]) for i in range(1, n)]  # cut before piece i
    # best[k][i]: (score, ties) of k cuts among the first i pieces, the last cut before piece i
    best: dict[tuple[int, int], tuple[int, int, list[int]]] = {}
    for i in range(1, n):
        if scores[i - 1] > 0:
            best[(1, i)] = (scores[i - 1], 1, [i])
    for k in range(2, groups):
        for i in range(k, n):
            if scores[i - 1] <= 0:
                continue
            options = [best[(k - 1, j)] for j in range(k - 1, i) if (k - 1, j) in best]
            if not options:
                continue
            top = max(o[0] for o in options)
            winners = [o for o in options if o[0] == top]
            ties = sum(o[1] for o in winners)
            best[(k, i)] = (top + scores[i - 1], ties, [*winners[0][2], i])
    finals = [v for (k, _i), v in best.items() if k == groups - 1]
    if not finals:
        return None
    top = max(v[0] for v in finals)
    winners = [v for v in finals if v[0] == top]
    if len(winners) > 1 or winners[0][1] > 1:
        return _TIE
    return winners[0][2]


def _header_above(lines: Sequence[str], start: int, floor: int, typical: float) -> list[int]:
    """Indexes of the header lines right above a run (stopping at prose, a caption, a row)."""
    out: list[int] = []
    i = start - 1
    while i >= floor and len(out) < MAX_HEADER_LINES:
        s = lines[i].strip()
        if not s or _CAPTION.match(s) or _HEADING.match(s) or _NOT_HEADER.search(s) or _is_prose(s, typical):
            break
        if _row_shape(s) or _clauses(s) or _SENTENCE_INSIDE.search(s):
            break
        before = lines[i - 1].strip() if i > 0 else ""
        if _ends_sentence(s) and len(before) > 0.6 * typical and not _SENTENCE_END.search(before):
            break  # the end of a long line's sentence wrapped onto its own line ("small."), not a header
        out.append(i)
        i -= 1
    return sorted(out)


def _clauses(line: str) -> bool:
    """A line of clauses ("yelp datasets, Capella system, single node, ..."): two commas or
    more outside parentheses, which a header's names do not have ("WUE (on-site, L/kWh)")."""
    return re.sub(r"\([^()]*\)", "", line).count(", ") >= 2


def _ends_sentence(line: str) -> bool:
    """A line ending a sentence, not a row of names ending in an abbreviation ("... Coal Nuc.")."""
    if not _SENTENCE_END.search(line):
        return False
    words = line.split()
    names = len(words) >= 2 and not any(w.lower() in _STOPWORDS for w in words)
    return not (names and _ABBREVIATION_END.search(line))


def _header_below(lines: Sequence[str], end: int, ceiling: int, typical: float) -> list[int]:
    out: list[int] = []
    i = end
    while i < ceiling and len(out) < 3:
        s = lines[i].strip()
        if not s or _CAPTION.match(s) or _HEADING.match(s) or _NOT_HEADER.search(s) or _is_prose(s, typical):
            break
        if _row_shape(s):
            break
        out.append(i)
        i += 1
    lower_words = sum(w[:1].islower() for w in lines[out[-1]].split()) if out else 0
    if lower_words >= 2 and i < ceiling and lines[i].strip()[:1].islower():
        return []  # words in lower case going on on the next line: a sentence's first line
    return out


def _caption_span(lines: Sequence[str], at: int, typical: float, stop: int) -> tuple[int, int]:
    """[at, end) of a caption: its first line and the lines continuing its sentence."""
    end = at + 1
    text = lines[at].strip()
    while end < stop and not _SENTENCE_END.search(text) and len(lines[end].strip()) > 0.6 * typical:
        text = lines[end].strip()
        end += 1
    return at, end


# "4·V100", "8x A100": a count of a device, a text cell that has its digit
_CODE_CELL = re.compile(r"^\d+\s*[·x×]\s*[A-Za-z]\S*$")


def _code_row(line: str, width: int) -> tuple[str, list[str]] | None:
    """(label, cells) of a row whose `width` cells are counts of devices ("GPU 4·V100 8·V100"),
    which no numeric tail finds; None for any other line."""
    tokens = line.split()
    label, cells = tokens[: len(tokens) - width], tokens[len(tokens) - width :]
    if not label or len(cells) != width or len(label) > MAX_LABEL_WORDS:
        return None
    if any(ch.isdigit() for ch in " ".join(label)) or not all(_CODE_CELL.match(c) or _is_numeric(c) for c in cells):
        return None
    return (" ".join(label), cells) if any(_CODE_CELL.match(c) for c in cells) else None


def _rows(lines: Sequence[str], start: int, end: int, width: int, pending: list[str]) -> list[TableRow] | None:
    """The run's rows, each with `width` cells; None when a row has fewer (not aligned).
    `pending`: the first row's label, begun on the lines above it."""
    rows: list[TableRow] = []
    pending = list(pending)
    for line in lines[start:end]:
        label, cells = _code_row(line, width) or numeric_tail(line)
        if len(cells) < min(2, width):
            if sum(_is_numeric(t) for t in numeric_tail(label)[0].split() + cells) >= 2:
                return None  # values ending in a word ("700 W 400 W unlisted"), not a label
            pending.append(line.strip())  # a wrapped label, or the name of the rows below
            continue
        if len(cells) < width:
            return None
        if len(cells) > width:  # numbers inside a label ("Llama 3.2 1B 0.03 0.2")
            label = " ".join([label, *cells[: len(cells) - width]]).strip()
            cells = cells[len(cells) - width :]
            if len(label.split()) > 1 and not any(ch.isalpha() for ch in label):
                return None  # a label of numbers: a row too wide (a chart's axis), not a year
        label = " ".join([*pending, label]).strip()
        pending = []
        if _clauses(label) and label[:1].islower():
            return None  # "memory, network interface, fans, ...": a sentence's end, not a label
        if not label and rows and rows[0].label:
            label = rows[-1].label  # a row under a spanning label ("Llama 3.2 1B" over three rates)
        cells = [c.replace("\u2060", " ") for c in cells]
        rows.append(TableRow(label=label, cells=tuple("" if c in _EMPTY_CELLS else c for c in cells)))
    return rows


def split_tables(lines: Sequence[str], page: int | None = None) -> list[TextTable]:
    """The tables in a page's lines, in order, each with the lines it takes (its caption
    and header lines included)."""
    typical = _typical(lines)
    shapes = _with_single_value_rows([_row_shape(ln) for ln in lines], lines, typical)
    found: list[TextTable] = []
    floor = 0
    runs = _runs(shapes, lines, typical)
    for k, (start, end) in enumerate(runs):
        ceiling = runs[k + 1][0] if k + 1 < len(runs) else len(lines)
        numbered = _numbered_line(lines, start, end)
        if numbered:
            start += 1  # "4 8 16 32 64" over rows with labels: the header's last line
        width = statistics.mode(s for s in shapes[start:end] if s)
        while start > floor and not numbered and _code_row(lines[start - 1], width):
            start -= 1  # a row of device counts right above the rows ("GPU 4·V100 8·V100")
        above = _header_above(lines, start - numbered, floor, typical) + ([start - 1] if numbered else [])
        labelled = any(numeric_tail(ln)[0] for ln in lines[start:end])
        cols = None
        label_lines: list[str] = []
        # the lines just above the rows: the header, or (a short header) a row label's first part
        # (a one-name header is too little to tell a label's first part from a name)
        for drop in range(min(2, len(above)) + 1 if len(above) <= 4 and width > 1 else 1):
            kept = above[: len(above) - drop]
            if any(len(lines[i].split()) > 3 or len(lines[i].strip()) > 25 for i in above[len(kept) :]):
                break  # not the first part of a row's label
            cols = _columns([lines[i] for i in kept], width, labelled)
            if cols is not None:
                label_lines = [lines[i].strip() for i in above[len(kept) :]]
                above = kept + above[len(kept) :]
                break
        below: list[int] = []
        if cols is None:
            below = _header_below(lines, end, ceiling, typical)
            cols = _columns([lines[i] for i in below], width, labelled) if below else None
            if cols is None:
                below = []
        t_start = above[0] if above else start
        t_end = below[-1] + 1 if below else end
        after_next = runs[k + 1][1] if k + 1 < len(runs) else None
        cap = _find_caption(lines, t_start, t_end, floor, ceiling, typical, after_next)
        if cap is not None:
            t_start, t_end = min(t_start, cap[0]), max(t_end, cap[1])
        caption = " ".join(ln.strip() for ln in lines[cap[0] : cap[1]]) if cap else ""
        # a reading may take the first cell column for the labels ("Year"): one column fewer
        rows = _rows(lines, start, end, len(cols[1]), label_lines) if cols is not None else None
        if cols is not None and cols[0] and rows and not any(r.label for r in rows):
            rows = None  # a name for row labels that no row has: the first name is a column's
        if below and rows and not any(re.search(r"[^\W\d_]", r.label) for r in rows):
            rows = None  # names below rows of bare numbers: a chart's legend under its values
        if cols is None and not caption and len(rows or []) < 3 and end - start < 3:
            continue  # two number lines with no caption and no header: not evidence of a table
        record = None
        if cols is not None and rows:
            record = TableRecord(
                label=caption_label(caption),
                caption=caption,
                label_header=cols[0],
                columns=cols[1],
                rows=tuple(rows),
                page=page,
            )
        found.append(TextTable(t_start, t_end, record, caption, tuple(lines[t_start:t_end])))
        floor = t_end
    return found


def _numbered_line(lines: Sequence[str], start: int, end: int) -> bool:
    """The run's first line is rising numbers with no label, and the rows after it have labels:
    it numbers the columns ("4 8 16 32 64")."""
    label, cells = numeric_tail(lines[start])
    following = [numeric_tail(ln)[0] for ln in lines[start + 1 : end]]
    return not label and _increasing(cells) and len(following) >= 2 and all(following)


def _find_caption(
    lines: Sequence[str],
    start: int,
    end: int,
    floor: int,
    ceiling: int,
    typical: float,
    after_next: int | None = None,
) -> tuple[int, int] | None:
    """The nearest "Table N" caption: just above the table (no prose between), or else right
    after it, unless that one opens the next table (header lines follow it, then its rows,
    and no caption follows those rows; `after_next`: where the next table's rows end)."""
    for i in range(start - 1, max(floor, start - MAX_CAPTION_DISTANCE) - 1, -1):
        if _CAPTION.match(lines[i]):
            span = _caption_span(lines, i, typical, start)
            if all(not _is_prose(ln, typical) for ln in lines[span[1] : start]):
                return span
            break
    for i in range(end, min(ceiling, end + 4)):
        if _CAPTION.match(lines[i]):
            span = _caption_span(lines, i, typical, ceiling)
            after = lines[span[1] : ceiling]
            if (
                ceiling < len(lines)
                and len(after) <= MAX_HEADER_LINES
                and not any(_is_prose(ln, typical) for ln in after)
                and not (
                    after_next is not None and any(_CAPTION.match(ln) for ln in lines[after_next : after_next + 4])
                )
            ):
                return None  # the next table's caption, above its header
            return span
        if _is_prose(lines[i], typical):
            break
    return None
