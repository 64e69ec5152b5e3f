"""The ask page in a headless Chromium, timed, with screenshots.

Starts `kohaku serve`'s app on 127.0.0.1 (a real uvicorn), opens the page, asks a question,
waits for the answer card, opens the first citation (the PDF page with the cited sentence
highlighted) and the expanders, and saves screenshots. Prints what a person waits for:
page load, first progress event, (bundled: the first model text on the page, the planner's queries,
and the first text of the answer's reply), answer, highlighted page.

    python bench/serving/serve_smoke.py                       # the serving test corpus, a fake model on 127.0.0.1
    flock /tmp/kohaku-llm.lock python bench/serving/serve_smoke.py --bundled   # the sample PDFs, the bundled LLM

Needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver; `make browser`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import kohaku_rag as kr  # noqa: E402
from kohaku_assets.cli import DEMO_QUESTION  # noqa: E402
from kohaku_rag.samples import write_sample_corpus  # noqa: E402
from kohaku_rag.serving.app import build_app  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402
from tests.support.asgi_server import serving  # noqa: E402
from tests.support.browser import chromium, chromium_missing  # noqa: E402
from tests.support.qa_server import QAServer  # noqa: E402
from tests.support.serving_corpus import WATER_QUESTION, write_config, write_serving_corpus  # noqa: E402


@contextlib.contextmanager
def fake_lake(work: Path) -> Iterator[tuple[Path, str, str, str]]:
    lake = work / "lake"
    kr.index(write_serving_corpus(work / "corpus"), lake, progress=lambda _m: None)
    with QAServer() as qa:
        write_config(lake, "fake", qa.base_url)
        yield lake, "fake", WATER_QUESTION, "L/kWh"


@contextlib.contextmanager
def bundled_lake(work: Path) -> Iterator[tuple[Path, str, str, str]]:
    lake = work / "lake"
    kr.index(write_sample_corpus(work / "corpus")[0].parent, lake, progress=lambda _m: None)
    question, unit = DEMO_QUESTION
    yield lake, "default", question, unit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundled", action="store_true", help="the sample PDFs answered by the bundled LLM")
    parser.add_argument(
        "--out", default=str(ROOT / "docs" / "images"), help="folder of the screenshots (default: docs/images/)"
    )
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    if (why := chromium_missing()) is not None:
        raise SystemExit(why)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work or tempfile.mkdtemp(prefix="kohaku-serve-smoke-"))
    timings: dict[str, float] = {}
    source = bundled_lake(work) if args.bundled else fake_lake(work)
    with source as (lake, config, question, unit):
        app = build_app(ServeSettings(lake=lake, config=config))
        with serving(app) as url, chromium() as driver:
            wait = WebDriverWait(driver, 600)
            t0 = time.perf_counter()
            driver.get(url + "/")
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
            timings["page_load_s"] = time.perf_counter() - t0
            driver.find_element(By.ID, "question").send_keys(question)
            driver.find_element(By.ID, "unit").send_keys(unit)
            t0 = time.perf_counter()
            driver.find_element(By.ID, "ask").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#progress li.now, #progress li.past"))
            timings["first_progress_s"] = time.perf_counter() - t0
            if args.bundled:  # the bundled model streams its reply: the page shows it as it is written
                wait.until(lambda d: d.find_element(By.ID, "live-reply").text.strip() != "")
                timings["first_reply_text_s"] = time.perf_counter() - t0  # the planner's queries
                answering = "#progress li.now[data-stage=answering]"
                wait.until(
                    lambda d: d.find_elements(By.CSS_SELECTOR, answering) and d.find_element(By.ID, "live-reply").text
                )
                timings["first_answer_text_s"] = time.perf_counter() - t0
                wait.until(lambda d: len(d.find_element(By.ID, "live-reply").text) > 80)
                driver.save_screenshot(str(out / "serve_live_reply.png"))
            wait.until(ec.visibility_of_element_located((By.ID, "answer")))
            timings["answer_s"] = time.perf_counter() - t0
            driver.save_screenshot(str(out / "serve_answer.png"))
            chips = driver.find_elements(By.CSS_SELECTOR, "#chips .chip")
            if chips:
                t0 = time.perf_counter()
                chips[0].click()
                wait.until(lambda d: d.execute_script("return document.getElementById('page').naturalWidth") > 0)
                timings["highlighted_page_s"] = time.perf_counter() - t0
            # the whole page, top to bottom, in one image
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1280, min(2400, height + 140))
            driver.execute_script("window.scrollTo(0, 0)")
            time.sleep(0.3)
            driver.save_screenshot(str(out / "serve_ask_page.png"))
            answer = driver.find_element(By.ID, "value").text
    print(json.dumps({"answer": answer, "config": config, **{k: round(v, 3) for k, v in timings.items()}}))
    shots = ["serve_answer.png", "serve_ask_page.png", *(["serve_live_reply.png"] if args.bundled else [])]
    print("screenshots: " + ", ".join(str(out / name) for name in shots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
