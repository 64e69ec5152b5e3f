"""Answers with ids: every question the server takes is a job with an `answer_id`, so a
client that reloads, or a link shared with someone else, finds the same answer (its progress
while it runs, the answer once done) instead of asking again.

A job counts the clients following it. When the last one leaves while the question still
waits in the queue, the job leaves the queue after a short grace (a reload reconnects well
within it), so abandoned questions no longer hold places that later clients need. A job
whose model call already runs finishes (the work is paid for): its answer is kept as a
stored answer, but only an answer a client received is recorded as served. A second client
asking the same question (same config, unit and conversation) while it is in flight follows
the same job.

Each job is recorded in the lake's served store under this process's lease (leases.py),
renewed on a timer while the process lives; the same timer takes over, or fails with the
reason, the jobs of processes on the lake that died. A job taken over is not abandoned for
want of followers here: its clients wait on other processes, or reconnect."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.to_thread

from kohaku_rag.answering.followup import Turn
from kohaku_rag.serving.errors import ApiError, lake_failure
from kohaku_rag.serving.leases import (
    TAKEN_OVER,
    JobSpec,
    Orphan,
    Owner,
    claim_orphans,
    job_finished,
    job_started,
    renew,
)
from kohaku_rag.serving.service import Answered, AnswerService

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]  # ("progress" | "done" | "error", payload)
State = Literal["queued", "running", "done", "error"]
ANSWER_ID = re.compile(r"^[0-9a-f]{32}$")
KEEP_FINISHED = 500  # finished jobs kept in memory (delivered ones are also in served_answers)


@dataclass(eq=False)
class Job:
    answer_id: str
    same: tuple[str, ...]  # what makes two requests the same question
    question: str
    config: str
    unit: str | None
    via: str
    history: tuple[Turn, ...]
    started: float = field(default_factory=time.perf_counter)
    state: State = "queued"
    events: list[Event] = field(default_factory=list)
    answered: Answered | None = None
    error: ApiError | None = None
    delivered: bool = False
    followers: list[asyncio.Queue[Event]] = field(default_factory=list)
    alone_since: float | None = None  # the event loop's time since nobody follows the job
    task: asyncio.Future[None] | None = None
    runs: int = 1  # above 1: taken over from a process that died while answering it

    @property
    def finished(self) -> bool:
        return self.state in ("done", "error")

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append((kind, payload))
        for queue in self.followers:
            queue.put_nowait((kind, payload))

    def status(self) -> dict[str, Any]:
        """What a client polling a running answer learns: the stage so far, its queue place."""
        stages = [p for kind, p in self.events if kind == "progress" and "stage" in p]
        last = stages[-1] if stages else {"stage": "queued"}
        status = {
            "answer_id": self.answer_id,
            "status": "queued" if self.state == "queued" else "running",
            "stage": last["stage"],
            "place": last.get("place"),
            "question": self.question,
            "config": self.config,
            "unit": self.unit,
        }
        if self.runs > 1:
            status["taken_over"] = TAKEN_OVER
        return status


def error_payload(exc: ApiError) -> dict[str, Any]:
    return {"error": {"message": exc.message, "type": exc.code, "code": exc.status}}


class AnswerJobs:
    def __init__(self, service: AnswerService, grace: float, lease: float) -> None:
        self.service = service
        self.grace = grace
        self.owner = Owner.new(lease)
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._in_flight: dict[tuple[str, ...], Job] = {}
        self._keeper: asyncio.Task[None] | None = None

    def start(
        self, question: object, config: str | None, unit: str | None, via: str, history: tuple[Turn, ...] = ()
    ) -> Job:
        """The job answering this question: a new one, or the one already in flight for the
        same question. Bad input and a full queue are refused here, before any stream."""
        service = self.service
        text = service.check_question(question)
        named = service.named_config(config)
        same = (text, service.check_unit(unit), named.name, *(f"{t.role}: {t.content}" for t in history))
        running = self._in_flight.get(same)
        if running is not None and not running.finished:
            return running
        service.gate(named.config).check_room()
        job = Job(uuid.uuid4().hex, same, text, named.name, unit, via, history)
        self._jobs[job.answer_id] = job
        self._in_flight[same] = job
        self.keep_leases()
        job.task = asyncio.ensure_future(self._run(job))
        # A client that leaves before it starts following (a stream closed at once) is one
        # that never waited: the same grace applies from the start.
        self._alone(job)
        self._forget_old()
        return job

    def get(self, answer_id: str) -> Job | None:
        return self._jobs.get(answer_id) if ANSWER_ID.match(answer_id) else None

    async def _run(self, job: Job) -> None:
        def admitted() -> None:
            job.state = "running"

        lake, owner = self.service.lake, self.owner
        spec = JobSpec(job.unit, job.history, job.via)
        try:  # recorded in the served store: another process on the lake can resume this answer
            if job.runs == 1:  # a job taken over is already recorded, claimed by this process
                await anyio.to_thread.run_sync(
                    lambda: job_started(lake, owner, job.answer_id, job.question, job.config, spec)
                )
            job.answered = await self.service.answer(
                job.question,
                job.config,
                job.unit,
                lambda p: job.publish("progress", p),
                job.started,
                admitted,
                job.answer_id,
                job.history,
                taken_over=job.runs > 1,
            )
            job.state = "done"
            job.publish("done", job.answered.response)
        except asyncio.CancelledError:
            job.error = ApiError(409, "nobody waited for this answer any more; ask again", code="abandoned")
            job.state = "error"
            job.publish("error", error_payload(job.error))
        except ApiError as exc:
            job.error, job.state = exc, "error"
            job.publish("error", error_payload(exc))
        except Exception as exc:  # the traceback stays in the server log
            refused = lake_failure(exc, lake.root)
            log.error("answer failed: %s", exc, exc_info=None if refused else exc)  # a known failure: one line
            job.error = refused or ApiError(500, f"internal error ({type(exc).__name__})", code="internal")
            job.state = "error"
            job.publish("error", error_payload(job.error))
        finally:
            if self._in_flight.get(job.same) is job:
                del self._in_flight[job.same]
            await self._record_end(job)

    async def _record_end(self, job: Job) -> None:
        answered, error = job.answered, job.error
        key = list(answered.key) if answered is not None else None
        payload = answered.response if answered is not None else error_payload(error or ApiError(500, "no answer"))
        state = "done" if answered is not None else "error"
        lake, owner = self.service.lake, self.owner
        try:
            await anyio.to_thread.run_sync(lambda: job_finished(lake, owner, job.answer_id, state, key, payload))
        except Exception as exc:  # the answer itself is served; only other processes miss it
            known = lake_failure(exc, lake.root) is not None  # a full disk, a damaged store: one line
            where = f"answer {job.answer_id}: not recorded in the served store"
            log.error("%s: %s", where, exc, exc_info=None if known else exc)

    @contextmanager
    def _listening(self, job: Job) -> Iterator[asyncio.Queue[Event]]:
        """A queue of the job's events so far and each new one; while it is held, its holder
        counts as a client waiting for the answer."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        for event in job.events:
            queue.put_nowait(event)
        job.followers.append(queue)
        job.alone_since = None
        try:
            yield queue
        finally:
            job.followers.remove(queue)
            if not job.followers and not job.finished:
                self._alone(job)

    async def follow(self, job: Job) -> AsyncIterator[Event]:
        """The job's events so far, then each new one until it is done or failed."""
        with self._listening(job) as queue:
            while True:
                kind, payload = await queue.get()
                yield kind, payload
                if kind != "progress":
                    return

    async def wait(self, job: Job, gone: Callable[[], Awaitable[bool]]) -> Answered:
        """The job's answer for a plain (not streamed) request; `gone` says whether the
        client hung up (asked twice a second while it waits)."""
        with self._listening(job) as queue:
            while not job.finished:
                try:
                    await asyncio.wait_for(queue.get(), timeout=0.5)
                except TimeoutError:
                    if await gone():
                        raise ApiError(499, "the client went away", code="client_gone") from None
        if job.answered is not None:
            return job.answered
        raise job.error or ApiError(500, "no answer", code="internal")

    async def delivered(self, job: Job) -> None:
        """A client received the job's answer: recorded as served, once."""
        if job.answered is None or job.delivered:
            return
        job.delivered = True
        answered = job.answered
        await anyio.to_thread.run_sync(lambda: self.service.deliver(answered, job.via))

    def _alone(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        job.alone_since = loop.time()
        loop.call_later(self.grace, self._abandon_if_alone, job)

    def _abandon_if_alone(self, job: Job) -> None:
        """Nobody followed a question still waiting for the model for the whole grace: it
        leaves the queue."""
        alone = job.alone_since
        if job.followers or alone is None or job.state != "queued" or job.task is None:
            return
        if asyncio.get_running_loop().time() - alone < self.grace - 0.01:
            return  # someone came back and left again since: a later call decides
        log.info("answer %s: its client went away while it waited; leaving the queue", job.answer_id)
        job.task.cancel()

    # ------------------------------------------------------------ leases

    def keep_leases(self) -> None:
        """Run the lease timer in this event loop, unless it runs already (called at startup
        and with each new job: a server started without lifespan events still keeps them)."""
        loop = asyncio.get_running_loop()
        keeper = self._keeper
        if keeper is None or keeper.done() or keeper.get_loop() is not loop:
            self._keeper = loop.create_task(self._keep())

    async def stop_leases(self) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper.get_loop() is asyncio.get_running_loop():
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    async def _keep(self) -> None:
        """Every quarter lease: renew this process's leases, then settle the jobs of
        processes that died. A failed tick (a locked or full disk) is logged; the next one
        tries again."""
        while True:
            try:
                await self.tend()
            except Exception as exc:
                log.warning("job leases: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self.owner.lease / 4)

    async def tend(self) -> None:
        lake, owner = self.service.lake, self.owner
        if any(not j.finished for j in self._jobs.values()):
            await anyio.to_thread.run_sync(lambda: renew(lake, owner))
        claimed, failed = await anyio.to_thread.run_sync(lambda: claim_orphans(lake, owner))
        for answer_id, payload in failed:
            log.warning("answer %s: %s", answer_id, payload["error"]["message"])
        for orphan in claimed:
            log.warning("answer %s: its server process stopped; answering it again here", orphan.answer_id)
            self._take_over(orphan)

    def _take_over(self, orphan: Orphan) -> None:
        """Answer a dead process's job here, under its answer id. It waits its turn in the
        queue even past the queue's size: it was admitted once already."""
        spec = orphan.spec
        same = (orphan.question, self.service.check_unit(spec.unit), orphan.config,
                *(f"{t.role}: {t.content}" for t in spec.history))  # fmt: skip
        job = Job(orphan.answer_id, same, orphan.question, orphan.config, spec.unit, spec.via, spec.history)
        job.runs = orphan.runs
        job.publish("progress", {"stage": "taken over", "taken_over": TAKEN_OVER})
        self._jobs[job.answer_id] = job
        self._in_flight.setdefault(same, job)
        job.task = asyncio.ensure_future(self._run(job))

    def _forget_old(self) -> None:
        finished = [k for k, j in self._jobs.items() if j.finished]
        for answer_id in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[answer_id]
