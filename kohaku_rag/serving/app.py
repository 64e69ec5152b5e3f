"""The ASGI app: the routes of each piece, JSON errors, auth, the body cap and (only when
asked) CORS for one origin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from kohaku_rag.model_pool import ModelPool
from kohaku_rag.serving import api, openai_routes, openapi, page
from kohaku_rag.serving.errors import HANDLERS
from kohaku_rag.serving.feedback import QuestionSetWriter
from kohaku_rag.serving.jobs import AnswerJobs
from kohaku_rag.serving.limits import BearerAuth, BodyLimit, ClientAddress, ClientRate
from kohaku_rag.serving.service import AnswerService
from kohaku_rag.serving.settings import ServeSettings


def build_app(settings: ServeSettings, models: ModelPool | None = None) -> Starlette:
    middleware = []
    if settings.cors_origin:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=[settings.cors_origin],
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    wider = {openai_routes.CHAT_PATH: settings.max_chat_body_bytes}
    middleware.append(Middleware(BodyLimit, limit=settings.max_body_bytes, wider=wider))
    if settings.api_key:
        middleware.append(Middleware(BearerAuth, key=settings.api_key))
    app = Starlette(
        routes=[*api.ROUTES, *openai_routes.ROUTES, *openapi.ROUTES, *page.ROUTES],
        middleware=middleware,
        exception_handlers=HANDLERS,
        lifespan=_lifespan,
    )
    app.state.service = AnswerService(settings, models)
    app.state.service.watch.start()  # the index's checksums read now, then on its schedule
    app.state.jobs = AnswerJobs(app.state.service, settings.abandon_after, settings.job_lease)
    app.state.feedback_set = QuestionSetWriter(app.state.service.lake)
    app.state.feedback_rate = ClientRate(settings.feedback_per_minute)
    app.state.client_address = ClientAddress(settings.trusted_proxies)
    return app


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """At startup the lease timer starts (a restarted process takes over at once the jobs
    its previous life left running); at shutdown it stops, and the feedback question set
    gets the verdicts still waiting for a rebuild."""
    jobs: AnswerJobs = app.state.jobs
    writer: QuestionSetWriter = app.state.feedback_set
    jobs.keep_leases()
    try:
        yield
    finally:
        await jobs.stop_leases()
        await anyio.to_thread.run_sync(writer.flush)
