"""Shared machinery for background runs: the task base class, transient-error
retries, poison-task detection, and the sweeper that finds runs nobody works on.

Apps plug their run models in with ``register_stale_sweep``; ``IngestJob`` does so
in ``sources/apps.py``, ``GenerationRun`` in ``generation/apps.py``. A run model
needs ``Status`` with PENDING / RUNNING / FAILED, a non-null ``heartbeat_at``
that the workers touch as they progress, ``attempts`` (raised each time a worker
claims the run), ``error`` and ``finished_at``. A run made of parts that workers
do one by one (an ingest job's files) can also register a ``parts`` sweep, which
finds a lost part by its own heartbeat while the rest of the run goes on.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from celery import current_app, current_task
from celery.contrib.django.task import DjangoTask
from django.conf import settings
from django.db import OperationalError, models, transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class TransientError(Exception):
    """A failure worth retrying later: broker or model timeouts, rate limits, a locked database."""


class PoisonTask(Exception):
    """The worker process died every time it ran this task (crash, out-of-memory kill)."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` may go away by itself. Everything else is a real failure of the run."""
    from core import llm  # imported late: litellm is slow to import and most commands never need it

    if isinstance(exc, TransientError):
        return True
    if isinstance(exc, llm.LLMError):
        # core.llm has already retried the call; it marks what may still recover.
        return exc.transient
    if isinstance(exc, OperationalError):
        return "database is locked" in str(exc) or "database is busy" in str(exc)
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeout

    return isinstance(exc, (BrokerError, RedisConnectionError, RedisTimeout))


def failure_reason(exc: BaseException) -> str:
    """What a failed run or file records as its reason: the type when it says something, then the message."""
    from core import llm

    if isinstance(exc, (TransientError, llm.LLMError)) or type(exc).__name__ == "ExtractionError":
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def retry_transient(fun: F) -> F:
    """Task-body decorator: a transient error becomes ``TransientError``, which ``FoundryTask`` retries.

    In eager mode nothing is re-raised as transient: the in-process caller
    records the failure at once (the LLM layer has already retried its call).
    """

    @functools.wraps(fun)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fun(*args, **kwargs)
        except TransientError:
            raise
        except Exception as exc:
            task = current_task._get_current_object()  # the proxy is never None itself
            eager = task is not None and bool(task.request.is_eager)
            if is_transient(exc) and not eager:
                logger.warning("transient error in %s: %s", fun.__name__, failure_reason(exc))
                raise TransientError(failure_reason(exc)) from exc
            raise

    # Celery reads a task's arity from its signature (an errback with one free
    # argument is sent to its own queue; a wider one would run inline, in the
    # failing worker), so the wrapper must show the function's own signature.
    # (A function object takes any attribute; mypy's type for a function declares none.)
    wrapper.__signature__ = inspect.signature(fun)  # type: ignore[attr-defined]
    return cast(F, wrapper)


class FoundryTask(DjangoTask):
    """Base of every Foundry task: late acks, re-queue on a lost worker, retry only transient errors.

    A ``DjangoTask``, so ``delay_on_commit`` is there: a task enqueued inside a
    transaction is sent only once the rows it reads are committed.

    A message whose worker process dies (SIGKILL, segfault, OOM) goes back to the
    queue; ``before_start`` counts those deliveries so a task that kills its worker
    every time fails with a reason after ``FOUNDRY_TASK_MAX_DELIVERIES`` instead of
    looping forever.
    """

    acks_late = True
    reject_on_worker_lost = True
    autoretry_for = (TransientError,)
    retry_jitter = True
    # Failures are stored even for tasks whose results are ignored: errbacks read the reason.
    store_errors_even_if_ignored = True
    # The worker logs each return value; keep payloads (document text) out of the log.
    resultrepr_maxsize = 120

    @property
    def max_retries(self) -> int:
        return settings.FOUNDRY_TASK_MAX_RETRIES

    @property
    def retry_backoff(self) -> int:
        """Seconds before the first retry; doubled each time, with jitter, up to ``retry_backoff_max``."""
        return settings.FOUNDRY_TASK_RETRY_BACKOFF

    @property
    def retry_backoff_max(self) -> int:
        # A task waiting for its retry is held by a worker and sends no heartbeat: the wait must end
        # well inside the stale window, or the sweeper would take its run for lost and send it again.
        return max(1, min(settings.FOUNDRY_TASK_RETRY_BACKOFF * 2**6, settings.FOUNDRY_JOB_STALE_SECONDS // 2))

    def before_start(self, task_id: str, args: tuple, kwargs: dict) -> None:
        deliveries = delivery_count(task_id, self.request.retries)
        if deliveries > settings.FOUNDRY_TASK_MAX_DELIVERIES:
            raise PoisonTask(f"the worker process died {deliveries - 1} times running this task; giving up")


MARK_TTL_SECONDS = 7 * 86400


def _redis() -> Any | None:
    """The result store's Redis client, or None (eager mode, or a result store that is not Redis)."""
    if current_app.conf.task_always_eager:
        return None
    return getattr(current_app.backend, "client", None)


def delivery_count(task_id: str, retries: int) -> int:
    """How often this attempt of the task has started, counted in the result store (Redis).

    A retry is a new message with the same id, hence the key includes ``retries``.
    Without a Redis result store (eager mode) there is nothing to count: 1.
    """
    client = _redis()
    if client is None:
        return 1
    key = f"foundry:deliveries:{task_id}:{retries}"
    count = client.incr(key)
    client.expire(key, MARK_TTL_SECONDS)
    return int(count)


# Done marks let a compute worker drop a duplicate message (left in the queue when
# a stale run was re-queued) without opening the database: the db side sets the
# mark after it commits the result, the compute side only reads it.


def done_mark(*keys: str) -> None:
    """Mark ``keys`` done, in one round trip however many there are (a failed job's every file)."""
    client = _redis()
    if client is not None and keys:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(f"foundry:done:{key}", 1, ex=MARK_TTL_SECONDS)
            pipe.execute()


def done_clear(keys: list[str]) -> None:
    client = _redis()
    if client is not None and keys:
        client.delete(*(f"foundry:done:{key}" for key in keys))


def done_check(key: str) -> bool:
    client = _redis()
    return client is not None and bool(client.exists(f"foundry:done:{key}"))


def task_failure_reason(task_id: str) -> str:
    """The stored reason a task failed, for an errback that runs in another process."""
    from celery.result import AsyncResult

    result = AsyncResult(task_id, app=current_app)
    exc = result.result
    if isinstance(exc, BaseException):
        return failure_reason(exc)
    return f"task {task_id} failed ({result.state})"


class Heartbeat:
    """Report a stage now and repeat the latest one every ``every`` seconds until closed.

    For a task that cannot touch the run itself (a compute worker has no database):
    ``send(stage)`` posts a message to the db side, and the repeats keep the run's
    heartbeat fresh through one long step (a model call), so the stale-run sweeper
    can use a window much shorter than the longest step. A failed send is logged
    and does not stop the work.
    """

    def __init__(self, send: Callable[[str], None], *, every: float) -> None:
        self.send, self.every = send, every
        self.stage = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="foundry-heartbeat", daemon=True)

    def __call__(self, stage: str) -> None:
        self.stage = stage
        self._send(stage)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            if self.stage:
                self._send(self.stage)

    def _send(self, stage: str) -> None:
        try:
            self.send(stage)
        except Exception as exc:  # a lost heartbeat only brings the sweeper closer; the work goes on
            logger.warning("heartbeat not sent: %s", failure_reason(exc))


def heartbeat_interval() -> float:
    """How often a task reports that its run is alive: ``FOUNDRY_HEARTBEAT_SECONDS``, a fraction of the stale window."""
    return float(settings.FOUNDRY_HEARTBEAT_SECONDS)


def task_failure_error(task_id: str) -> dict[str, Any]:
    """The stored failure of a task as a run's ``error`` record: {type, message, transient}."""
    from celery.result import AsyncResult

    exc = AsyncResult(task_id, app=current_app).result
    kind = type(exc).__name__ if isinstance(exc, BaseException) else "TaskFailed"
    transient = isinstance(exc, BaseException) and is_transient(exc)
    return {"type": kind, "message": task_failure_reason(task_id), "transient": transient}


def is_eager() -> bool:
    return bool(current_app.conf.task_always_eager)


# --------------------------------------------------------------------------- stale runs


@dataclass(frozen=True)
class SweepAction:
    model: str
    run_id: int
    action: str  # requeued | failed
    reason: str
    part: str = ""  # the part of the run acted on (an ingest job's file); empty: the whole run


# (cutoff, max_attempts) -> what was done: re-send or fail each part of a live run silent since before cutoff.
PartsSweep = Callable[[datetime, int], list[SweepAction]]


@dataclass(frozen=True)
class StaleSweep:
    """A run model the sweeper watches, how to put one of its runs back on the queue, what to tell the
    workers when it fails one (so the messages still queued for it are dropped, not computed for nothing),
    and how to find the lost parts of its live runs."""

    model: type[models.Model]
    requeue: Callable[[int], None] | None
    failed: Callable[[int], None] | None = None
    parts: PartsSweep | None = None


_SWEEPS: dict[str, StaleSweep] = {}


def register_stale_sweep(
    model: type[models.Model],
    requeue: Callable[[int], None] | None,
    failed: Callable[[int], None] | None = None,
    *,
    parts: PartsSweep | None = None,
) -> None:
    """Let the sweeper watch ``model``. Called once per model from an app's ``ready()``.

    ``requeue(run_id)`` puts a stale run (already set back to pending) on the queue
    again; with ``None`` a stale run is failed at once (for runs not worth redoing).
    ``failed(run_id)`` is called after the sweeper failed a run, in the transaction that failed it.
    ``parts(cutoff, max_attempts)`` handles the lost parts of runs that are still alive, on every
    sweep; it must claim each part by a conditional update, as the run sweep does.
    """
    _SWEEPS[model._meta.label] = StaleSweep(model, requeue, failed, parts)


def stale_runs_sweep(*, stale_after: timedelta | None = None, max_attempts: int | None = None) -> list[SweepAction]:
    """Re-queue or fail every pending/running run with no sign of life for ``stale_after``, and every lost part
    of a run that is still alive.

    Parts first: a part (an ingest job's file) whose own heartbeat is older than ``stale_after``
    while its run still beats has lost its worker; it was taken from its queue, so nothing waits
    ahead of it, and the registered ``parts`` sweep sends it again (or fails it, after
    ``max_attempts`` sends), whatever the queues hold.

    Then whole runs. Every task working for a run beats (``Heartbeat``), so a quiet run is either lost
    (its worker died) or waiting in a queue. While messages wait in the broker's queues
    (without a broker: always) and some run is making progress, quiet runs may be queued
    behind it and nothing is swept: a re-queued run would go to the back of the same queue
    anyway. With the queues empty, or nothing making progress, a quiet run is lost.

    Safe to run anywhere and any number of times at once: each run is claimed by
    a conditional update on its old heartbeat, so two sweepers never both act on it.
    """
    stale_after = stale_after or timedelta(seconds=settings.FOUNDRY_JOB_STALE_SECONDS)
    max_attempts = max_attempts or settings.FOUNDRY_JOB_MAX_ATTEMPTS
    cutoff = timezone.now() - stale_after
    sweeps = list(_SWEEPS.values())
    actions = [action for sweep in sweeps if sweep.parts for action in sweep.parts(cutoff, max_attempts)]
    if any(_live(sweep, cutoff) for sweep in sweeps):
        waiting = queued_messages()
        if waiting is None or waiting > 0:
            return actions
    for sweep in sweeps:
        actions.extend(_sweep_model(sweep, cutoff=cutoff, max_attempts=max_attempts))
    return actions


def _live(sweep: StaleSweep, cutoff: datetime) -> bool:
    status = sweep.model.Status  # type: ignore[attr-defined]  # every swept run model declares its Status choices
    return sweep.model._default_manager.filter(status=status.RUNNING, heartbeat_at__gte=cutoff).exists()


def queued_messages() -> int | None:
    """How many task messages wait in the broker's queues (not those a worker already holds).

    None without a broker: runs started in-process wait in a thread pool no sweeper can see.
    """
    if is_eager():
        return None
    from kombu import Queue

    waiting = 0
    with current_app.connection_for_read() as conn:
        for queue in current_app.conf.task_queues or [Queue(current_app.conf.task_default_queue)]:
            # A passive declare only reads; a queue the broker does not hold (Redis drops an empty
            # list) has no messages. A fresh channel each time: a refused declare closes its channel.
            try:
                waiting += queue.bind(conn.channel()).queue_declare(passive=True).message_count
            except conn.channel_errors:
                continue
    return waiting


def _sweep_model(sweep: StaleSweep, *, cutoff: datetime, max_attempts: int) -> list[SweepAction]:
    model = sweep.model
    status = model.Status  # type: ignore[attr-defined]  # every swept run model declares its Status choices
    stale = model._default_manager.filter(status__in=[status.PENDING, status.RUNNING], heartbeat_at__lt=cutoff)
    actions = []
    for run_id, heartbeat, attempts in stale.values_list("pk", "heartbeat_at", "attempts"):
        claim = model._default_manager.filter(pk=run_id, heartbeat_at=heartbeat)
        idle = int((timezone.now() - heartbeat).total_seconds())
        if sweep.requeue is None or attempts >= max_attempts:
            reason = f"no progress for {idle} s after {attempts} attempts (worker lost, or no worker serves its queue)"
            # One transaction: what ``failed`` records of the failure (the run's audit link) commits with it.
            with transaction.atomic():
                failed = claim.update(
                    status=status.FAILED, error=_error_value(model, reason), finished_at=timezone.now()
                )
                if failed and sweep.failed is not None:
                    sweep.failed(run_id)
            if failed:
                logger.warning("run failed as stale model=%s id=%s", model._meta.label, run_id)
                actions.append(SweepAction(model._meta.label, run_id, "failed", reason))
            continue
        reason = f"no progress for {idle} s; re-queued"
        if claim.update(status=status.PENDING, heartbeat_at=timezone.now()):
            logger.warning("run re-queued as stale model=%s id=%s", model._meta.label, run_id)
            sweep.requeue(run_id)
            actions.append(SweepAction(model._meta.label, run_id, "requeued", reason))
    return actions


def _error_value(model: type[models.Model], reason: str) -> Any:
    """The reason in the shape the model's ``error`` field holds (text, or a JSON object)."""
    if isinstance(model._meta.get_field("error"), models.JSONField):
        return {"type": "StaleRun", "message": reason, "transient": True}
    return reason


# --------------------------------------------------------------------------- tasks by name

# An app's tasks.py imports the services its tasks call, so a service that enqueues a
# task cannot import tasks.py back (a circle): each such task registers itself here
# under a name, and the service asks for it by that name when it enqueues.
_TASKS: dict[str, Any] = {}


def register_task(name: str) -> Callable[[F], F]:
    """Decorator over a task's ``@shared_task``: ``registered_task(name)`` returns the task."""

    def register(task: F) -> F:
        _TASKS[name] = task
        return task

    return register


def registered_task(name: str) -> Any:
    """The task registered as ``name``, the apps' tasks modules loaded first if it is not yet registered.

    Loading them on first use (Celery's autodiscovery, which a worker runs on start) keeps
    startup light: a tasks module imports its services, and with them the model libraries.
    """
    if name not in _TASKS:
        current_app.autodiscover_tasks(force=True)
    try:
        return _TASKS[name]
    except KeyError:
        raise LookupError(
            f"no task is registered as {name!r}: no installed app's tasks module declares @register_task({name!r})"
        ) from None
