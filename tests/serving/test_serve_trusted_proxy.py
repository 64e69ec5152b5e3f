"""The feedback rate counts the client that sent the request: `X-Forwarded-For` is read only
when the direct peer is a proxy named with `--trusted-proxy`. Real `kohaku serve` processes
on 127.0.0.1 (the feedback posts name no answer: a 404 is a post let through, a 429 refused)."""

from __future__ import annotations

import argparse
from pathlib import Path

import httpx
import pytest

from kohaku_assets.cli.serve import serve_settings
from kohaku_assets.resources import KohakuSettings
from tests.support.serve_process import kohaku_serve


def _post(url: str, forwarded_for: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    body = {"answer_id": "0" * 32, "verdict": "right"}
    return httpx.post(f"{url}/api/feedback", json=body, headers=headers, timeout=30).status_code


def test_a_forwarded_header_from_an_untrusted_peer_is_ignored(lake: Path) -> None:
    """X-Forwarded-For from a peer that is no configured proxy is ignored: posts naming new
    addresses share the one peer's budget."""
    with kohaku_serve(lake, "--config", "fake", "--feedback-per-minute", "5") as url:
        codes = [_post(url, f"10.0.0.{i}") for i in range(10)]
    assert codes == [404] * 5 + [429] * 5, codes


def test_a_trusted_proxy_names_the_client(lake: Path) -> None:
    with kohaku_serve(lake, "--config", "fake", "--feedback-per-minute", "2", "--trusted-proxy", "127.0.0.1") as url:
        first = [_post(url, "10.0.0.1") for _ in range(3)]
        other = _post(url, "10.0.0.2")
        # a client's own forged entry comes first; the proxy appends the address it saw
        forged = _post(url, "10.9.9.9, 10.0.0.1")
        direct = [_post(url) for _ in range(3)]  # no header: the proxy itself is the client
    assert first == [404, 404, 429] and other == 404 and forged == 429, (first, other, forged)
    assert direct == [404, 404, 429], direct


def test_a_trusted_proxy_must_be_an_address(lake: Path) -> None:
    ks = KohakuSettings(lake_root=str(lake), corpus_dir=str(lake / "corpus"))
    base = {"host": "127.0.0.1", "api_key_env": None, "no_auth": False, "config": None, "cors": None}
    served, _ = serve_settings(argparse.Namespace(**base, trusted_proxy=["127.0.0.1", "10.1.0.0/16"]), ks)
    assert served.trusted_proxies == ("127.0.0.1", "10.1.0.0/16")
    assert serve_settings(argparse.Namespace(**base), ks)[0].trusted_proxies == ()
    with pytest.raises(ValueError, match="--trusted-proxy proxy.local: give an IP address or network"):
        serve_settings(argparse.Namespace(**base, trusted_proxy=["proxy.local"]), ks)
