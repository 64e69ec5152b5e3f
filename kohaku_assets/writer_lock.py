"""The lake's writer lock around an asset's step (kohaku_rag.lake.lock).

Every asset that writes the indexes or the answering tables is decorated with `lake_writer`:
a step launched from the UI, a sensor or the schedule waits (saying so in the run's log)
while `kohaku index` or `kohaku eval` writes the same lake. A step of a run started by the
process that holds the lock (the CLI's own runs, their steps on Celery workers) carries the
holder's token in its run tags and runs under that lock instead of waiting for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from dagster import AssetExecutionContext

from kohaku_assets.resources import KohakuSettings
from kohaku_rag.lake.lock import LOCK_TOKEN_TAG, hold_lake

__all__ = ["lake_writer"]

F = TypeVar("F", bound=Callable[..., Any])


def lake_writer(fn: F) -> F:
    """Run the asset function holding the lake's writer lock. `functools.wraps` keeps the
    signature Dagster reads its context and resources from."""

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        context = kwargs.get("context", args[0] if args else None)
        settings = kwargs.get("settings", next((a for a in args if isinstance(a, KohakuSettings)), None))
        if not isinstance(context, AssetExecutionContext) or not isinstance(settings, KohakuSettings):
            return fn(*args, **kwargs)
        what = f"run {context.run_id[:8]} ({context.job_name})"
        token = context.run.tags.get(LOCK_TOKEN_TAG)
        with hold_lake(settings.lake.root, what, join_token=token, say=context.log.info):
            return fn(*args, **kwargs)

    return step  # type: ignore[return-value]
