"""Where a session lives and how one run of it goes: the ``Session`` Durable Object (its checkpoint,
the run lease, the alarm that continues a run whose isolate died), the handle a run writes through,
and :func:`drive`, one run from its claim to its settled checkpoint.

**The lease.** A run claims the session (a commit of its input one revision later) together with a
lease: ``{"run": <run id>, "expires": <ms>}``. The run renews it every third of ``lease_ms``; its
saves are accepted only while it still holds it, and another claim is refused while it is live
(``run_in_progress``). A run that ends releases it with its outcome. So ``GET`` tells a live run
(``running``) from one whose isolate died (``lost``: the lease ran out, never released), and a
resume cannot start a second runner beside a live one.

**The alarm.** Every claim and renewal moves the object's alarm to just after the lease's expiry.
When it fires and the lease ran out unreleased, the run is lost: a ``ready`` session with turns
left is continued *in the object*, from its last saved round, as a new run (at most
``MAX_CONTINUATIONS`` times in a row, so a run that kills its isolate each time stops being
retried); its events go nowhere (no client is connected), its outcome is the stored checkpoint.

Run ids are ``r<claim revision>``: unique per session, and the turn ids of a run's model calls
(``<session>:<claim revision>:<n>``) are new for every attempt, so a client that keeps its
``TurnStreamReducer`` across a resume never glues two attempts' text together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any, Protocol

import js  # type: ignore[import-not-found]
import msgspec
from pyodide.ffi import to_js  # type: ignore[import-not-found]
from workers import DurableObject  # type: ignore[import-not-found]

from agent import (
    AgentConfig,
    HttpError,
    Provider,
    build_model,
    config_from_env,
    error_event,
    run_session,
    stopped_checkpoint,
)
from bindloop.agent import InMemoryLimitStore, LimitStore
from bindloop.errors import ToolLoopExceededError, TurnBudgetExceededError
from bindloop.hosts.js_fetch import FetchTransport
from bindloop.session import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint

MAX_CONTINUATIONS = 2
"""Lost runs the alarm continues in a row before it leaves the session ``ready`` for a client."""
ALARM_GRACE_MS = 1_000


def wall_clock_ms() -> float:
    # Date.now() in workerd advances with I/O, not while Python computes: fine for windows and
    # leases of seconds, and the same clock in every isolate (a monotonic clock is per process).
    return float(js.Date.now())


def _js_obj(value: dict[str, Any]) -> Any:
    return to_js(value, dict_converter=js.Object.fromEntries)


class Session(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """One conversation: ``checkpoint`` (its JSON) and ``revision`` written together, the run
    ``lease`` and the ``last_run`` outcome. Compare-and-set on the revision, and on the lease's
    holder for a run's saves, makes the object the session's single writer."""

    async def _get(self, key: str) -> Any:
        value = await self.ctx.storage.get(key)
        return None if value is None else value

    async def _lease(self) -> dict[str, Any] | None:
        raw = await self._get("lease")
        return json.loads(str(raw)) if raw else None

    async def _revision(self) -> int:
        stored = await self._get("revision")
        return -1 if stored is None else int(stored)

    async def load(self) -> str | None:
        data = await self._get("checkpoint")
        return None if data is None else str(data)

    async def state(self) -> str:
        """``{"revision", "lease": {"run", "expires_in_ms"} | null, "last_run": {...} | null}``."""
        lease = await self._lease()
        last = await self._get("last_run")
        shown = None if lease is None else {
            "run": lease["run"], "expires_in_ms": int(lease["expires"] - wall_clock_ms())}
        return json.dumps({"revision": await self._revision(), "lease": shown,
                           "last_run": json.loads(str(last)) if last else None})

    async def claim(self, expected_revision: int, revision: int, data: str, run: str,
                    lease_ms: int) -> str:
        """Store a run's input (``revision``, over ``expected_revision``; ``-1``: nothing stored)
        and give ``run`` the lease, unless another run's lease is live. Answers ``{"ok": true}`` or
        ``{"ok": false, "reason": "stale" | "busy", "revision", "run"?}``."""
        current = await self._revision()
        if current != int(expected_revision):
            return json.dumps({"ok": False, "reason": "stale", "revision": current})
        now = wall_clock_ms()
        lease = await self._lease()
        if lease is not None and lease["run"] != run and lease["expires"] > now:
            return json.dumps({"ok": False, "reason": "busy", "revision": current,
                               "run": lease["run"], "expires_in_ms": int(lease["expires"] - now)})
        expires = now + int(lease_ms)
        # One put of every key: atomic, so no reader sees a revision without its checkpoint.
        await self.ctx.storage.put(_js_obj({
            "checkpoint": data, "revision": int(revision),
            "lease": json.dumps({"run": run, "expires": expires})}))
        await self.ctx.storage.setAlarm(expires + ALARM_GRACE_MS)
        return json.dumps({"ok": True, "revision": int(revision)})

    async def commit(self, expected_revision: int, revision: int, data: str, run: str,
                     outcome: str) -> str:
        """A save (``outcome`` ``""``) or the settled checkpoint (``outcome`` names how the run
        ended; the lease is released) of the run holding the lease. Refused when the stored
        revision is not ``expected_revision`` (``stale``) or ``run`` no longer holds the lease
        (``lease_lost``: the run was given up and another took over)."""
        current = await self._revision()
        if current != int(expected_revision):
            return json.dumps({"ok": False, "reason": "stale", "revision": current})
        lease = await self._lease()
        if lease is None or lease["run"] != run:
            return json.dumps({"ok": False, "reason": "lease_lost", "revision": current,
                               "run": None if lease is None else lease["run"]})
        values: dict[str, Any] = {"checkpoint": data, "revision": int(revision)}
        if outcome:
            values["lease"] = ""
            values["last_run"] = json.dumps({"run": run, "outcome": str(outcome)})
            values["continuations"] = 0
        else:
            values["lease"] = json.dumps({"run": run, "expires": lease["expires"]})
        await self.ctx.storage.put(_js_obj(values))
        return json.dumps({"ok": True, "revision": int(revision)})

    async def heartbeat(self, run: str, lease_ms: int) -> bool:
        """Renew ``run``'s lease; ``False`` when it no longer holds it."""
        lease = await self._lease()
        if lease is None or lease["run"] != run:
            return False
        expires = wall_clock_ms() + int(lease_ms)
        await self.ctx.storage.put("lease", json.dumps({"run": run, "expires": expires}))
        await self.ctx.storage.setAlarm(expires + ALARM_GRACE_MS)
        return True

    async def release(self, run: str, outcome: str) -> None:
        """``run`` ended without a settled checkpoint to store (it failed): storage keeps its
        last save, the lease goes, and ``last_run`` says how it ended."""
        lease = await self._lease()
        if lease is None or lease["run"] != run:
            return
        await self.ctx.storage.put(_js_obj({
            "lease": "", "last_run": json.dumps({"run": run, "outcome": str(outcome)})}))

    async def alarm(self, *_info: Any) -> None:
        lease = await self._lease()
        if lease is None:
            return
        now = wall_clock_ms()
        if lease["expires"] > now:  # renewed since this alarm was set
            await self.ctx.storage.setAlarm(lease["expires"] + ALARM_GRACE_MS)
            return
        # The run neither renewed nor released its lease: its isolate died (a crash, a deploy, the
        # CPU limit, kill -9). Record it, then go on from its last saved round.
        continuations = int(await self._get("continuations") or 0)
        await self.ctx.storage.put(_js_obj({
            "lease": "", "last_run": json.dumps({"run": lease["run"], "outcome": "lost"})}))
        data = await self.load()
        if data is None or continuations >= MAX_CONTINUATIONS:
            return
        cp = parse_loop_checkpoint(data)
        if cp.status != "ready" or cp.iterations >= cp.max_iterations:
            return
        try:
            config = config_from_env(self.env)
        except HttpError:
            return  # a misconfigured Worker: the session stays ready for a client to resume
        await self.ctx.storage.put("continuations", continuations + 1)
        store = SessionStore(self, cp.execution_id, lease_ms=config.lease_ms)
        store.revision = cp.revision
        claimed = await store.claim(msgspec.structs.replace(cp, revision=cp.revision + 1))
        await drive(NullSink(), store, claimed, config, self.env, continued_from=lease["run"])


class RateLimiter(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """The rate-limit state every isolate shares: one object per limit group (``idFromName``), so
    ``with_limit``'s windows and in-flight counts are counted once however many isolates call the
    providers. The object serialises its calls, and each method finishes without awaiting, so no
    two requests interleave inside one. State lives in the object's memory (it is evicted only
    after a quiet spell longer than a one-minute window, which has emptied by then; concurrency
    slots of calls that outlive an eviction are forgotten, never double-counted)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._limits = InMemoryLimitStore()

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return await self._limits.admit(str(key), float(window_ms), int(limit), int(amount), float(now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._limits.charge(str(key), float(window_ms), int(amount), float(now))

    async def enter(self, key: str, limit: int) -> bool:
        return await self._limits.enter(str(key), int(limit))

    async def leave(self, key: str) -> None:
        await self._limits.leave(str(key))


class DurableLimitStore:
    """bindloop's ``LimitStore`` over a :class:`RateLimiter` Durable Object (RPC), for
    ``with_limit(store=...)``: requests in any isolate share one limit. Pair it with a clock every
    isolate agrees on (:func:`wall_clock_ms`), not a per-process monotonic one."""

    def __init__(self, namespace: Any, name: str = "providers") -> None:
        self._stub = namespace.get(namespace.idFromName(name))

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return float(await self._stub.admit(key, window_ms, limit, amount, now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._stub.charge(key, window_ms, amount, now)

    async def enter(self, key: str, limit: int) -> bool:
        return bool(await self._stub.enter(key, limit))

    async def leave(self, key: str) -> None:
        await self._stub.leave(key)


def limit_store(env: Any) -> LimitStore | None:
    namespace = getattr(env, "LIMITS", None)
    return None if namespace is None else DurableLimitStore(namespace)


class SessionStore:
    """A run's handle on one session: the object's RPC stub from a request, or the object itself
    from its alarm (the same methods either way). ``revision`` is the last one this handle read
    or wrote; ``run`` the lease it holds once :meth:`claim` succeeded."""

    def __init__(self, target: Any, session_id: str, *, lease_ms: int) -> None:
        self._target = target
        self.session_id = session_id
        self.lease_ms = lease_ms
        self.revision = -1
        self.run = ""
        self.latest: LoopCheckpoint | None = None  # what storage holds, once known

    @classmethod
    def for_session(cls, env: Any, session_id: str, *, lease_ms: int) -> SessionStore:
        ns = env.SESSION
        return cls(ns.get(ns.idFromName(session_id)), session_id, lease_ms=lease_ms)

    async def load(self) -> LoopCheckpoint | None:
        data = await self._target.load()
        if data is None:
            return None
        cp = parse_loop_checkpoint(str(data))
        self.revision = cp.revision
        self.latest = cp
        return cp

    async def state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(str(await self._target.state()))
        return state

    def _refused(self, answer: dict[str, Any]) -> HttpError:
        if answer["reason"] == "busy":
            return HttpError(409, "run_in_progress", f"session {self.session_id!r} has a live run "
                             f"({answer['run']}, lease for {answer['expires_in_ms']} ms more); "
                             "wait for it, or retry once GET shows it lost",
                             run=answer["run"], revision=answer["revision"])
        if answer["reason"] == "lease_lost":
            return HttpError(409, "lease_lost", f"this run ({self.run}) was given up as lost and "
                             f"session {self.session_id!r} went on without it",
                             revision=answer["revision"])
        return HttpError(409, "stale_revision", f"session {self.session_id!r} is at revision "
                         f"{answer['revision']}, not {self.revision}: another request wrote it "
                         "first; reload and retry", revision=answer["revision"])

    async def claim(self, cp: LoopCheckpoint) -> LoopCheckpoint:
        """Store ``cp`` (the run's input) and take the lease as run ``r<cp.revision>``."""
        data = serialize_loop_checkpoint(cp).decode("utf-8")
        run = f"r{cp.revision}"
        answer = json.loads(str(await self._target.claim(self.revision, cp.revision, data, run,
                                                          self.lease_ms)))
        if not answer["ok"]:
            raise self._refused(answer)
        self.revision, self.latest, self.run = cp.revision, cp, run
        return cp

    async def commit(self, cp: LoopCheckpoint, outcome: str = "") -> None:
        """A save of the run (``outcome`` ``""``), or its settled checkpoint (the lease released)."""
        data = serialize_loop_checkpoint(cp).decode("utf-8")
        answer = json.loads(str(await self._target.commit(self.revision, cp.revision, data,
                                                           self.run, outcome)))
        if not answer["ok"]:
            raise self._refused(answer)
        self.revision = cp.revision
        self.latest = cp
        if outcome:
            self.run = ""

    async def heartbeat(self) -> bool:
        return bool(await self._target.heartbeat(self.run, self.lease_ms))

    async def release(self, outcome: str) -> None:
        if self.run:
            run, self.run = self.run, ""
            await self._target.release(run, outcome)


class Sink(Protocol):
    def send(self, event: str, data: Any) -> None: ...

    async def close(self) -> None: ...


class NullSink:
    """Where a run's events go when no client is connected (a run the alarm continues)."""

    def send(self, event: str, data: Any) -> None:
        del event, data

    async def close(self) -> None:
        return None


def _transport_for(provider: Provider, headers: Sequence[tuple[str, str]]) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


async def _keep_lease(store: SessionStore) -> None:
    while store.run:
        await asyncio.sleep(store.lease_ms / 3000)
        if store.run and not await store.heartbeat():
            return  # given up as lost: the next save is refused and ends the run


async def drive(sink: Sink, store: SessionStore, cp: LoopCheckpoint, config: AgentConfig,
                env: Any, *, continued_from: str | None = None) -> None:
    """Run the claimed checkpoint ``cp`` to its end, its events to ``sink``: ``session``, the
    ``turn`` stream, then ``done`` or ``error``. Every finished tool round is committed as it
    settles (a run that fails later resumes from there); the settled checkpoint releases the
    lease; a failure releases it with storage at the last save."""
    opened: dict[str, Any] = {"session_id": store.session_id, "revision": store.revision,
                              "run": store.run}
    if continued_from is not None:
        opened["continues"] = continued_from
    sink.send("session", opened)
    keeper = asyncio.ensure_future(_keep_lease(store))
    try:
        model = build_model(config, transport_for=_transport_for,
                            on_turn_event=lambda ev: sink.send("turn", ev),
                            turn_prefix=f"{cp.execution_id}:{cp.revision}", first_turn=cp.iterations,
                            limit_store=limit_store(env), clock=wall_clock_ms)
        result = await run_session(cp, model=model, save=store.commit)
        final = result.checkpoint
        await store.commit(final, outcome=final.status)
        done: dict[str, Any] = {"session_id": store.session_id, "status": final.status,
                                "stop_reason": result.stop_reason, "revision": store.revision,
                                "iterations": final.iterations}
        waiting = [s for s in final.open_suspends if s.mode == "waiting_for_reply"]
        if waiting:
            done["question"] = waiting[0].detail
            done["tool_call_id"] = waiting[0].tool_call_id
        if final.status == "finished":
            done["text"] = result.text
        sink.send("done", done)
    except (ToolLoopExceededError, TurnBudgetExceededError) as exc:
        try:
            await store.commit(stopped_checkpoint(store.latest or cp), outcome="aborted")
        except HttpError as refused:  # another writer got there first: storage keeps its revision
            sink.send("error", error_event(refused, session_id=store.session_id,
                                           revision=store.revision))
        else:
            sink.send("error", {"error": "iteration_limit", "message": str(exc),
                                "session_id": store.session_id, "revision": store.revision,
                                "status": "aborted"})
    except Exception as exc:  # a provider or transport failure, a refused save
        sink.send("error", error_event(exc, session_id=store.session_id, revision=store.revision))
    finally:
        keeper.cancel()
        with contextlib.suppress(Exception):  # the object unreachable: the lease runs out instead
            await store.release("failed")
        await sink.close()
