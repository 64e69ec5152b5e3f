"""Writes the generated pages into the site while `mkdocs build` runs (mkdocs-gen-files):
the reference from the code, and DESIGN.md as the design page. Nothing here is committed
as Markdown, so the pages cannot drift from what they describe."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cli_reference  # noqa: E402
import config_reference  # noqa: E402
import http_reference  # noqa: E402
import lake_reference  # noqa: E402
import module_list  # noqa: E402
import python_reference  # noqa: E402

PAGES = {
    "reference/cli.md": cli_reference.page,
    "reference/config.md": config_reference.page,
    "reference/http-api.md": http_reference.page,
    "reference/python-api.md": python_reference.page,
    "reference/lake.md": lake_reference.page,
    "reference/modules.md": module_list.page,
}

for name, render in PAGES.items():
    with mkdocs_gen_files.open(name, "w") as fh:
        fh.write(render())

# The HTTP reference links the OpenAPI description rather than pasting it in.
with mkdocs_gen_files.open("reference/" + http_reference.OPENAPI_FILE, "w") as fh:
    fh.write(http_reference.description_text())

design = (HERE.parents[1] / "DESIGN.md").read_text(encoding="utf-8")
with mkdocs_gen_files.open("explanation/design.md", "w") as fh:
    fh.write(module_list.link_modules_block(design))
