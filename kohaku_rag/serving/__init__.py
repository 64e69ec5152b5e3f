"""`kohaku serve`: the lake's answers over HTTP — an ask page, a JSON API and an
OpenAI-compatible endpoint, as small Starlette pieces assembled by `app.build_app`.

settings   what the server was started with (frozen)
errors     the JSON error every failure becomes
limits     bearer auth, the request body cap (ASGI middleware), the per-client feedback rate
gate       the bounded queue in front of each LLM backend
served_store  what users wrote and were told: one SQLite file (WAL) shared by every process
served     the `served_answers` rows; feedback  verdicts, reviews and the `feedback` question set
service    answering: configs, the queue, the stored answers, the answer's JSON
documents  documents, pages rendered with the cited sentences highlighted
api        the JSON routes, openai_routes the /v1 routes, page the ask page
"""
