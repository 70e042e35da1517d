"""Checkpoints, idempotency receipts and rate limits in Redis (optional extra ``bindloop[redis]``:
redis-py's asyncio client; asyncio only).

Every operation that reads and writes is one Lua script, which Redis runs atomically: the
revision fence of :class:`bindloop.stores.CheckpointStore`, the attempt fence of
:class:`bindloop.stores.ToolCallReceiptStore`, and the windows and slots of
:class:`bindloop.stores.LimitStore` cannot interleave with another client's, and a script either
runs whole or not at all — a checkpoint is never half-written. It passes
``bindloop.testing.store_kit``.

Keys live under ``prefix`` (default ``"bindloop:"``); ``{prefix}schema`` holds the layout version,
set on first use: a layout written by a newer bindloop is refused, never misread. One Redis
instance (scripts touch several keys; a Redis Cluster would need them in one hash slot, which
this store does not arrange). Each operation is one command (a script by its SHA, loaded on a
``NOSCRIPT`` refusal) on a connection this store keeps — opened with the URL's settings (database,
credentials, TLS) — and answers in one round trip. Durability is the server's: a checkpoint store
needs the append-only file (``appendonly yes``; ``appendfsync always`` to survive power loss too),
or a restart loses every checkpoint.

Connection failures become :class:`~bindloop.stores.StoreError` naming the operation (the client's
own silent retries are turned off so an unknown outcome is never repeated behind the caller's
back); reads, and a ``save`` (which recognises its own checkpoint if the first try had landed),
retry once. Every command is bounded by ``socket_timeout_s`` (default 10 s; the connect too): a
connection that goes silent mid-command becomes a ``StoreError`` after that long, and since a
script runs whole inside the server, no lock or half-written value outlives it. A server still
loading its dataset after a restart (``LOADING``) refused the command without running it, so any
operation waits for it, up to ``startup_wait_s``, instead of failing. Leases are measured on ``now`` (wall-clock milliseconds by default); concurrency
slots are leased to the store object that took them for ``slot_lease_ms`` and renewed by
``renew_slots()``, so the slots of a killed process come back when their lease ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from bindloop.clock import Clock, epoch_ms
from bindloop.errors import UsageError
from bindloop.loop import BoundaryDecision
from bindloop.run import (
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ReceiptState,
    ToolCallReceiptKey,
)
from bindloop.checkpoints import (
    LoopCheckpoint,
    parse_loop_checkpoint,
)
from bindloop.stores import (
    CheckpointConflictError,
    StoreError,
)

from bindloop.hosts.stores._common import (
    DEFAULT_SLOT_LEASE_MS,
    HeldSlots,
    check_attempt,
    check_lease,
    check_max_bytes,
    check_seconds,
    encode_checkpoint,
    first_line,
    key_parts,
)

__all__ = ("DEFAULT_STARTUP_WAIT_S", "SCHEMA_VERSION", "RedisStore")

SCHEMA_VERSION = 2
DEFAULT_STARTUP_WAIT_S = 30.0
"""How long an operation waits for a server still loading its dataset."""
_RECEIPT_FIELDS = ("status", "attempt", "lease", "result", "error")

_SAVE = """
local cur = redis.call('HGET', KEYS[1], 'revision')
if cur and tonumber(cur) + 1 ~= tonumber(ARGV[1]) then
  if ARGV[3] == '1' and tonumber(cur) == tonumber(ARGV[1])
      and redis.call('HGET', KEYS[1], 'body') == ARGV[2] then
    return {1, cur}
  end
  return {0, cur}
end
redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'body', ARGV[2])
return {1, ARGV[1]}
"""

_CLAIM = """
local attempt = tonumber(ARGV[1])
local st = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'lease')
local current, claimable = 0, true
if st[1] then
  current = tonumber(st[2])
  claimable = st[1] == 'failed' or (st[1] == 'running' and tonumber(ARGV[2]) >= tonumber(st[3]))
end
if not claimable or current ~= attempt - 1 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'running', 'attempt', ARGV[1], 'lease', ARGV[3])
return 1
"""

_RENEW = """
local st = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if st[1] ~= 'running' or tonumber(st[2]) ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
return 1
"""

# ARGV: attempt, status, field ('result' / 'error' / ''), value, outbox value ('' for none)
_SETTLE = """
local st = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if st[1] ~= 'running' or tonumber(st[2]) ~= tonumber(ARGV[1]) then return 0 end
redis.call('HDEL', KEYS[1], 'lease')
redis.call('HSET', KEYS[1], 'status', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
if KEYS[2] then redis.call('RPUSH', KEYS[2], ARGV[5]) end
return 1
"""

# A fresh call recorded completed by attempt 1 (with its outbox value) in one write, leaving the
# fields a claim of attempt 1 then its completion would; an existing receipt is left alone and its
# fields returned. KEYS: receipt (, outbox list). ARGV: result, outbox value ('' for none).
_ONCE = """
local st = redis.call('HMGET', KEYS[1], %s)
if st[1] then return st end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'status', 'completed', 'attempt', '1', 'result', ARGV[1])
if KEYS[2] then redis.call('RPUSH', KEYS[2], ARGV[2]) end
return 1
""" % ", ".join(f"'{field}'" for field in _RECEIPT_FIELDS)

# KEYS: window zset, sequence counter, running total. ARGV: window_ms, limit, amount, now.
# The total is kept beside the window so an admission does not sum the whole window.
_EXPIRE = """
local function expire(window_key, total_key, cutoff)
  local old = redis.call('ZRANGEBYSCORE', window_key, '-inf', cutoff)
  if #old == 0 then return end
  local gone = 0
  for i = 1, #old do gone = gone + tonumber(string.match(old[i], ':(%d+)$')) end
  redis.call('ZREMRANGEBYSCORE', window_key, '-inf', cutoff)
  redis.call('DECRBY', total_key, gone)
end
local function add(window_key, seq_key, total_key, at, amount, window)
  local seq = redis.call('INCR', seq_key)
  redis.call('ZADD', window_key, at, string.format('%016d:%d', seq, amount))
  redis.call('INCRBY', total_key, amount)
  local ttl = math.ceil(window) + 60000
  redis.call('PEXPIRE', window_key, ttl)
  redis.call('PEXPIRE', total_key, ttl)
end
"""

_ADMIT = _EXPIRE + """
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local amount, now = tonumber(ARGV[3]), tonumber(ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) end
expire(KEYS[1], KEYS[3], string.format('%.17g', now - window))
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
local fits
if amount > 0 then fits = used + amount <= limit else fits = used < limit end
if fits then
  if amount > 0 then add(KEYS[1], KEYS[2], KEYS[3], ARGV[4], amount, window) end
  return '0'
end
local items = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local need, freed = used + math.max(amount, 1) - limit, 0
for i = 1, #items, 2 do
  freed = freed + tonumber(string.match(items[i], ':(%d+)$'))
  if freed >= need then
    return string.format('%.17g', math.max(tonumber(items[i + 1]) + window - now, 0.001))
  end
end
return string.format('%.17g', window)
"""

_CHARGE = _EXPIRE + """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[3]) end
add(KEYS[1], KEYS[2], KEYS[3], ARGV[3], tonumber(ARGV[2]), tonumber(ARGV[1]))
return 1
"""

# Slots are members of a zset per key, scored by the lease's end. KEYS: the zset.
# ARGV: limit, now, lease end, slot.
_ENTER = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
return 1
"""

# KEYS: the zset of each held slot. ARGV: now, lease end, then the slots in KEYS order. A slot
# whose lease has ended stays ended, even before an enter has swept it away.
_RENEW_SLOTS = """
for i = 1, #KEYS do
  local score = redis.call('ZSCORE', KEYS[i], ARGV[i + 2])
  if score and tonumber(score) > tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', ARGV[2], ARGV[i + 2])
  end
end
return 1
"""


def _redis() -> Any:
    try:
        import redis.asyncio
        import redis.asyncio.retry
        import redis.backoff
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise UsageError("RedisStore needs redis-py: pip install redis (bindloop's redis extra)") from exc
    return redis


def _num(value: float) -> str:
    return repr(float(value))


class RedisStore:
    """A store on the Redis server at ``url`` (``redis://host:port/db``). Nothing connects until
    the first operation; ``aclose()`` closes the client. ``round_trips`` counts commands sent."""

    name = "redis"

    def __init__(self, url: str, *, prefix: str = "bindloop:", now: Clock = epoch_ms,
                 max_checkpoint_bytes: int | None = None, socket_timeout_s: float = 10.0,
                 slot_lease_ms: float | None = DEFAULT_SLOT_LEASE_MS,
                 startup_wait_s: float = DEFAULT_STARTUP_WAIT_S) -> None:
        if not isinstance(prefix, str):
            raise UsageError(f"prefix must be a str, got {prefix!r}")
        socket_timeout_s = check_seconds("socket_timeout_s", socket_timeout_s)
        self.startup_wait_s = check_seconds("startup_wait_s", startup_wait_s, allow_zero=True)
        self._redis = redis = _redis()
        self.url = url
        self.prefix = prefix
        self.now = now
        self.max_checkpoint_bytes = check_max_bytes(max_checkpoint_bytes)
        self._held = HeldSlots(slot_lease_ms)
        self.round_trips = 0
        self.fenced_writes = 0
        self.client = redis.asyncio.Redis.from_url(
            url, socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s,
            retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0), retry_on_error=[])
        self._scripts = {name: (src, hashlib.sha1(src.encode()).hexdigest()) for name, src in (
            ("save", _SAVE), ("claim", _CLAIM), ("renew", _RENEW), ("settle", _SETTLE),
            ("once", _ONCE), ("admit", _ADMIT), ("charge", _CHARGE), ("enter", _ENTER),
            ("renew_slots", _RENEW_SLOTS))}
        self._idle: list[Any] = []
        self._ready = False

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect()
        await self.client.aclose()

    close = aclose

    async def _call(self, operation: str, script: str | None, keys: list[str], args: list[Any],
                    *, retries: int = 0, command: tuple[Any, ...] = ()) -> Any:
        """Run a script (or one plain ``command``); driver errors become :class:`StoreError`."""
        errors = self._redis.exceptions
        tries_left, waited, pause = retries, 0.0, 0.05
        while True:
            try:
                if not self._ready:
                    await self._ensure_schema()
                if script is None:
                    return await self._send(command)
                source, sha = self._scripts[script]
                try:
                    return await self._send(("EVALSHA", sha, len(keys), *keys, *args))
                except errors.NoScriptError:  # refused without running: load it, send again
                    await self._send(("SCRIPT", "LOAD", source))
                    return await self._send(("EVALSHA", sha, len(keys), *keys, *args))
            except errors.BusyLoadingError as exc:
                # Refused without running (the server is loading its dataset): safe to repeat
                # for any operation, and it costs no retry.
                if waited >= self.startup_wait_s:
                    raise StoreError(self.name, operation, f"{first_line(exc)} (still loading "
                                     f"after startup_wait_s={self.startup_wait_s})") from exc
                pause = min(pause, self.startup_wait_s - waited)
                await anyio.sleep(pause)
                waited += pause
                pause = min(pause * 2, 1.0)
            except (errors.ConnectionError, errors.TimeoutError) as exc:
                if tries_left == 0:
                    raise StoreError(self.name, operation, first_line(exc)) from exc
                tries_left -= 1
                if script == "save":
                    args = [*args[:2], "1"]  # the retry accepts its own landed checkpoint
            except errors.RedisError as exc:  # WRONGTYPE, a script error: not worth retrying
                raise StoreError(self.name, operation, first_line(exc)) from exc

    async def _send(self, command: Sequence[object]) -> Any:
        """One command, one round trip, on an idle connection of this store (or a new one): the
        command packed here and the reply read raw, without the client's per-command machinery
        (retries are off anyway). A connection that fails or is interrupted mid-command is
        closed, never reused; one that got an error reply is in step and goes back."""
        pool = self.client.connection_pool
        conn = self._idle.pop() if self._idle else pool.make_connection()
        self.round_trips += 1
        try:
            # Connected, and not closed by the server while idle (a restart): else a fresh one,
            # before anything is sent — safe for any operation.
            await pool.ensure_connection(conn)
            await conn.send_packed_command(_pack(command), check_health=False)
            reply = await conn.read_response()
        except self._redis.exceptions.ResponseError:
            self._idle.append(conn)
            raise
        except BaseException:
            with anyio.CancelScope(shield=True):
                await conn.disconnect(nowait=True)
            raise
        self._idle.append(conn)
        return reply

    async def _ensure_schema(self) -> None:
        key = f"{self.prefix}schema"
        version = str(SCHEMA_VERSION)
        await self._send(("SET", key, version, "NX"))
        stored = await self._send(("GET", key))
        if stored == b"1":  # version 1 counted slots under ls:*; version 2 leases them (lz:*)
            await self._send(("SET", key, version, "XX"))
            stored = await self._send(("GET", key))
        if stored != str(SCHEMA_VERSION).encode():
            raise StoreError(self.name, "open", f"prefix {self.prefix!r} has store layout version "
                             f"{stored!r}; this bindloop reads version {SCHEMA_VERSION}")
        self._ready = True

    def _cp(self, execution_id: str) -> str:
        return f"{self.prefix}cp:{execution_id}"

    def _rc(self, key: ToolCallReceiptKey) -> str:
        return f"{self.prefix}rc:{msgspec.json.encode(key_parts(key)).decode()}"

    # -- checkpoints -----------------------------------------------------------------------------

    async def load(self, execution_id: str) -> LoopCheckpoint | None:
        data = await self._call("load", None, [], [], retries=1,
                                command=("HGET", self._cp(execution_id), "body"))
        if data is None:
            return None
        if not isinstance(data, bytes):
            raise StoreError(self.name, "load", f"checkpoint {execution_id!r} is stored as "
                             f"{type(data).__name__}, not bytes")
        return parse_loop_checkpoint(data, max_bytes=self.max_checkpoint_bytes,
                                     execution_id=execution_id)

    async def save(self, checkpoint: LoopCheckpoint) -> None:
        data = encode_checkpoint(checkpoint, self.max_checkpoint_bytes)
        answer = await self._call("save", "save", [self._cp(checkpoint.execution_id)],
                                  [checkpoint.revision, data, "0"], retries=1)
        landed, stored = _pair(self.name, "save", answer)
        if not landed:
            raise CheckpointConflictError(checkpoint.execution_id, checkpoint.revision, stored)

    async def delete(self, execution_id: str) -> bool:
        return bool(await self._call("delete", None, [], [],
                                     command=("DEL", self._cp(execution_id))))

    async def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A :data:`~bindloop.checkpoints.CommitFn`: save, then ``"continue"``."""
        await self.save(checkpoint)
        return "continue"

    # -- receipts --------------------------------------------------------------------------------

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        row = await self._call("read", None, [], [], retries=1, command=(
            "HMGET", self._rc(key), *_RECEIPT_FIELDS))
        return self._receipt("read", row)

    def _receipt(self, operation: str, row: object) -> ReceiptState | None:
        """The receipt whose :data:`_RECEIPT_FIELDS` values (``None`` where unset) are ``row``;
        ``None`` when it has no status (no receipt)."""
        if not isinstance(row, list) or len(row) != len(_RECEIPT_FIELDS):
            raise StoreError(self.name, operation, f"unexpected reply {type(row).__name__}")
        if row[0] is None:
            return None
        try:
            status, attempt = row[0].decode(), int(row[1])
            if status == "running":
                return ReceiptRunning(attempt=attempt, lease_expires_at_ms=float(row[2]))
            if status == "completed":
                return ReceiptCompleted(attempt=attempt, result=msgspec.json.decode(row[3]))
            if status == "failed":
                return ReceiptFailed(attempt=attempt, error=None if row[4] is None
                                     else msgspec.json.decode(row[4], type=str))
            raise ValueError(f"unknown status {status!r}")
        except (msgspec.DecodeError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(self.name, operation, f"receipt is unreadable: {exc}") from exc

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        attempt, lease = check_attempt(attempt), check_lease(lease_ms)
        now = self.now()
        return self._fenced(await self._call("claim", "claim", [self._rc(key)],
                                             [attempt, _num(now), _num(now + lease)]))

    async def renew(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        """Extend a lease the caller still owns (not part of the protocol)."""
        attempt, lease = check_attempt(attempt), check_lease(lease_ms)
        return self._fenced(await self._call("renew", "renew", [self._rc(key)],
                                             [attempt, _num(self.now() + lease)]))

    async def complete_with(self, key: ToolCallReceiptKey, attempt: int, result: Any, *,
                            outbox: tuple[str, bytes] | None = None) -> bool:
        """Complete the receipt and, in the same atomic script, append ``outbox[1]`` to the list
        ``outbox[0]`` (under the prefix) — a side effect that lands exactly when the receipt
        does. ``False``: the attempt no longer owns the receipt; nothing was written."""
        attempt = check_attempt(attempt)
        keys = [self._rc(key)] + ([self._list(outbox[0])] if outbox else [])
        args = [attempt, "completed", "result", msgspec.json.encode(result),
                outbox[1] if outbox else b""]
        return self._fenced(await self._call("complete", "settle", keys, args))

    async def complete_once(self, key: ToolCallReceiptKey, result: Any, *,
                            outbox: tuple[str, bytes] | None = None) -> ReceiptState | None:
        """Record a call no attempt has touched as completed by attempt 1 with ``result`` and, in
        the same atomic script, append ``outbox[1]`` to the list ``outbox[0]`` (under the
        prefix), as :meth:`complete_with` does: one round trip, for an effect that lives in this
        Redis (a claim would buy nothing — the receipt and the effect land together or not at
        all). The receipt written is the one ``claim(key, 1, ...)`` then ``complete(key, 1,
        result)`` would leave.

        ``None``: written. A receipt that exists (any status, even a running one whose lease has
        ended) is left alone, the outbox untouched, and returned as :meth:`read` would return it,
        from the same round trip — the caller goes on with
        :func:`~bindloop.run.decide_tool_call_receipt`. A lost connection raises
        :class:`~bindloop.stores.StoreError` without a retry (whether it landed is unknown, as
        for :meth:`complete_with`)."""
        keys = [self._rc(key)] + ([self._list(outbox[0])] if outbox else [])
        args = [msgspec.json.encode(result), outbox[1] if outbox else b""]
        answer = await self._call("complete_once", "once", keys, args)
        if answer == 1:
            return None
        found = self._receipt("complete_once", answer)
        if found is None:
            raise StoreError(self.name, "complete_once", f"unexpected reply {answer!r}")
        return found

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        return await self.complete_with(key, attempt, result)

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        attempt = check_attempt(attempt)
        args = [attempt, "failed", "" if error is None else "error",
                b"" if error is None else msgspec.json.encode(error), b""]
        return self._fenced(await self._call("fail", "settle", [self._rc(key)], args))

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        """One ``SCAN`` over the receipts' keys of the run (their names start with its tenant
        and run), deleting what it finds: for a run that is over (what runs concurrently with
        the scan may be missed)."""
        head = msgspec.json.encode([str(tenant_id), str(run_id)]).decode()[:-1] + ","
        pattern = _glob_literal(f"{self.prefix}rc:{head}") + "*"
        cursor: Any = 0
        deleted = 0
        while True:
            answer = await self._call("delete_run", None, [], [], retries=1, command=(
                "SCAN", cursor, "MATCH", pattern, "COUNT", 1000))
            cursor, keys = answer[0], list(answer[1])
            if keys:
                deleted += int(await self._call("delete_run", None, [], [], retries=1,
                                                command=("DEL", *keys)))
            if int(cursor) == 0:
                return deleted

    def _fenced(self, landed: object) -> bool:
        if landed not in (0, 1):
            raise StoreError(self.name, "receipt write", f"unexpected reply {landed!r}")
        if not landed:
            self.fenced_writes += 1
        return bool(landed)

    # -- limits ----------------------------------------------------------------------------------

    def _lw(self, key: str) -> list[str]:
        return [f"{self.prefix}lw:{key}", f"{self.prefix}lseq", f"{self.prefix}lt:{key}"]

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float:
        answer = await self._call("admit", "admit", self._lw(key),
                                  [_num(window_ms), limit, amount, _num(now)])
        try:
            return float(answer)
        except (TypeError, ValueError) as exc:
            raise StoreError(self.name, "admit", f"unexpected reply {answer!r}") from exc

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        if amount > 0:
            await self._call("charge", "charge", self._lw(key), [_num(window_ms), amount, _num(now)])

    async def enter(self, key: str, limit: int) -> bool:
        held, now = self._held, self.now()
        slot = held.new_slot()
        taken = bool(await self._call("enter", "enter", [self._lz(key)],
                                      [limit, _num(now), _num(held.expiry(now)), slot]))
        if taken:
            held.took(key, slot)
        return taken

    async def leave(self, key: str) -> None:
        slot = self._held.give_back(key)
        if slot is not None:
            await self._call("leave", None, [], [], command=("ZREM", self._lz(key), slot))

    async def renew_slots(self) -> None:
        """Renew the leases of every slot this handle holds (a lapsed one stays lapsed)."""
        held = self._held.all()
        if held:
            now = self.now()
            await self._call("renew_slots", "renew_slots", [self._lz(k) for k, _ in held],
                             [_num(now), _num(self._held.expiry(now)), *(s for _, s in held)])

    def _lz(self, key: str) -> str:
        return f"{self.prefix}lz:{key}"

    async def outbox(self, name: str) -> list[bytes]:
        """The values appended to the outbox list ``name`` so far (see :meth:`complete_with`)."""
        values = await self._call("outbox", None, [], [], retries=1,
                                  command=("LRANGE", self._list(name), 0, -1))
        return list(values)

    def _list(self, name: str) -> str:
        """The key of the outbox list ``name``."""
        return f"{self.prefix}{name}"


def _pack(command: Sequence[object]) -> bytes:
    """``command`` in the Redis protocol (RESP): an array of bulk strings."""
    out = bytearray(b"*%d\r\n" % len(command))
    for part in command:
        data = bytes(part) if isinstance(part, (bytes, bytearray, memoryview)) \
            else str(part).encode()
        out += b"$%d\r\n" % len(data)
        out += data
        out += b"\r\n"
    return bytes(out)


def _pair(store: str, operation: str, answer: Any) -> tuple[bool, int]:
    try:
        landed, stored = answer
        return bool(int(landed)), int(stored)
    except (TypeError, ValueError) as exc:
        raise StoreError(store, operation, f"unexpected reply {answer!r}") from exc


def _glob_literal(text: str) -> str:
    """``text`` as a Redis glob pattern that matches exactly it."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)

