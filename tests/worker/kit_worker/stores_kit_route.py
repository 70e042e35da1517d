"""Test-only routes: bindloop's store conformance kit (``bindloop.testing.store_kit``) against
this Worker's Durable Object stores, run inside workerd where pytest cannot run.

Served only when the Worker has the text binding ``STORE_KIT = "1"`` (the test harness sets it;
the template's wrangler.jsonc does not, so a deployed Worker answers 404).

``POST /_kit/{suite}`` ``{"ns": str, "cases"?: [name, ...]}``
    Runs every case of ``suite`` (``checkpoint``: :class:`DurableCheckpointStore` over
    ``SESSION``; ``receipt``: :class:`DurableReceiptStore` over ``RECEIPTS``; ``limit``: :class:`DurableLimitStore` over ``LIMITS``; ``token``:
    :class:`DurableTokenStore` over ``MCP_TOKENS``), each case in its own namespace under ``ns``,
    and answers ``{"results": [{"name", "outcome", "detail"}, ...]}`` (only the named ``cases``
    when given).
``POST /_kit/{suite}/job`` ``{"ns", "job", "index"}``
    One racer of a several-process case: ``job(store, index)`` on a new handle of the case's
    namespace, answering ``{"result": ...}``. The kit's ``process_runner`` here sends the
    ``count`` racers at once as requests to the ``KIT_RACER_<i>`` services — other Workers
    (isolates, each its own Python) bound to the same Durable Object namespaces — spread round
    robin, so several isolates and several requests in each race one object. Without such a
    binding those cases are skipped.
``POST /_kit/bench`` ``{"ns": str, "n"?: int}``
    Mean milliseconds per round of each store's per-turn calls (bench/do_stores.py).
``POST /_kit/checks`` ``{"ns": str}``
    The Durable Object stores' own contract past the kit's (run leases, stored secrets):
    answers results like the above.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from workers import Response  # type: ignore[import-not-found]

from bindloop.checkpoints import create_loop_checkpoint
from bindloop.hosts.workers.agent import HttpError
from bindloop.stores import StoreError
from bindloop.contracts import UserMessage
from bindloop.hosts.workers.checkpoints import DurableCheckpointStore
from bindloop.hosts.workers.oauth_store import DurableTokenStore
from bindloop.hosts.workers.receipts import DurableReceiptStore
from bindloop.hosts.workers.limits import DurableLimitStore
from bindloop.hosts.workers.sessions import SessionStore
from bindloop.hosts.workers.web import Routes, json_response, read_json

__all__ = ("add_kit_routes",)

SUITES = ("checkpoint", "receipt", "limit", "token")
SLOT_LEASE_SKIP = ("the RateLimiter object leases slots per isolate on its own clock, so two holders "
                   "in one isolate and an injected clock do not exist (lease expiry is the in-memory "
                   "store's code, which the case checks on CPython)")
JOBS = ("race_first_checkpoint", "race_next_checkpoint", "race_claim", "race_complete_once",
        "race_admit", "race_enter")


def _cases(suite: str) -> Mapping[str, Any]:
    # Imported on first use, not at the Worker's start-up: the kit is test-only (and pytest-free:
    # bindloop.testing.store_kit itself imports pytest, which workerd does not have).
    from bindloop.testing import _store_cases, _token_cases

    return {"checkpoint": _store_cases.CHECKPOINT_CASES, "receipt": _store_cases.RECEIPT_CASES,
            "limit": _store_cases.LIMIT_CASES, "token": _token_cases.TOKEN_CASES}[suite]


class KitFactory:
    """Opens a handle of ``suite``'s store in namespace ``ns`` (the kit's ``store_factory``)."""

    def __init__(self, env: Any, suite: str, ns: str) -> None:
        self.env, self.suite, self.ns = env, suite, ns

    def __call__(self, *, max_checkpoint_bytes: int | None = None, now: Any = None,
                 slot_lease_ms: float | None = None) -> Any:
        if slot_lease_ms is not None:
            # The object leases slots per isolate on its own clock: two holders in one isolate
            # and an injected clock, which the slot-lease case needs, do not exist here.
            from bindloop.testing._case_runner import CaseSkipped

            raise CaseSkipped(SLOT_LEASE_SKIP)
        if self.suite == "receipt":
            return DurableReceiptStore(self.env.RECEIPTS, prefix=self.ns + "/", now=now)
        if self.suite == "checkpoint":
            return DurableCheckpointStore(self.env.SESSION, prefix=self.ns + "/",
                                          max_checkpoint_bytes=max_checkpoint_bytes)
        if self.suite == "limit":
            return DurableLimitStore(self.env.LIMITS, name=self.ns)
        return DurableTokenStore(self.env.MCP_TOKENS, self.ns)


def _racers(env: Any) -> list[Any]:
    found: list[Any] = []
    while (racer := getattr(env, f"KIT_RACER_{len(found)}", None)) is not None:
        found.append(racer)
    return found


def process_runner(env: Any) -> Callable[..., Awaitable[list[Any]]] | None:
    racers = _racers(env)
    if not racers:
        return None

    async def run(factory: KitFactory, job: Callable[..., Any], count: int) -> list[Any]:
        async def one(index: int) -> Any:
            body = json.dumps({"ns": factory.ns, "job": job.__name__, "index": index})
            resp = await racers[index % len(racers)].fetch(
                f"http://kit/_kit/{factory.suite}/job", method="POST", body=body)
            text = str(await resp.text())
            if int(resp.status) != 200:
                raise AssertionError(f"racer {index} answered {int(resp.status)}: {text[:500]}")
            answer = json.loads(text)
            isolates.add(answer["isolate"])
            return answer["result"]

        isolates: set[str] = set()
        results = list(await asyncio.gather(*(one(i) for i in range(count))))
        # The race is only worth its name if it crossed isolates: say so when it did not.
        assert len(isolates) == min(count, len(racers)), isolates
        return results

    return run


def _enabled(owner: Any) -> None:
    if str(getattr(owner.env, "STORE_KIT", "")) != "1":
        raise HttpError(404, "not_found", "no such route")


def _suite(match: re.Match[str]) -> str:
    suite = match.group("suite")
    if suite not in SUITES:
        raise HttpError(404, "not_found", f"no store kit suite {suite!r}")
    return str(suite)


def _namespace(body: dict[str, Any]) -> str:
    ns = body.get("ns")
    if not isinstance(ns, str) or not ns:
        raise HttpError(400, "invalid_field", "field 'ns' must be a non-empty string", field="ns")
    return ns


def _report(results: list[Any]) -> Response:
    return json_response(200, {"results": [msgspec.to_builtins(r) for r in results]})


async def run_suite(owner: Any, request: Any, match: re.Match[str]) -> Response:
    _enabled(owner)
    suite, body = _suite(match), await read_json(request)
    ns, only = _namespace(body), body.get("cases")
    from bindloop.testing._store_cases import run_store_cases

    cases = {n: c for n, c in _cases(suite).items() if only is None or n in only}
    results = await run_store_cases(
        cases, lambda name: KitFactory(owner.env, suite, f"{ns}/{name}"),
        process_runner=process_runner(owner.env))
    return _report(results)


async def run_job(owner: Any, request: Any, match: re.Match[str]) -> Response:
    _enabled(owner)
    suite, body = _suite(match), await read_json(request)
    if body.get("job") not in JOBS:
        raise HttpError(400, "invalid_field", "unknown job", field="job")
    from bindloop.testing import _store_cases

    job = getattr(_store_cases, str(body["job"]))
    store = KitFactory(owner.env, suite, _namespace(body))()
    return json_response(200, {"result": await job(store, int(body["index"])),
                               "isolate": str(getattr(owner.env, "KIT_ISOLATE", "main"))})


# ---- past the kit: the run lease over the same objects, and secrets in storage ------------------

async def _claims_race_one_winner(handles: Any) -> None:
    """Six runs claim one session at once through SessionStore (the routes' path): one gets the
    lease, every other is refused (409) and nothing they sent is stored."""
    env, ns = handles.factory.env, handles.factory.ns
    cp = create_loop_checkpoint(execution_id=ns, max_iterations=4,
                                messages=[UserMessage(content="hi")])
    stores = [SessionStore.for_session(env, ns, lease_ms=60_000) for _ in range(6)]

    async def claim(i: int) -> str:
        try:
            await stores[i].claim(msgspec.structs.replace(cp, revision=i))
        except HttpError as exc:
            return exc.code
        return "won"

    outcomes = await asyncio.gather(*(claim(i) for i in range(6)))
    assert outcomes.count("won") == 1, outcomes
    assert set(outcomes) <= {"won", "stale_revision", "run_in_progress"}, outcomes
    winner = outcomes.index("won")
    stored = await DurableCheckpointStore(env.SESSION).load(ns)
    assert stored is not None and stored.revision == winner, (stored, winner)
    assert await DurableCheckpointStore(env.SESSION).delete(ns) is True  # and its alarm


async def _lease_free_save_fences_the_run(handles: Any) -> None:
    """A DurableCheckpointStore save over a session a run holds: the run's next save is
    refused as stale (one writer per revision, whichever path it came by)."""
    env, ns = handles.factory.env, handles.factory.ns
    cp = create_loop_checkpoint(execution_id=ns, max_iterations=4,
                                messages=[UserMessage(content="hi")])
    run = SessionStore.for_session(env, ns, lease_ms=60_000)
    await run.claim(cp)
    await DurableCheckpointStore(env.SESSION).save(msgspec.structs.replace(cp, revision=1))
    try:
        await run.commit(msgspec.structs.replace(cp, revision=1))
    except HttpError as exc:
        assert exc.code == "stale_revision", exc.body()
    else:
        raise AssertionError("the run's save landed over another writer's")
    assert await DurableCheckpointStore(env.SESSION).delete(ns) is True
    assert await run.load() is None


async def _stored_tokens_that_do_not_decode(handles: Any) -> None:
    """Corrupt stored tokens: a StoreError that names the operation, never the stored value."""
    env, ns = handles.factory.env, handles.factory.ns
    stub = env.MCP_TOKENS.get(env.MCP_TOKENS.idFromName(ns))
    await stub.write("tokens", '{"access_token": 7, "refresh_token": "rt-SECRET"}')
    await stub.write("client", '{"client_secret": "cs-SECRET"')
    store = DurableTokenStore(env.MCP_TOKENS, ns)
    for load in (store.load_tokens, store.load_client):
        try:
            await load()
        except StoreError as exc:
            shown = f"{exc!s} {exc!r} {exc.__cause__!r} {exc.__context__!r}"
            assert "SECRET" not in shown and "load_" in shown, shown
        else:
            raise AssertionError("corrupt stored tokens loaded")


async def _large_checkpoints(handles: Any) -> None:
    """A long conversation (1.5 MB) round trips; one past Durable Object storage's 2 MB per
    value is refused before the call, typed, and the stored checkpoint stays what it was; a run
    (SessionStore) is refused a 413 the same way."""
    env, ns = handles.factory.env, handles.factory.ns
    store = DurableCheckpointStore(env.SESSION, prefix=ns + "/")
    cp = create_loop_checkpoint(execution_id="long", max_iterations=4,
                                messages=[UserMessage(content="x" * 1_500_000)])
    await store.save(cp)
    assert await store.load("long") == cp
    too_big = msgspec.structs.replace(cp, revision=1, messages=[
        UserMessage(content="\u00e9\U0001f600" * 400_000)])  # 1.2 M chars, two bytes each
    try:
        await store.save(too_big)
    except StoreError as exc:
        assert exc.operation == "save" and "2000000" in str(exc), str(exc)
    else:
        raise AssertionError("a checkpoint over 2 MB was sent to storage")
    assert await store.load("long") == cp
    run = SessionStore.for_session(env, ns + "-run", lease_ms=60_000)  # the routes' path too
    try:
        await run.claim(msgspec.structs.replace(too_big, revision=0))
    except HttpError as exc:
        assert (exc.status, exc.code) == (413, "checkpoint_too_large"), exc.body()
    else:
        raise AssertionError("a run claimed a session with a checkpoint over 2 MB")
    assert await run.load() is None and run.run == ""


class _FencedOutside(DurableCheckpointStore):
    """A defective store for the check below: the revision check made in the caller (read, then
    an unconditional write), where the object cannot serialise it."""

    async def save(self, checkpoint: Any) -> None:
        from bindloop.checkpoints import serialize_loop_checkpoint
        from bindloop.stores import CheckpointConflictError

        stored = await self.load(checkpoint.execution_id)
        if stored is not None and stored.revision + 1 != checkpoint.revision:
            raise CheckpointConflictError(checkpoint.execution_id, checkpoint.revision,
                                          stored.revision)
        stub = self._stub(checkpoint.execution_id)
        await stub.delete_checkpoint()
        await stub.store_checkpoint(checkpoint.revision,
                                    serialize_loop_checkpoint(checkpoint).decode("utf-8"))


async def _a_fence_outside_the_object_fails_the_kit(handles: Any) -> None:
    """The kit's race catches a store that checks the revision outside the object."""
    from bindloop.testing._store_cases import StoreHandles, checkpoint_concurrent_writers_one_wins
    from bindloop.testing._store_cases import run_case

    env, ns = handles.factory.env, handles.factory.ns
    racy = StoreHandles(lambda **_: _FencedOutside(env.SESSION, prefix=ns + "/"))
    result = await run_case("racy", checkpoint_concurrent_writers_one_wins, racy)
    assert result.outcome == "failed" and "AssertionError" in result.detail, result


class _SwapOutside(DurableTokenStore):
    """A defective token store for the check below: the compare made in the caller (load, then
    an unconditional write), two RPCs the object cannot serialise."""

    async def swap_tokens(self, tokens: Any, *, expected: Any) -> bool:
        if await self.load_tokens() != expected:
            return False
        await self.save_tokens(tokens)
        return True


async def _a_swap_outside_the_object_fails_the_kit(handles: Any) -> None:
    """The kit's token race catches a compare-and-swap made outside the object."""
    from bindloop.testing._store_cases import StoreHandles, run_case
    from bindloop.testing._token_cases import token_store_swap_race_has_one_winner

    env, ns = handles.factory.env, handles.factory.ns
    racy = StoreHandles(lambda **_: _SwapOutside(env.MCP_TOKENS, ns + "/swap-outside"))
    result = await run_case("racy", token_store_swap_race_has_one_winner, racy)
    assert result.outcome == "failed" and "swaps landed" in result.detail, result


async def _outbox_lands_with_its_receipt_once(handles: Any) -> None:
    """``complete_once`` with an outbox entry: the receipt and the entry land together, once; a
    call whose receipt exists (completed, or running with its lease ended) writes neither and
    answers the receipt; entries keep their order, outboxes their names; ``delete_run`` counts
    receipts, not entries, and empties both."""
    from bindloop.run import ReceiptCompleted, ReceiptRunning, ToolCallReceiptKey

    env, ns = handles.factory.env, handles.factory.ns
    store = DurableReceiptStore(env.RECEIPTS, prefix=ns + "/", now=lambda: 1_000.0)

    def key(n: int) -> Any:
        return ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send", args_hash=f"h{n}")

    assert await store.complete_once(key(1), {"sent": 1}, outbox=("mail", "to a")) is None
    assert await store.complete_once(key(2), {"sent": 2}, outbox=("mail", "to b")) is None
    assert await store.complete_once(key(3), {"sent": 3}, outbox=("mail2", "other")) is None
    assert await store.complete_once(key(4), 4) is None  # no entry at all
    again = await store.complete_once(key(1), {"sent": 9}, outbox=("mail", "to a, again"))
    assert again == ReceiptCompleted(attempt=1, result={"sent": 1}), again
    assert await store.claim(key(5), 1, 10.0)
    running = await store.complete_once(key(5), "late", outbox=("mail", "late"))
    assert running == ReceiptRunning(attempt=1, lease_expires_at_ms=1_010.0), running
    assert await store.outbox("t", "r", "mail") == ["to a", "to b"]
    assert await store.outbox("t", "r", "mail2") == ["other"]
    assert await store.outbox("t", "r", "mai") == [] and await store.outbox("t", "x", "mail") == []
    assert await store.read(key(4)) == ReceiptCompleted(attempt=1, result=4)
    try:
        await store.complete_once(key(6), 6, outbox=("", "nameless"))
    except Exception as exc:  # noqa: BLE001 - the type is checked by name below
        assert type(exc).__name__ == "UsageError", exc
    else:
        raise AssertionError("an outbox without a name was accepted")
    assert await store.read(key(6)) is None
    assert await store.delete_run("t", "r") == 5
    assert await store.outbox("t", "r", "mail") == [] and await store.read(key(1)) is None


CHECKS: Mapping[str, Callable[[Any], Awaitable[None]]] = {
    case.__name__.lstrip("_"): case for case in (
        _claims_race_one_winner, _lease_free_save_fences_the_run,
        _stored_tokens_that_do_not_decode, _large_checkpoints,
        _a_fence_outside_the_object_fails_the_kit, _a_swap_outside_the_object_fails_the_kit,
        _outbox_lands_with_its_receipt_once)}


async def run_checks(owner: Any, request: Any, match: re.Match[str]) -> Response:
    _enabled(owner)
    ns = _namespace(await read_json(request))
    from bindloop.testing._store_cases import run_store_cases

    return _report(await run_store_cases(
        CHECKS, lambda name: KitFactory(owner.env, "checkpoint", f"{ns}-{name}")))


async def run_bench(owner: Any, request: Any, match: re.Match[str]) -> Response:
    """``{"ns", "n"}``: ``n`` rounds of each store's per-turn calls, one after another; answers
    the mean milliseconds per round of each (``Date.now()``, which workerd advances with I/O:
    every round awaits the object, so the figures are wall time in ms steps)."""
    import js  # type: ignore[import-not-found]

    from bindloop.stores import OAuthTokens
    from bindloop.run import ToolCallReceiptKey

    _enabled(owner)
    body = await read_json(request)
    ns, n = _namespace(body), int(body.get("n", 100))
    env = owner.env
    cps = DurableCheckpointStore(env.SESSION, prefix=ns + "/")
    receipts = DurableReceiptStore(env.RECEIPTS, prefix=ns + "/")
    limits = DurableLimitStore(env.LIMITS, name=ns)
    tokens = DurableTokenStore(env.MCP_TOKENS, ns)
    cp = create_loop_checkpoint(execution_id="bench", max_iterations=4,
                                messages=[UserMessage(content="x" * 4000)])
    out: dict[str, float] = {}

    async def timed(name: str, round_: Callable[[int], Awaitable[None]]) -> None:
        t0 = float(js.Date.now())
        for i in range(n):
            await round_(i)
        out[name] = (float(js.Date.now()) - t0) / n

    async def checkpoint(i: int) -> None:
        await cps.save(msgspec.structs.replace(cp, revision=i))

    async def load(i: int) -> None:
        await cps.load("bench")

    async def receipt(i: int) -> None:
        key = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash=str(i))
        await receipts.read(key)
        await receipts.claim(key, 1, 60_000.0)
        await receipts.complete(key, 1, {"charged": i})

    async def once(i: int) -> None:
        key = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="once", args_hash=str(i))
        assert await receipts.complete_once(key, {"charged": i}, outbox=("ledger", str(i))) is None

    async def limit(i: int) -> None:
        await limits.enter("slots", 1_000_000)
        await limits.admit("rpm", 60_000.0, 1_000_000, 1, float(js.Date.now()))
        await limits.leave("slots")

    async def token(i: int) -> None:
        await tokens.save_tokens(OAuthTokens(access_token=f"at-{i}"))
        await tokens.load_tokens()

    await timed("checkpoint save (4 kB)", checkpoint)
    await timed("checkpoint load", load)
    await timed("receipt read + claim + complete", receipt)
    await timed("receipt complete_once with an outbox entry", once)
    await timed("limit enter + admit + leave", limit)
    await timed("token save + load", token)
    return json_response(200, {"ms_per_round": out, "rounds": n})


def add_kit_routes(routes: Routes) -> None:
    routes.add("POST", "/_kit/bench", run_bench)
    routes.add("POST", "/_kit/checks", run_checks)
    routes.add("POST", r"/_kit/(?P<suite>[a-z]+)", run_suite)
    routes.add("POST", r"/_kit/(?P<suite>[a-z]+)/job", run_job)
