"""Screenshots of the built documentation site in headless Chromium: the home page, the
tutorial and the configuration reference, into docs/images/ (where the site shows them).

    make docs && python bench/docs_screenshots.py [--site site] [--out docs/images]

The site is served from its folder over HTTP on 127.0.0.1 (as `mkdocs serve` would), and
every request the pages make is checked to stay on that server: the theme's fonts and
scripts are local (`theme.font: false`), so the site reads offline.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from browser import chromium, chromium_missing  # noqa: E402

PAGES = {
    "docs_home.png": "",
    "docs_tutorial.png": "tutorial/",
    "docs_config_reference.png": "reference/config/",
    "docs_http_api.png": "reference/http-api/",
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (default: site/)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="default: docs/images/")
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        print(f"skipped: {missing}")
        return 1
    if not (args.site / "index.html").is_file():
        print(f"no built site in {args.site}: run `make docs` first")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with serving(args.site) as base, chromium() as driver:
        for name, path in PAGES.items():
            started = time.perf_counter()
            driver.get(base + path)  # type: ignore[attr-defined]
            time.sleep(0.5)  # the theme's script lays out the navigation after load
            title = driver.title  # type: ignore[attr-defined]
            requests = driver.execute_script(  # type: ignore[attr-defined]
                "return performance.getEntriesByType('resource').map(e => e.name)"
            )
            outside = [r for r in requests if not r.startswith(base)]
            driver.save_screenshot(str(args.out / name))  # type: ignore[attr-defined]
            print(
                f"{name}: {base + path} '{title}', {len(requests)} requests, "
                f"{len(outside)} outside the site, {time.perf_counter() - started:.2f} s"
            )
            if outside:
                print("  outside:", *outside, sep="\n    ")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
