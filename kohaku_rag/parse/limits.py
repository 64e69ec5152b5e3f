"""Limits on what one untrusted input may cost: past them a document fails with a clear
reason (or, for a figure, the figure alone is skipped) instead of exhausting memory.

They are generous for real papers and reports (the WattBot PDFs have under 100 pages,
under 500k characters and figures under 4 megapixels) and stop crafted or broken files:
a small PDF declaring a 20,000-inch page, a 10 GB text dump, JSON nested 200,000 deep.
"""

from __future__ import annotations

# Rendered pixels of one figure region (width x height at the render dpi); a 16 MP RGB
# render is 48 MB in memory, well under PIL's decompression-bomb limit (179 MP).
MAX_FIGURE_PIXELS = 16_000_000
MAX_PAGES = 5_000
# Characters of text in one document (PDF text layer, Markdown, text, JSON payload).
MAX_TEXT_CHARS = 20_000_000
# Bytes of a text or JSON file read whole into memory.
MAX_FILE_BYTES = 100 * 1024 * 1024
# Rows of one table kept at indexing: each row is a sentence node, embedded and searched, so
# a 10,000-row table cost 333 s and 1 GB to index. Real papers' tables have under a few
# hundred rows; past the cap the first rows are kept and a line says how many were cut.
MAX_TABLE_ROWS = 1_000
