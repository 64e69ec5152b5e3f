"""Heading precision and recall of the PDF parser, per layout, with and without outlines.

    .venv/bin/python bench/indexing/parse_headings.py [--baseline-src DIR]

PDFs: the layout zoo (kohaku_rag.samples.layout_zoo: Springer-, IEEE- and report-like) and
the three real PDFs in ../shared/pdfs. Each is parsed as it is (outline kept, where it has
one) and with its outline stripped (layout alone). Truth: the zoo's printed headings; for
the real papers their outline entries (attention, slides) or the paper's printed section
headings (resnet, which has no outline). Precision counts the sections after the first
(the front matter) that are true headings; for the slide deck every slide is a section, so
only recall is meaningful. `--baseline-src` parses the same files with another checkout
(e.g. a worktree of an older commit) in a subprocess, for before/after in one run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pymupdf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kohaku_rag.samples.layout_zoo import write_zoo  # noqa: E402

SHARED = REPO.parent / "shared" / "pdfs"
RESNET_HEADINGS = [
    "1. Introduction", "2. Related Work", "3. Deep Residual Learning", "3.1. Residual Learning",
    "3.2. Identity Mapping by Shortcuts", "3.3. Network Architectures", "3.4. Implementation", "4. Experiments",
    "4.1. ImageNet Classification", "4.2. CIFAR-10 and Analysis", "4.3. Object Detection on PASCAL and MS COCO",
    "References", "A. Object Detection Baselines", "B. Object Detection Improvements", "C. ImageNet Localization",
]  # fmt: skip

PARSE = """
import json, sys, time
from kohaku_rag.parse.pdf import parse_pdf
out = {}
for path in sys.argv[1:]:
    t0 = time.perf_counter()
    doc = parse_pdf(path, "d")
    out[path] = {"titles": [s.title for s in doc.sections], "seconds": time.perf_counter() - t0,
                 "pages": int(doc.metadata.get("pages", "1"))}
print(json.dumps(out))
"""


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def stripped(path: Path, folder: Path) -> Path:
    doc = pymupdf.open(path)
    doc.set_toc([])
    out = folder / f"{path.stem}_no_outline.pdf"
    doc.save(out)
    return out


def cases(folder: Path) -> list[tuple[str, Path, list[str], bool]]:
    """(name, pdf, true headings, whether precision means anything)."""
    out = []
    for name, (path, headings) in write_zoo(folder, outline=True).items():
        truth = [h.text for h in headings]
        out.append((f"zoo {name}, outline", path, truth, True))
        out.append((f"zoo {name}, no outline", stripped(path, folder), truth, True))
    attention = SHARED / "vaswani2017_attention_1706.03762.pdf"
    slides = SHARED / "wattbot2025_attentionplease_slides.pdf"
    for path, label, precise in ((attention, "attention (LaTeX)", True), (slides, "slides", False)):
        truth = [str(e[1]) for e in pymupdf.open(path).get_toc(simple=True)]
        out.append((f"{label}, outline", path, truth, precise))
        out.append((f"{label}, no outline", stripped(path, folder), truth, precise))
    out.append(("resnet (LaTeX), no outline", SHARED / "he2015_resnet_1512.03385.pdf", RESNET_HEADINGS, True))
    return out


def parse_all(paths: list[Path], src: Path) -> dict[str, dict[str, object]]:
    env = {"PYTHONPATH": str(src)}
    # cwd too: `python -c` puts the working folder first on the import path
    res = subprocess.run([sys.executable, "-c", PARSE, *map(str, paths)], capture_output=True, text=True, cwd=src,
                         env=env, check=True)  # fmt: skip
    return json.loads(res.stdout)


def score(titles: list[str], truth: list[str]) -> tuple[float, float]:
    found = {norm(t) for t in titles}
    wanted = [norm(h) for h in truth]
    recall = sum(w in found for w in wanted) / len(wanted)
    body = [norm(t) for t in titles[1:]]
    precision = sum(t in set(wanted) for t in body) / len(body) if body else 0.0
    return precision, recall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", type=Path, default=None, help="another checkout to compare against")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(Path(tmp))
        paths = [c[1] for c in todo]
        runs = {"now": parse_all(paths, REPO)}
        if args.baseline_src:
            runs["before"] = parse_all(paths, args.baseline_src)
        names = list(runs)
        head = " | ".join(f"{n} P | {n} R" for n in names)
        print(f"| PDF | true headings | {head} |")
        print("|---|---:|" + "---:|" * (2 * len(names)))
        totals = {n: [0, 0] for n in names}
        secs = {n: [0.0, 0] for n in names}
        for name, path, truth, precise in todo:
            cells = []
            for n in names:
                r = runs[n][str(path)]
                p, rec = score(r["titles"], truth)  # type: ignore[arg-type]
                totals[n][0] += round(rec * len(truth))
                totals[n][1] += len(truth)
                secs[n][0] += float(r["seconds"])  # type: ignore[arg-type]
                secs[n][1] += int(r["pages"])  # type: ignore[call-overload]
                cells.append(f"{p:.2f}" if precise else "–")
                cells.append(f"{rec:.2f}")
            print(f"| {name} | {len(truth)} | {' | '.join(cells)} |")
        for n in names:
            found, total = totals[n]
            print(f"{n}: {found}/{total} true headings found ({found / total:.1%}); "
                  f"parse {1000 * secs[n][0] / secs[n][1]:.1f} ms/page")  # fmt: skip


if __name__ == "__main__":
    main()
