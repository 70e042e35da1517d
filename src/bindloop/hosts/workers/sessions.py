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
When it fires and the lease ran out unreleased, the run is lost: recorded so (``last_run``), it
waits ``RUN_CONTINUE_MS`` for a client to resume it, then a ``ready`` session with turns left is
continued *in the object*, from its last saved round, as a new run (at most
``MAX_CONTINUATIONS`` times in a row, so a run that kills its isolate each time stops being
retried); its events go to its log (no client is connected), its outcome is the stored
checkpoint. A protocol run (frontends.py) is continued by ``frontends.continue_lost_run``.

**Expiry.** With ``CHAT_TTL_MS`` set, a run's end (its settled commit, its release, or the alarm
giving a lost run up) sets the alarm that far ahead; the alarm, finding no run holding the lease,
deletes the chat's storage. A claim clears the expiry.

Run ids are ``r<claim revision>``: unique per session, and the turn ids of a run's model calls
(``<session>:<claim revision>:<n>``) are new for every attempt, so a client that keeps its
``TurnStreamReducer`` across a resume never glues two attempts' text together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import js  # type: ignore[import-not-found]
import msgspec
from pyodide.ffi import to_js  # type: ignore[import-not-found]
from workers import DurableObject  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import (
    LOGGER,
    AgentConfig,
    HttpError,
    chat_ttl_ms,
    Provider,
    build_model,
    ModelFor,
    config_from_env,
    model_of,
    error_event,
    run_session,
    stopped_checkpoint,
)
from bindloop.agent.errors import ToolLoopExceededError, TurnBudgetExceededError
from bindloop.contracts import ToolCall
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.tools import Tool
from bindloop.checkpoints import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint
from bindloop.hosts.workers.checkpoints import MAX_VALUE_BYTES, stored_size
from bindloop.hosts.chat.quota import LogQuota
from bindloop.hosts.workers.identity import scoped_chat_id
from bindloop.hosts.workers.limits import limit_store, wall_clock_ms

MAX_CONTINUATIONS = 2
"""Lost runs the alarm continues in a row before it leaves the session ``ready`` for a client."""
ALARM_GRACE_MS = 1_000


def _js_obj(value: dict[str, Any]) -> Any:
    return to_js(value, dict_converter=js.Object.fromEntries)


class Session(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """One conversation: ``checkpoint`` (its JSON) and ``revision`` written together, the run
    ``lease`` and the ``last_run`` outcome. Compare-and-set on the revision, and on the lease's
    holder for a run's saves, makes the object the session's single writer.

    A Worker subclasses it with its tools (the same as its entrypoint's, which its alarm runs a
    lost run on with): ``class Session(bindloop.hosts.workers.app.Session): tools = TOOLS``,
    exported from the Worker's main module under the ``class_name`` its ``wrangler.jsonc``
    binding names."""

    tools: tuple[Tool[Any, Any], ...] = ()
    """The Worker's tools: what a run the alarm continues may call."""
    model: ClassVar[ModelFor | None] = None
    """The Worker's model (the entrypoint's): what a run the alarm continues calls; ``None``:
    from the ``PROVIDER_*`` vars."""

    def __init_subclass__(cls, **_kwargs: Any) -> None:
        """The SDK's base class wraps each subclass's ``__init__`` (to wrap ``env``); this
        class's is wrapped already, so a Worker's subclass inherits it as it is instead of
        wrapping it again (an ``env`` wrapped twice returns Durable Object stubs whose calls
        answer coroutines)."""

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
                    lease_ms: int, extra: str = "", take: str = "") -> str:
        """Store a run's input (``revision``, over ``expected_revision``; ``-1``: nothing stored)
        and give ``run`` the lease, unless another run's lease is live; ``extra`` (a JSON object)
        holds more keys to store with it. ``take`` (a JSON array of call ids; ``""``: none) takes
        those calls out of the record of calls waiting for approval (:meth:`release` writes it)
        in the same write, kept as ``approvals_taken`` for a continuation of this run: a call is
        taken once, by the one claim that succeeds (the object's input gate holds other calls
        while this one's storage operations run). Answers ``{"ok": true, "revision", "taken":
        {id: [name, arguments]}}`` or ``{"ok": false, "reason": "stale" | "busy", "revision",
        "run"?}`` (nothing taken)."""
        current = await self._revision()
        if current != int(expected_revision):
            return json.dumps({"ok": False, "reason": "stale", "revision": current})
        now = wall_clock_ms()
        lease = await self._lease()
        if lease is not None and lease["run"] != run and lease["expires"] > now:
            return json.dumps({"ok": False, "reason": "busy", "revision": current,
                               "run": lease["run"], "expires_in_ms": int(lease["expires"] - now)})
        expires = now + int(lease_ms)
        taken: dict[str, Any] = {}
        took: dict[str, Any] = {}
        if take:
            waiting = json.loads(str(await self._get("approvals") or "{}"))
            taken = {i: waiting.pop(i) for i in json.loads(take) if i in waiting}
            took = {"approvals": json.dumps(waiting), "approvals_taken": json.dumps(taken)}
        # One put of every key: atomic, so no reader sees a revision without its checkpoint.
        await self.ctx.storage.put(_js_obj({
            "checkpoint": data, "revision": int(revision),
            "lease": json.dumps({"run": run, "expires": expires}),
            "log_run": run, "log_end": "", "log_continues": "", "stop": "", "chat_expires": "",
            # A request's claim starts the count of lost runs continued in a row again; the
            # alarm's claims carry theirs.
            "continuations": 0, **took, **(json.loads(extra) if extra else {})}))
        await self.ctx.storage.setAlarm(expires + ALARM_GRACE_MS)
        # The session keeps the event log of its latest run only.
        self._sql().exec("DELETE FROM events WHERE run != ?", run)
        return json.dumps({"ok": True, "revision": int(revision), "taken": taken})

    async def commit(self, expected_revision: int, revision: int, data: str, run: str,
                     outcome: str, extra: str = "") -> str:
        """A save (``outcome`` ``""``) or the settled checkpoint (``outcome`` names how the run
        ended; the lease is released) of the run holding the lease, with the keys of ``extra``
        (a JSON object) stored in the same write. Refused when the stored
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
        expires = None
        if outcome:
            values["lease"] = ""
            values["last_run"] = json.dumps({"run": run, "outcome": str(outcome)})
            values["continuations"] = 0
            expires = self._expiry()
            if expires is not None:
                values["chat_expires"] = expires
        else:
            values["lease"] = json.dumps({"run": run, "expires": lease["expires"]})
        if extra:
            values.update(json.loads(extra))
        await self.ctx.storage.put(_js_obj(values))
        if expires is not None:
            await self.ctx.storage.setAlarm(expires)
        return json.dumps({"ok": True, "revision": int(revision)})

    def _expiry(self) -> float | None:
        """When the chat's storage goes if no run starts before (``CHAT_TTL_MS`` from now), or
        ``None`` when chats are kept (or the var is invalid: kept, the routes say why)."""
        try:
            ttl = chat_ttl_ms(self.env)
        except HttpError:
            return None
        return None if ttl is None else wall_clock_ms() + ttl

    async def _expire_if_due(self) -> None:
        """The alarm with no run holding the lease: forget the chat -- checkpoint, request,
        saved inputs, approval record, event log -- once its expiry has passed."""
        raw = await self._get("chat_expires")
        if not raw:
            return
        if wall_clock_ms() < float(raw):
            await self.ctx.storage.setAlarm(float(raw))
            return
        await self.ctx.storage.deleteAlarm()
        await self.ctx.storage.deleteAll()

    async def heartbeat(self, run: str, lease_ms: int) -> str:
        """Renew ``run``'s lease (when a third of it has passed since the last renewal). Answers
        ``{"held": bool, "stop": bool}``: whether ``run`` still holds it, and whether a stop was
        asked for (``POST .../stop``)."""
        lease = await self._lease()
        if lease is None or lease["run"] != run:
            return json.dumps({"held": False, "stop": False})
        now = wall_clock_ms()
        if lease["expires"] - now < int(lease_ms) * 2 / 3:
            expires = now + int(lease_ms)
            await self.ctx.storage.put("lease", json.dumps({"run": run, "expires": expires}))
            await self.ctx.storage.setAlarm(expires + ALARM_GRACE_MS)
        return json.dumps({"held": True, "stop": (await self._get("stop")) == run})

    async def request_stop(self) -> str:
        """Ask the live run to stop; it sees the request within a second. Answers the run's id,
        or ``""`` when no run is live."""
        lease = await self._lease()
        if lease is None or lease["expires"] <= wall_clock_ms():
            return ""
        await self.ctx.storage.put("stop", lease["run"])
        return str(lease["run"])

    # -- the CheckpointStore port (checkpoints.py's DurableCheckpointStore), without the lease

    async def store_checkpoint(self, revision: int, data: str) -> str:
        """Store ``data`` as ``revision`` when that is one after the stored revision (any
        revision when none is stored). Answers ``{"ok": bool, "stored": <revision before>}``.
        Lease-free: a run holding the lease finds its next save refused (``stale``)."""
        current = await self._revision()
        if current != -1 and current + 1 != int(revision):
            return json.dumps({"ok": False, "stored": current})
        await self.ctx.storage.put(_js_obj({"checkpoint": data, "revision": int(revision)}))
        return json.dumps({"ok": True, "stored": current})

    async def delete_checkpoint(self) -> bool:
        """Forget the session (checkpoint, lease, event log, alarm); whether one was stored."""
        had = await self._revision() != -1
        await self.ctx.storage.deleteAlarm()
        await self.ctx.storage.deleteAll()
        return had

    async def delete_chat(self) -> str:
        """Forget the chat with all its storage (checkpoint, request, saved inputs, approval
        record, event log, alarm) unless a run is live: answers ``"deleted"``, ``"busy"`` or
        ``"none"`` (nothing stored)."""
        lease = await self._lease()
        if lease is not None and lease["expires"] > wall_clock_ms():
            return "busy"
        if await self._revision() == -1:
            return "none"
        await self.ctx.storage.deleteAlarm()
        await self.ctx.storage.deleteAll()
        return "deleted"

    # -- the event log of the latest run: rows (run, offset, event, data) in the object's SQLite

    def _sql(self) -> Any:
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS events (run TEXT NOT NULL, offset INTEGER NOT NULL, "
                 "event TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run, offset))")
        return sql

    async def append(self, run: str, rows: str) -> None:
        """Store a batch of ``run``'s events: a JSON array of ``[offset, event, data]``."""
        if (await self._get("log_run")) != run:
            return  # a newer run owns the log now
        sql = self._sql()
        for offset, event, data in json.loads(rows):
            sql.exec("INSERT OR REPLACE INTO events (run, offset, event, data) VALUES (?, ?, ?, ?)",
                     run, int(offset), str(event), str(data))

    async def end_log(self, run: str) -> None:
        """``run`` sent its last event (after its final ``done`` or ``error`` was appended)."""
        if (await self._get("log_run")) == run:
            await self.ctx.storage.put("log_end", run)

    async def read_log(self, after: int, limit: int) -> str:
        """The latest run's events after ``after`` (at most ``limit``), and where it stands:
        ``{"run", "events": [[offset, event, data], ...], "ended", "live", "lost", "saved",
        "continues", "logged", "expires"}``; ``run`` is ``""`` when no run was ever logged.
        ``lost``: its lease ran out unreleased (the alarm will continue it). ``saved``: the offset
        of the last event before its last save (a protocol run's continuation repeats the log up
        to there; ``-1``: none). ``continues``: ``{"run", "offset"}`` when this run continues a
        lost one, whose log it repeats up to ``offset``. ``logged``: the run's events so far;
        ``expires``: when its lease runs out (ms; ``0``: it holds none) -- what
        :class:`~bindloop.hosts.chat.follow.Liveness` proves a run alive by."""
        run = await self._get("log_run")
        if not run:
            return json.dumps({"run": "", "events": [], "ended": True, "live": False,
                               "lost": False, "saved": -1, "continues": None, "logged": 0,
                               "expires": 0})
        row = self._sql().exec(
            "SELECT json_group_array(json_array(offset, event, data)) AS j FROM (SELECT offset, "
            "event, data FROM events WHERE run = ? AND offset > ? ORDER BY offset LIMIT ?)",
            str(run), int(after), int(limit)).one()
        logged = self._sql().exec("SELECT COUNT(*) AS n FROM events WHERE run = ?",
                                  str(run)).one()
        lease = await self._lease()
        held = lease is not None and lease["run"] == run
        live = lease is not None and held and lease["expires"] > wall_clock_ms()
        record = await self._get("protocol")
        saved = json.loads(str(record)) if record else {}
        continues = str(await self._get("log_continues") or "")
        was, _, upto = continues.partition(":")
        return json.dumps({"run": str(run), "events": json.loads(str(row.j)),
                           "ended": (await self._get("log_end")) == run, "live": live,
                           "lost": held and not live,
                           "saved": saved.get("offset", -1) - 1 if saved.get("run") == run else -1,
                           "continues": {"run": was, "offset": int(upto)} if was else None,
                           "logged": int(logged.n),
                           "expires": float(lease["expires"]) if held and lease else 0})

    async def protocol_run(self) -> str:
        """What a protocol run (frontends.py) stored for its continuation: ``{"record", "body",
        "fed"}`` -- its record (run, protocol, message id, how many input chunks, the log offset
        and turns at its last save), the request body and the encoder inputs it saved (JSON
        lines) and the calls waiting for approval its claim took (``taken``, as
        :meth:`claim` answers them); ``{}`` when the session holds none."""
        raw = await self._get("protocol")
        if not raw:
            return "{}"
        record = json.loads(str(raw))
        chunks = [str(await self._get(f"fed:{i:06d}") or "") for i in range(record["chunks"])]
        return json.dumps({"record": record, "body": str(await self._get("protocol_body") or ""),
                           "fed": "".join(chunks),
                           "taken": json.loads(str(await self._get("approvals_taken") or "{}"))})

    async def release(self, run: str, outcome: str, record: str = "") -> None:
        """``run`` ended without a settled checkpoint to store (it failed): storage keeps its
        last save, the lease goes, and ``last_run`` says how it ended. ``record`` (a JSON object
        ``{id: [name, arguments]}``; ``""``: none) adds the calls the run suspended on for the
        user's approval to the chat's record, in the same write: no next request can claim the
        chat before the calls it may decide on are recorded."""
        lease = await self._lease()
        if lease is None or lease["run"] != run:
            return
        values: dict[str, Any] = {
            "lease": "", "last_run": json.dumps({"run": run, "outcome": str(outcome)}),
            "continuations": 0}
        if record:
            waiting = json.loads(str(await self._get("approvals") or "{}"))
            waiting.update(json.loads(record))
            values["approvals"] = json.dumps(waiting)
        expires = self._expiry()
        if expires is not None:
            values["chat_expires"] = expires
        await self.ctx.storage.put(_js_obj(values))
        if expires is not None:
            await self.ctx.storage.setAlarm(expires)

    async def alarm(self, *_info: Any) -> None:
        lease = await self._lease()
        if lease is None:
            await self._expire_if_due()
            return
        now = wall_clock_ms()
        if lease["expires"] > now:  # renewed since this alarm was set
            await self.ctx.storage.setAlarm(lease["expires"] + ALARM_GRACE_MS)
            return
        # The run neither renewed nor released its lease: its isolate died (a crash, a deploy, the
        # CPU limit, kill -9). Record it when first seen; after RUN_CONTINUE_MS (time for a client
        # to resume it) go on from its last saved round: the claim there replaces the expired
        # lease, so GET never sees an idle "ready" session in between.
        try:
            config: AgentConfig | None = config_from_env(self.env, self.tools, model_of(self))
        except HttpError:
            config = None  # a misconfigured Worker: the session stays ready for a client
        raw = await self._get("last_run")
        last = json.loads(str(raw)) if raw else {}
        if last.get("run") != lease["run"] or last.get("outcome") != "lost":
            last = {"run": lease["run"], "outcome": "lost", "noticed": now}
            await self.ctx.storage.put("last_run", json.dumps(last))
        resume_at = last.get("noticed", now) + (0 if config is None else config.continue_after_ms)
        if now < resume_at:
            await self.ctx.storage.setAlarm(resume_at)
            return
        continuations = int(await self._get("continuations") or 0)
        record = json.loads(str(await self._get("protocol") or "{}"))
        if record.get("run") == lease["run"] and config is not None and (
                continuations < MAX_CONTINUATIONS):
            await self.ctx.storage.put("continuations", continuations + 1)
            from bindloop.hosts.workers.frontends import continue_lost_run  # frontends imports this module

            await continue_lost_run(self, config, lost_run=lease["run"],
                                    continuation=continuations + 1)
            return
        cp = self._continuable(await self.load(), continuations, config)
        if cp is None or config is None or record.get("run") == lease["run"]:
            # Given up: the session waits for a client (until it expires, if chats do).
            expires = self._expiry()
            await self.ctx.storage.put(_js_obj({"lease": "", "chat_expires": expires or ""}))
            if expires is not None:
                await self.ctx.storage.setAlarm(expires)
            return
        await self.ctx.storage.put("continuations", continuations + 1)
        store = SessionStore(self, cp.execution_id, lease_ms=config.lease_ms)
        store.revision = cp.revision
        claimed = await store.claim(msgspec.structs.replace(cp, revision=cp.revision + 1),
                                    extra={"continuations": continuations + 1})
        await drive(RunLog(self, store.run, None), store, claimed, config, self.env,
                    continued_from=lease["run"])

    @staticmethod
    def _continuable(data: str | None, continuations: int,
                     config: AgentConfig | None) -> LoopCheckpoint | None:
        """The stored checkpoint when a lost run is to be continued: a ``ready`` session with
        turns left, a Worker configured, not yet continued too often."""
        if data is None or config is None or continuations >= MAX_CONTINUATIONS:
            return None
        cp = parse_loop_checkpoint(data)
        if cp.status != "ready" or cp.iterations >= cp.max_iterations:
            return None
        return cp


def recorded_calls(stored: dict[str, Any]) -> dict[str, ToolCall]:
    """The approval record's ``{id: [name, arguments]}`` as the calls the model made."""
    return {str(i): ToolCall(id=str(i), name=str(name), arguments=str(arguments))
            for i, (name, arguments) in stored.items()}


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
        self.taken: dict[str, ToolCall] = {}  # the approval calls the claim took

    @property
    def target(self) -> Any:
        """The Session object (its stub, or itself): where the run's event log goes."""
        return self._target

    @classmethod
    def for_session(cls, env: Any, session_id: str, *, lease_ms: int,
                    identity: str = "") -> SessionStore:
        """The handle on ``session_id``'s object within ``identity``'s space (the object is named
        :func:`~bindloop.hosts.workers.identity.scoped_chat_id`; the single user's ``""`` names
        it by the id alone), so another identity naming the same id reaches another object."""
        ns = env.SESSION
        name = scoped_chat_id(identity, session_id)
        return cls(ns.get(ns.idFromName(name)), session_id, lease_ms=lease_ms)

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

    def _encode(self, cp: LoopCheckpoint) -> str:
        """``cp`` as stored, refused (413) past Durable Object storage's value size limit, which
        workerd does not enforce but Cloudflare does: a clear refusal, not a failed RPC."""
        data = serialize_loop_checkpoint(cp).decode("utf-8")
        if (size := stored_size(data)) > MAX_VALUE_BYTES:
            raise HttpError(413, "checkpoint_too_large", f"session {self.session_id!r} would "
                            f"take {size} bytes of storage, over the {MAX_VALUE_BYTES} a Durable "
                            "Object stores per value; start a new session", revision=self.revision)
        return data

    async def claim(self, cp: LoopCheckpoint, extra: dict[str, Any] | None = None,
                    take: Sequence[str] | None = None) -> LoopCheckpoint:
        """Store ``cp`` (the run's input) and take the lease as run ``r<cp.revision>`` (see
        :meth:`run_for`), with the keys of ``extra`` in the same write; ``take`` names calls to
        take out of the chat's record of calls waiting for approval (then in :attr:`taken`)."""
        data = self._encode(cp)
        run = self.run_for(cp)
        answer = json.loads(str(await self._target.claim(
            self.revision, cp.revision, data, run, self.lease_ms, json.dumps(extra or {}),
            "" if take is None else json.dumps(list(take)))))
        if not answer["ok"]:
            raise self._refused(answer)
        self.revision, self.latest, self.run = cp.revision, cp, run
        self.taken = recorded_calls(answer.get("taken") or {})
        return cp

    @staticmethod
    def run_for(cp: LoopCheckpoint) -> str:
        """The id of the run that claims ``cp``."""
        return f"r{cp.revision}"

    async def commit(self, cp: LoopCheckpoint, outcome: str = "",
                     extra: dict[str, Any] | None = None) -> None:
        """A save of the run (``outcome`` ``""``), or its settled checkpoint (the lease released),
        with the keys of ``extra`` in the same write."""
        data = self._encode(cp)
        answer = json.loads(str(await self._target.commit(self.revision, cp.revision, data,
                                                           self.run, outcome,
                                                           json.dumps(extra or {}))))
        if not answer["ok"]:
            raise self._refused(answer)
        self.revision = cp.revision
        self.latest = cp
        if outcome:
            self.run = ""

    async def heartbeat(self) -> dict[str, bool]:
        answer: dict[str, bool] = json.loads(str(await self._target.heartbeat(self.run,
                                                                              self.lease_ms)))
        return answer

    async def release(self, outcome: str, record: Sequence[ToolCall] = ()) -> None:
        """Give the lease up with ``outcome``, adding ``record`` (the calls the run suspended on
        for approval) to the chat's record in the same write."""
        if self.run:
            run, self.run = self.run, ""
            await self._target.release(run, outcome, json.dumps(
                {c.id: [c.name, c.arguments] for c in record}) if record else "")


LOG_BATCH = 256
"""Events read from the log per call while a reconnected client catches up."""


def last_event_id(header: Any) -> tuple[str, int]:
    """A reconnect's ``Last-Event-ID``: ``"r5:17"`` -> ``("r5", 17)``; absent or not ours ->
    ``("", -1)``: the whole log."""
    run, _, offset = str(header or "").partition(":")
    if not re.fullmatch(r"r\d{1,12}", run) or not offset.isdigit():
        return "", -1
    return run, int(offset)


class Client(Protocol):
    """Where a run's events are streamed live (an :class:`web.EventStream`), if anywhere."""

    def send_encoded(self, event: str, payload: str, event_id: str | None = None) -> None: ...

    async def close(self) -> None: ...


class RunLog:
    """A run's events, each given the next offset: streamed to the connected client (if any)
    with SSE ``id: <run>:<offset>``, and appended to the Session object's event log in batches
    (one RPC in flight; what arrives meanwhile goes in the next), so a client that lost the stream
    reads it again from its ``Last-Event-ID`` (``GET /v1/sessions/{id}/stream``). :meth:`close`
    flushes, marks the log ended and closes the client stream."""

    def __init__(self, target: Any, run: str, client: Client | None) -> None:
        self._target = target
        self.run = run
        self._client = client
        self._next = 0
        self._pending: list[list[Any]] = []
        self._flusher: asyncio.Future[None] | None = None

    @property
    def offset(self) -> int:
        """How many events were sent: the next one's offset."""
        return self._next

    def send(self, event: str, data: Any) -> int:
        """Send and log one event; returns its payload's size in bytes (what a log quota
        counts)."""
        offset, self._next = self._next, self._next + 1
        raw = msgspec.json.encode(data)
        payload = raw.decode()
        if self._client is not None:
            self._client.send_encoded(event, payload, f"{self.run}:{offset}")
        self._pending.append([offset, event, payload])
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return len(raw)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            # The log is best-effort: the object unreachable costs a reconnecting client events,
            # never the run.
            with contextlib.suppress(Exception):
                await self._target.append(self.run, json.dumps(batch))

    async def close(self) -> None:
        if self._flusher is not None:
            await self._flusher
        await self._flush()
        with contextlib.suppress(Exception):
            await self._target.end_log(self.run)
        if self._client is not None:
            await self._client.close()


def _transport_for(provider: Provider, headers: Sequence[tuple[str, str]]) -> FetchTransport:
    return FetchTransport(provider.base_url, headers=headers)


STOP_POLL_MS = 1_000
"""How often a run asks its Session object about its lease and a stop request."""


async def _keep_lease(store: SessionStore, work: asyncio.Future[Any], stopped: list[bool]) -> None:
    """Renew the lease while the run goes; cancel ``work`` when a stop is asked for."""
    while store.run and not work.done():
        await asyncio.sleep(min(STOP_POLL_MS, store.lease_ms / 3) / 1000)
        if not store.run or work.done():
            return
        with contextlib.suppress(Exception):  # the object unreachable: try again next tick
            answer = await store.heartbeat()
            if not answer["held"]:
                return  # given up as lost: the next save is refused and ends the run
            if answer["stop"]:
                stopped[0] = True
                work.cancel()
                return


async def drive(log: RunLog, store: SessionStore, cp: LoopCheckpoint, config: AgentConfig,
                env: Any, *, continued_from: str | None = None) -> None:
    """Run the claimed checkpoint ``cp`` to its end, its events to ``log``: ``session``, the
    ``turn`` stream, then ``done`` or ``error``. Every finished tool round is committed as it
    settles (a run that fails later resumes from there); the settled checkpoint releases the
    lease; a failure releases it with storage at the last save; a stop (``POST .../stop``)
    cancels the run and stores its last save ``aborted``, as a run out of turns is. So does a
    run whose events reach ``MAX_LOG_BYTES`` (:class:`~bindloop.hosts.chat.quota.LogQuota`):
    nothing it sends after is logged, and its stream ends with the ``error`` ``log_full``."""
    opened: dict[str, Any] = {"session_id": store.session_id, "revision": store.revision,
                              "run": store.run}
    if continued_from is not None:
        opened["continues"] = continued_from
    quota = LogQuota(config.max_log_bytes)
    quota.count(log.send("session", opened))
    stopped = [False]
    full = [False]  # the run's log reached the quota: its work was cancelled

    def sink(event: str, data: Any) -> None:
        # Events come from the run's work only, so ``work`` is bound when one arrives.
        if not full[0] and quota.count(log.send(event, data)):
            full[0] = True
            work.cancel()

    keeper: asyncio.Future[None] | None = None
    try:
        model = build_model(config, transport_for=_transport_for,
                            on_turn_event=lambda ev: sink("turn", ev),
                            turn_prefix=f"{cp.execution_id}:{cp.revision}", first_turn=cp.iterations,
                            limit_store=limit_store(env), clock=wall_clock_ms)
        work = asyncio.ensure_future(run_session(cp, model=model, tools=config.tools,
                                                save=store.commit,
                                                on_tool=lambda ev: sink("tool", ev)))
        keeper = asyncio.ensure_future(_keep_lease(store, work, stopped))
        try:
            result = await work
        except asyncio.CancelledError:
            if not (stopped[0] or full[0]):
                raise
            reason = "log_full" if full[0] else "stopped"
            await store.commit(stopped_checkpoint(store.latest or cp), outcome=reason)
            if full[0]:
                LOGGER.error("run %s of session %r was stopped", store.run or "-",
                             store.session_id, exc_info=quota.error())
            why = (": its events reached the log's quota (MAX_LOG_BYTES)" if full[0]
                   else " (POST /v1/sessions/{id}/stop)")
            log.send("error", {"error": reason, "message": f"the run was stopped{why}; the "
                               "session keeps its last saved round and takes a new message",
                               "session_id": store.session_id, "revision": store.revision,
                               "status": "aborted"})
            return
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
        log.send("done", done)
    except (ToolLoopExceededError, TurnBudgetExceededError) as exc:
        try:
            await store.commit(stopped_checkpoint(store.latest or cp), outcome="aborted")
        except HttpError as refused:  # another writer got there first: storage keeps its revision
            log.send("error", error_event(refused, session_id=store.session_id,
                                          revision=store.revision))
        else:
            log.send("error", {"error": "iteration_limit", "message": str(exc),
                               "session_id": store.session_id, "revision": store.revision,
                               "status": "aborted"})
    except Exception as exc:  # a provider or transport failure, a refused save
        LOGGER.error("run %s of session %r failed", store.run or "-", store.session_id,
                     exc_info=exc)
        log.send("error", error_event(exc, session_id=store.session_id, revision=store.revision))
    finally:
        if keeper is not None:
            keeper.cancel()
        with contextlib.suppress(Exception):  # the object unreachable: the lease runs out instead
            await store.release("failed")
        await log.close()
