"""What every HTTP backend here shares: API keys, base URLs, which failures to retry, how long
to wait between tries, and keeping the key out of error text.

Used by the embedding client (`embed.http`), the chat client (`llm.openai_compat`, async) and
the vision captioner (`captions`). Transport-level helpers (`post_json`, `call_with_retries`)
are for the sync callers; the async chat client drives its own loop with `RetryPolicy.delay`.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import math
import os
import random
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal, TypeVar

import httpx

from kohaku_rag.errors import BackendError, RetriesExhausted

log = logging.getLogger(__name__)

# 408/409/425 are "try again" answers some gateways give; 429 is the rate limit; 5xx too.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER = 300.0  # default cap on a server's Retry-After, in seconds
BODY_SNIPPET = 300  # characters of an error body kept in an error message
REDACTED = "[redacted]"
T = TypeVar("T")


class Retryable(Exception):
    """A transient failure: worth another try, after at least `retry_after` seconds if given."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait before retry number `attempt + 1`.

    `jitter="equal"` keeps half of each exponential step fixed and draws the other half, so
    parallel workers that hit one limit do not come back in lockstep; `"full"` draws the
    whole step (AWS architecture blog), which spreads a burst of 429s over the window.
    """

    max_retries: int = 5
    backoff_base: float = 0.5  # first back-off step in seconds; doubles per attempt
    backoff_max: float = 30.0
    max_wait: float = MAX_RETRY_AFTER  # never sleep longer than this on a server's say-so
    jitter: Literal["equal", "full"] = "equal"

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_base < 0 or self.backoff_max < 0 or self.max_wait < 0:
            raise ValueError("max_retries, backoff_base, backoff_max and max_wait must be >= 0")
        if self.jitter not in ("equal", "full"):
            raise ValueError(f"jitter={self.jitter!r} is not 'equal' or 'full'")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (0-based); at least the (capped)
        Retry-After when the server sent one."""
        step = min(self.backoff_max, self.backoff_base * 2**attempt)
        floor = step / 2 if self.jitter == "equal" else 0.0
        backoff = floor + random.uniform(0.0, step - floor)
        if retry_after is None:
            return min(backoff, self.max_wait)
        return max(backoff, min(retry_after, self.max_wait))


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


# What an environment variable's name looks like (POSIX: letters, digits, underscore).
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Query parameters that carry a credential (api-key, api_key, key, token, access_token, sig, ...).
_SECRET_PARAM = re.compile(r"key|token|secret|password|passwd|sig|auth|credential", re.IGNORECASE)


def looks_like_key(text: str) -> bool:
    """A long token of lower-case letters and many digits (`sk-...`, `jina_...`), not a
    variable name such as OPENAI_API_KEY."""
    return len(text) >= 24 and sum(c.isdigit() for c in text) >= 4 and any(c.islower() for c in text)


def check_api_key_env(env: str | None) -> str | None:
    """`env` when it names an environment variable. A value that does not (most often the key
    itself, pasted by mistake) is refused without being echoed."""
    if env is None:
        return None
    if not isinstance(env, str) or not _ENV_NAME.match(env) or len(env) > 128 or looks_like_key(env):
        raise ValueError(
            "api_key_env must be the name of the environment variable that holds the key "
            "(e.g. OPENAI_API_KEY), not the key itself; the value given is not a variable name "
            f"and is not shown here ({len(str(env))} characters). Put the key in an environment "
            "variable and name that variable"
        )
    return env


def read_api_key(env: str | None, needed_by: str = "this server") -> str | None:
    """The key held by environment variable `env`; None when `env` is None (no key needed)."""
    if check_api_key_env(env) is None:
        return None
    assert env is not None
    key = os.environ.get(env, "").strip()
    if not key:
        raise BackendError(
            f"{needed_by} needs an API key, but environment variable {env} is not set: set the "
            f"environment variable {env} to the key (or point api_key_env at the variable that "
            "holds it), or use api_key_env=None for a server that needs no key"
        )
    return key


def url_has_credentials(base_url: str) -> bool:
    """Whether the URL carries `user:password@` (False when it can't be parsed: the URL's
    own check says why)."""
    try:
        parts = urllib.parse.urlsplit(base_url.strip())
        return parts.username is not None or parts.password is not None
    except ValueError:
        return False


def one_credential_message(base_url: str, api_key_env: str | None) -> str:
    return (
        f"{safe_url(base_url)}: the URL carries user:password@ and api_key_env={api_key_env!r} names an "
        "API key; both would go in the one Authorization header, so only one can be sent: remove the "
        "credentials from the URL to send the key, or set api_key_env to None (in a config file: "
        'api_key_env = "") to send the URL\'s'
    )


def check_one_credential(base_url: str, api_key: str | None, api_key_env: str | None) -> None:
    """Refuse a URL with `user:password@` together with an API key: both go in the one
    Authorization header, and httpx's basic auth from the URL would silently replace the
    key's Bearer header (the server then answers 401 and the key was never sent)."""
    if api_key and url_has_credentials(base_url):
        raise ValueError(one_credential_message(base_url, api_key_env))


def redact(text: str, key: str | None, *more: str | None) -> str:
    """`text` with the API key (and any other secrets given, e.g. `url_secrets(base_url)`)
    scrubbed out, for servers that echo a bad key back."""
    for secret in sorted({s for s in (key, *more) if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
        quoted = urllib.parse.quote(secret, safe="")
        if quoted != secret:
            text = text.replace(quoted, REDACTED)
    return text


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials written into a URL: the user:password of `user:key@host` and the values
    of query parameters such as `api-key=`, `key=` or `token=` (decoded and as written)."""
    if not url:
        return ()
    parts = urllib.parse.urlsplit(url.strip())
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        found.append(userinfo)
        found += [p for p in userinfo.split(":") if len(p) >= 3]
        found += [urllib.parse.unquote(p) for p in userinfo.split(":") if len(p) >= 3]
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=False):
        if _SECRET_PARAM.search(name) and value:
            found += [value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)]
    return tuple(dict.fromkeys(s for s in found if s))


def safe_url(url: str | None) -> str:
    """`url` fit for a log line, an error or a repr: credentials replaced by [redacted]."""
    if not url:
        return str(url)
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{name}={REDACTED if _SECRET_PARAM.search(urllib.parse.unquote(name)) else value}"
        for name, _, value in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_url(url: str) -> str:
    """`url` as it may be stored, hashed or printed: `safe_url` when it holds credentials, else
    unchanged (so whatever is keyed by a URL without credentials keeps its key)."""
    if REDACTED in url:  # read back from the lake: redacted already (and no longer parseable)
        return url
    try:
        secrets = url_secrets(url)
    except ValueError:  # a netloc urllib cannot parse: keep none of it
        return REDACTED
    return safe_url(url) if secrets else url


def redact_urls(obj: T) -> T:
    """A config dataclass with the credentials of every URL field (a string field named `url`
    or `*_url`, in nested dataclasses too) redacted: the form stored in the lake, hashed and
    printed. `obj` itself when it holds none. The process that loaded the config keeps the
    real one in memory, and only there."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, str) and (f.name == "url" or f.name.endswith("_url")):
            safe: Any = redact_url(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            safe = redact_urls(value)
        else:
            continue
        if safe is not value and safe != value:
            changes[f.name] = safe
    return dataclasses.replace(obj, **changes) if changes else obj


def check_not_redacted(url: str) -> None:
    """Refuse a URL read back from the lake, whose credentials were redacted before it was
    stored: sending `[redacted]` as a password only earns a 401 later."""
    if REDACTED in url or urllib.parse.quote(REDACTED, safe="") in url:
        raise ValueError(
            f"{safe_url(url)}: this URL's credentials were redacted when it was stored (the lake "
            "never keeps them); give the config file that holds them again (for the index settings: "
            "`kohaku index --index-config FILE` or KOHAKU_INDEX_CONFIG=FILE), or put the key in the "
            "environment variable that api_key_env names"
        )


def endpoint_id(url: str) -> str:
    """The endpoint a URL names, for a cache key: scheme, host, port and path (normalised,
    lower-case host), plus its non-credential query; never the credentials."""
    parts = urllib.parse.urlsplit(normalise_base_url(url))
    host = parts.netloc.rpartition("@")[2].lower()
    query = "&".join(
        sorted(
            pair
            for pair in parts.query.split("&")
            if pair and not _SECRET_PARAM.search(urllib.parse.unquote(pair.partition("=")[0]))
        )
    )
    return urllib.parse.urlunsplit((parts.scheme.lower(), host, parts.path, query, ""))


def normalise_base_url(base_url: str) -> str:
    """`http://host:8000`, `.../v1` and `.../v1/` all mean the same API root, `.../v1`. A query
    string (`?api-version=...`) is kept; `api_url` puts an API path before it."""
    url = base_url.strip()
    check_not_redacted(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not re.match(r"^https?://[^/?#]", url):
        raise ValueError(f"base_url {safe_url(base_url)!r} must start with http:// or https://")
    path = parts.path.rstrip("/")
    path = path if path.endswith("/v1") else f"{path}/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def api_url(base_url: str, path: str) -> str:
    """`<base_url>/<path>` with the base's query string (if any) after the path."""
    parts = urllib.parse.urlsplit(normalise_base_url(base_url))
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, f"{parts.path}/{path.lstrip('/')}", parts.query, parts.fragment)
    )


def snippet(response: httpx.Response, key: str | None, *more: str) -> str:
    """The start of a response body on one line, key (and `more` secrets) scrubbed, for an error message."""
    text = redact(response.text[:BODY_SNIPPET].replace("\n", " "), key, *more)
    return text or "(empty body)"


def raise_if_retryable(response: httpx.Response, body: str) -> None:
    """Retryable (with the server's Retry-After) for 408/409/425/429/5xx; `body` is already safe."""
    status = response.status_code
    if is_retryable_status(status):
        raise Retryable(f"HTTP {status}: {body}", parse_retry_after(response.headers.get("Retry-After")))


def http_error(response: httpx.Response, key: str | None, *more: str) -> str:
    """`HTTP <status>: <body>` for a final (non-retryable) error status, with a key hint on 401/403."""
    hint = " (check the API key variable)" if response.status_code in (401, 403) else ""
    return f"HTTP {response.status_code}{hint}: {snippet(response, key, *more)}"


def post_json(client: httpx.Client, url: str, body: dict[str, Any], key: str | None, *more: str) -> httpx.Response:
    """POST `body`; timeouts, dropped connections and retryable statuses raise Retryable."""
    try:
        response = client.post(url, json=body)
    except httpx.TimeoutException as exc:
        raise Retryable(f"timed out ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise Retryable(f"connection error ({type(exc).__name__}: {redact(str(exc), key, *more)})") from exc
    raise_if_retryable(response, snippet(response, key, *more))
    return response


def call_with_retries(call: Callable[[], T], policy: RetryPolicy, where: str, failed: str) -> T:
    """`call()` until it does not raise Retryable, at most `policy.max_retries` extra times.

    `where` prefixes the log lines; `failed` starts the BackendError raised when all tries
    fail, which ends "after N attempts; last error: <reason>".
    """
    last = "no attempt made"
    for attempt in range(policy.max_retries + 1):
        try:
            return call()
        except Retryable as exc:
            last = exc.reason
            if attempt == policy.max_retries:
                break
            wait = policy.delay(attempt, exc.retry_after)
            log.warning("%s: %s; retry %d/%d in %.2fs", safe_url(where), last, attempt + 1, policy.max_retries, wait)
            time.sleep(wait)
    raise RetriesExhausted(f"{failed} after {policy.max_retries + 1} attempts; last error: {last}")
