"""Every module of the two packages with its line count and the first line of its docstring:
the reference's module list and DESIGN.md's "Modules" block.

    python docs/gen/module_list.py --design    # rewrite DESIGN.md's block in place
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("kohaku_rag", "kohaku_assets")
WIDTH = 100  # characters of the summary kept in DESIGN.md


def modules() -> list[tuple[str, int, str]]:
    """(path, lines, first docstring paragraph) of every module, packages in order, paths sorted."""
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            doc = ast.get_docstring(ast.parse(text)) or ""
            first = " ".join(doc.strip().split("\n\n")[0].split())  # the first paragraph
            out.append((path.relative_to(REPO).as_posix(), len(text.splitlines()), first))
    return out


def design_block() -> str:
    lines = []
    for path, count, summary in modules():
        if len(summary) > WIDTH:
            summary = summary[: WIDTH - 1].rstrip() + "…"
        lines.append(f"{path:<44}{count:>5}  {summary}".rstrip())
    return "\n".join(lines) + "\n"


def rewrite_design(design: Path = REPO / "DESIGN.md") -> None:
    text = design.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("## Modules\n")) + len("```\n")
    end = text.index("```\n", start)
    design.write_text(text[:start] + design_block() + text[end:], encoding="utf-8")


def link_modules_block(design: str) -> str:
    """DESIGN.md for the site: its "Modules" code block (~23,000 characters, one line per
    module) replaced by a link to the reference's table of the same list, which reads on a
    page and a phone; the repository's DESIGN.md keeps the block for readers of the file."""
    start = design.index("```\n", design.index("## Modules\n"))
    end = design.index("```\n", start + 4) + len("```\n")
    link = "The list, one row per module: [Modules](../reference/modules.md).\n"
    return design[:start] + link + design[end:]


def page() -> str:
    bar = "\\|"
    rows = [f"| `{path}` | {count} | {summary.replace('|', bar)} |" for path, count, summary in modules()]
    return "\n".join(
        [
            "# Modules",
            "",
            "Every module of `kohaku_rag` (the method as a plain library, no Dagster import) and "
            "`kohaku_assets` (the Dagster layer and the CLI), with its size and what it holds: "
            "the first line of its docstring, read from the code when the site is built. No "
            "module is over 500 lines.",
            "",
            "| module | lines | what it holds |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--design"]:
        rewrite_design()
    else:
        sys.stdout.write(design_block())
