"""/healthz says what search would meet, and a failure of the lake under a running server
is a 503 that says what to do: the index checked at start and on a schedule against its
checksums, a manifest deleted, vectors garbled, a full disk, a damaged served store, a
config whose URL carries credentials beside an API key."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import httpx
import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.served_store import store_path
from tests.support.asgi_server import serving
from tests.support.lake_damage import rewrite_vectors_in_place
from tests.support.serving_corpus import WATER_QUESTION
from tests.support.small_disk import fill_disk, small_disk_at


def _wait_for(check, seconds: float = 30.0):
    """The first truthy value of `check()`, asked until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not seen within {seconds} s")


def _ask(url: str) -> httpx.Response:
    return httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=60)


def _search(url: str) -> httpx.Response:
    return httpx.post(f"{url}/api/search", json={"question": WATER_QUESTION}, timeout=60)


def test_healthz_is_503_with_the_manifest_deleted_as_search_and_ask_are(app, lake) -> None:
    """Guards: with the manifest deleted under a running server, /healthz, search and ask
    all answer 503 saying there is no index and what to run, never the lake's path."""
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        Lake(lake).manifest_path.unlink()
        health, search, ask = httpx.get(f"{url}/healthz"), _search(url), _ask(url)
    for r in (health, search, ask):
        assert r.status_code == 503, r.text
        assert "no index" in r.text and "kohaku index" in r.text and str(lake) not in r.text


def test_healthz_is_503_with_the_vectors_garbled_as_search_is(app, lake) -> None:
    """Guards: the live vector store overwritten with random bytes (same size) makes
    /healthz answer 503 naming the file, as search does."""
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        live = Lake(lake).vectors_path
        live.write_bytes(os.urandom(live.stat().st_size))
        health, search = httpx.get(f"{url}/healthz"), _search(url)
    assert health.status_code == 503 and live.name in health.json()["error"], health.text
    assert search.status_code == 503 and live.name in search.text
    assert str(lake) not in health.text + search.text


def test_the_server_reads_the_index_checksums_on_a_schedule(lake, settings) -> None:
    """Guards: vectors rewritten in place under a running server (size and mtime kept) are
    found by its scheduled check: /healthz, search and ask then answer 503 naming the
    checksum and `kohaku index`."""
    app = build_app(dataclasses.replace(settings, verify_every=0.2))
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert _search(url).status_code == 200
        rewrite_vectors_in_place(Lake(lake).vectors_path)
        health = _wait_for(lambda: (r := httpx.get(f"{url}/healthz")).status_code == 503 and r)
        search, ask = _search(url), _ask(url)
    for r in (health, search, ask):
        assert r.status_code == 503 and "checksum" in r.text and "kohaku index" in r.text, r.text


def test_the_server_reads_the_index_checksums_when_it_starts(lake, settings) -> None:
    """Guards: a server started over vectors rewritten in place (size and mtime kept)
    refuses from its first request."""
    rewrite_vectors_in_place(Lake(lake).vectors_path)
    with serving(build_app(settings)) as url:
        health, search = httpx.get(f"{url}/healthz"), _search(url)
    assert health.status_code == 503 and "checksum" in health.text, health.text
    assert search.status_code == 503 and "checksum" in search.text


def test_a_damaged_served_store_is_a_503_naming_the_fix(app, lake, capsys) -> None:
    """Guards: served.sqlite overwritten with garbage under a running server makes ask a
    503 that names the store and `kohaku doctor` (not a 500), without the lake's path;
    doctor then names the store, its integrity check and how to recover its rows."""
    with serving(app) as url:
        assert _ask(url).status_code == 200
        path = store_path(Lake(lake))
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        path.write_bytes(b"this is not a database " * 400)
        r = _ask(url)
    assert r.status_code == 503, r.text
    message = r.json()["error"]["message"]
    assert "served/served.sqlite" in message and "kohaku doctor" in message and str(lake) not in message
    capsys.readouterr()
    assert cli_main(["doctor", "--lake", str(lake), "--json"]) == 1
    (found,) = [f for f in json.loads(capsys.readouterr().out.splitlines()[-1]) if f["area"] == "served"]
    assert found["subject"].endswith("served.sqlite") and "integrity check" in found["problem"]
    assert "kohaku serve" in found["fix"] and ".recover" in found["fix"]


def test_a_config_with_url_credentials_and_an_api_key_is_a_clear_config_error(app, lake, monkeypatch) -> None:
    """Guards: a config whose base_url carries user:password@ beside api_key_env is refused
    as that config's error saying what to change, the credential never shown."""
    monkeypatch.setenv("CRED_TEST_KEY", "sk-test-key-1234")
    llm = {"backend": "openai", "model": "m", "base_url": "http://alice:s3cretpass@127.0.0.1:9/v1",
           "api_key_env": "CRED_TEST_KEY"}  # fmt: skip
    (lake / "configs" / "creds.json").write_text(json.dumps({"questions": "unused.csv", "generation": {"llm": llm}}))
    with serving(app) as url:
        r = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION, "config": "creds"}, timeout=60)
        listed = httpx.get(f"{url}/api/configs").json()["configs"]
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "creds" in message and "user:password@" in message and "api_key_env" in message, message
    assert "s3cretpass" not in r.text + json.dumps(listed) and "sk-test-key" not in r.text
    assert next(c for c in listed if c["name"] == "creds")["available"] is False


@pytest.fixture()
def small_disk(tmp_path: Path):
    """A real 24 MB file system (tmpfs); skipped where mounting is not allowed."""
    with small_disk_at(tmp_path, 24) as folder:
        yield folder


def test_a_full_disk_while_serving_is_a_503_and_healthz_says_so(small_disk, lake, settings) -> None:
    """Guards: with the lake's disk full, ask is a 503 saying to free space (not a 500
    OperationalError) and /healthz is 503; once space is freed, ask answers again."""
    moved = Path(shutil.copytree(lake, small_disk / "lake"))
    app = build_app(dataclasses.replace(settings, lake=moved))
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        filler = fill_disk(small_disk)
        health, ask = httpx.get(f"{url}/healthz"), _ask(url)
        filler.unlink()
        again = _ask(url)
    assert health.status_code == 503 and "full" in health.json()["error"], health.text
    assert ask.status_code == 503 and "disk" in ask.text and "full" in ask.text, ask.text
    assert str(moved) not in ask.text + health.text
    assert again.status_code == 200, again.text
