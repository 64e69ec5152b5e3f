"""The HTTP API reference, generated from the OpenAPI description `kohaku serve` serves.

The description is fetched from the `/openapi.json` route itself (the app's own route, run
in-process), so the page shows exactly what a client reading it gets."""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.testclient import TestClient

from kohaku_rag.serving import openapi


def served_schema() -> dict[str, Any]:
    """The description as `GET /openapi.json` returns it."""
    with TestClient(Starlette(routes=openapi.ROUTES)) as client:
        response = client.get("/openapi.json")
        response.raise_for_status()
        schema: dict[str, Any] = response.json()
        return schema


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not ref:
        return node
    target: Any = schema
    for part in ref.lstrip("#/").split("/"):
        target = target[part]
    return dict(target)


def _type(node: dict[str, Any]) -> str:
    kind = node.get("type", "object")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = node.get("items", {})
        return f"array of {_type(items)}"
    return str(kind)


def _fields(schema: dict[str, Any], body: dict[str, Any]) -> list[str]:
    body = _resolve(schema, body)
    props = body.get("properties", {})
    if not props:
        return []
    required = set(body.get("required", []))
    rows = ["| field | type | required |", "|---|---|---|"]
    rows += [f"| `{n}` | {_type(_resolve(schema, p))} | {'yes' if n in required else ''} |" for n, p in props.items()]
    return rows


def page() -> str:
    schema = served_schema()
    info = schema["info"]
    lines = [
        "# HTTP API reference",
        "",
        f"Generated from the OpenAPI {schema['openapi']} description that `kohaku serve` serves at "
        "`/openapi.json` (declared in `kohaku_rag/serving/openapi.py`; a test checks every route is in it). "
        f"{info.get('description', '')}",
        "",
        "Every request but `/healthz` and the ask page needs `Authorization: Bearer KEY` when the server "
        'was started with `--api-key-env`. Every error is JSON: `{"error": {"message", "type", "code"}}`.',
        "",
        "| method | path | what it does |",
        "|---|---|---|",
    ]
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            lines.append(f"| `{method.upper()}` | `{path}` | {op.get('summary', '')} |")
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            lines += ["", f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["Parameters:", "", "| name | in | type | required | description |", "|---|---|---|---|---|"]
                lines += [
                    f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} "
                    f"| {'yes' if p.get('required') else ''} | {p.get('description', '')} |"
                    for p in params
                ]
                lines.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                lines += ["Request body (JSON):", "", *_fields(schema, body), ""]
            errors = [f"`{s}` {r.get('description', '')}" for s, r in op.get("responses", {}).items() if s[0] != "2"]
            for status, response in op.get("responses", {}).items():
                if status[0] != "2":
                    continue
                for media, content in response.get("content", {}).items():
                    lines.append(
                        f"Response `{status}` `{media}`"
                        + (f": {content['description']}" if "description" in content else "")
                    )
                    lines.append("")
                    rows = _fields(schema, content.get("schema", {}))
                    if rows:
                        lines += [*rows, ""]
            if errors:
                lines += ["Errors (an `Error` body): " + ", ".join(errors) + ".", ""]
    # The description itself is a file beside the page (pages.py writes it), not a code block:
    # pasted in, its ~57,000 characters were 80% of the page.
    size = len(description_text(schema))
    lines += [
        "",
        "## The description as served",
        "",
        f"[openapi.json]({OPENAPI_FILE}) ({size:,} characters), the file `GET /openapi.json` returns: "
        "load it into an OpenAPI viewer or a client generator.",
        "",
    ]
    return "\n".join(lines)


# The file name the site keeps the description under, next to this page.
OPENAPI_FILE = "openapi.json"


def description_text(schema: dict[str, Any] | None = None) -> str:
    """The description as the site's file holds it (indented, like the page showed it)."""
    return json.dumps(schema if schema is not None else served_schema(), indent=2) + "\n"
