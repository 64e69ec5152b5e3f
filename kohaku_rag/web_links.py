"""The one rule for a link the server hands to a client: http or https with a host, or "".

A document's URL comes from metadata.csv, which anyone who can write to the corpus
controls; the ask page puts it in an `<a href>`, so a `javascript:` or `data:` URL would
run in the page's origin. Browsers also strip tabs and newlines inside a scheme
(`java\\tscript:`), so a URL holding a control character is refused too.
"""

from __future__ import annotations

import urllib.parse

WEB_SCHEMES = frozenset({"http", "https"})


def web_link(url: str | None) -> str:
    """`url` stripped when it is an http(s) URL with a host and no control character in
    it; else "" (the client then shows no link)."""
    url = (url or "").strip()
    if not url or any(ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return ""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:  # a malformed netloc (an unclosed IPv6 bracket, a bad port)
        return ""
    return url if parts.scheme.lower() in WEB_SCHEMES and host else ""
