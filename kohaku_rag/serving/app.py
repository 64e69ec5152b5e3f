"""The ASGI app: the routes of each piece, JSON errors, auth, the body cap and (only when
asked) CORS for one origin."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from kohaku_rag.models import ModelPool
from kohaku_rag.serving import api, openai_routes, openapi, page
from kohaku_rag.serving.errors import HANDLERS
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
    middleware.append(Middleware(BodyLimit, limit=settings.max_body_bytes))
    if settings.api_key:
        middleware.append(Middleware(BearerAuth, key=settings.api_key))
    app = Starlette(
        routes=[*api.ROUTES, *openai_routes.ROUTES, *openapi.ROUTES, *page.ROUTES],
        middleware=middleware,
        exception_handlers=HANDLERS,
    )
    app.state.service = AnswerService(settings, models)
    app.state.service.watch.start()  # the index's checksums read now, then on its schedule
    app.state.jobs = AnswerJobs(app.state.service, settings.abandon_after)
    app.state.feedback_rate = ClientRate(settings.feedback_per_minute)
    app.state.client_address = ClientAddress(settings.trusted_proxies)
    return app
