"""`kohaku serve`: the lake's answers over HTTP — an ask page, a JSON API and an
OpenAI-compatible endpoint, as small Starlette pieces assembled by `app.build_app`.

settings   what the server was started with (frozen)
errors     the JSON error every failure becomes
limits     bearer auth and the request body cap (ASGI middleware)
gate       the bounded queue in front of each LLM backend
served     the `served_answers` table (one Parquet file per day)
service    answering: configs, the queue, the stored answers, the answer's JSON
documents  documents, pages rendered with the cited sentences highlighted
api        the JSON routes, openai_routes the /v1 routes, page the ask page
"""
