"""The ASGI chat host's shared state in Redis (optional extra ``bindloop[redis]``):
:class:`RedisRunLogs`, a :class:`~bindloop.hosts.asgi.run_logs.ContinuableRunLogs` any number of
host processes share, and :class:`RedisPendingApprovals`, the
:class:`~bindloop.stores.PendingApprovals` whose decisions are taken once across them. The
semantics are :class:`~bindloop.hosts.asgi.run_logs.SqliteRunLogs`' and
:class:`~bindloop.hosts.asgi.approvals.SqlitePendingApprovals`' (the same tests run against all
three stores). Every operation that reads and writes is one Lua script, which Redis runs whole
and alone: a second run of a chat is refused while its latest run's lease is live
(:class:`~bindloop.stores.RunBusyError`), exactly one process takes over a lost run
(:meth:`~RedisRunLogs.take_over`), a decision is taken once (:meth:`RedisPendingApprovals.take`).
Ended runs are pruned at each ``begin`` by age, count and bytes (sorted sets of the ended runs and
a running total of their bytes: no scan); a running run never is.

The ports are synchronous (a run's frames are written from its runner's ``emit`` callback, and a
save lands before the run goes on), so these classes talk through redis-py's synchronous client
(the same package as :class:`~bindloop.hosts.stores.redis.RedisStore`'s asyncio one): each call
blocks the event loop for one round trip, as the SQLite store's writes do. Keep the server near
the host.

Keys live under ``prefix`` (default ``"bindloop:"``; they can share a ``RedisStore``'s): ``chat:``
(a chat's runs), ``run:``, ``events:`` and ``save:`` (one run's), ``running``, ``ended``,
``ended_started``, ``ended_bytes``, ``ended_saves`` (ended runs whose request and save the next
``begin`` drops), ``run_seq``; ``pending:``, ``pending_chats`` and
``pending_seq`` for approvals; ``chat-schema`` holds the layout version
(:data:`CHAT_SCHEMA_VERSION`, set on first use: keys written by another layout are refused with a
:class:`~bindloop.stores.StoreError`, never misread). The scripts name keys they build from the prefix, so this needs one
Redis instance (not a Cluster). Durability is the server's (``appendonly yes`` for logs that
outlive a Redis restart). Every command is bounded by ``socket_timeout_s``; a driver failure is a
:class:`~bindloop.stores.StoreError` naming the operation (the client's own retries are off, so an
unknown outcome is never repeated). A pooled connection the server closed while it was idle (a
restart between two calls) is replaced before anything is sent on it; a server still loading its
dataset (``LOADING``) is a ``StoreError`` (a synchronous call does not wait it out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from bindloop.contracts import ToolCall
from bindloop.errors import UsageError
from bindloop.hosts.asgi.run_logs import Continuation
from bindloop.hosts.stores._common import check_seconds, first_line
from bindloop.stores import RunBusyError, RunRecord, RunStatus, StoreError

__all__ = ("CHAT_SCHEMA_VERSION", "RedisPendingApprovals", "RedisRunLogs")

CHAT_SCHEMA_VERSION = 1
"""The layout of the run-log and pending-approval keys this bindloop reads."""

# ARGV[1] is the key prefix in every script.
_LIB = """
local P = ARGV[1]
local function runk(id) return P .. 'run:' .. id end
local function chatk(protocol, chat) return P .. 'chat:' .. protocol .. ':' .. chat end
local function latest(protocol, chat)
  return redis.call('ZRANGE', chatk(protocol, chat), -1, -1)[1]
end
-- keep_save: what the run stored to be continued stays until the next begin (ended_saves).
local function close(id, status, keep_save)
  local h = redis.call('HMGET', runk(id), 'seq', 'started', 'bytes')
  redis.call('HSET', runk(id), 'status', status)
  redis.call('ZREM', P .. 'running', id)
  redis.call('ZADD', P .. 'ended', h[1], id)
  redis.call('ZADD', P .. 'ended_started', h[2], id)
  redis.call('INCRBY', P .. 'ended_bytes', h[3])
  if keep_save then
    if redis.call('EXISTS', P .. 'save:' .. id) == 1 then redis.call('SADD', P .. 'ended_saves', id) end
  else
    redis.call('DEL', P .. 'save:' .. id)
  end
end
local function forget(id)
  local h = redis.call('HMGET', runk(id), 'status', 'bytes', 'chat', 'protocol')
  if not h[1] then return end
  if h[1] == 'running' then
    redis.call('ZREM', P .. 'running', id)
  elseif redis.call('ZREM', P .. 'ended', id) == 1 then
    redis.call('DECRBY', P .. 'ended_bytes', h[2])
  end
  redis.call('ZREM', P .. 'ended_started', id)
  redis.call('SREM', P .. 'ended_saves', id)
  redis.call('ZREM', chatk(h[4], h[3]), id)
  redis.call('DEL', runk(id), P .. 'events:' .. id, P .. 'save:' .. id)
end
local function insert(id, chat, protocol, now, lease)
  local seq = redis.call('INCR', P .. 'run_seq')
  redis.call('HSET', runk(id), 'chat', chat, 'protocol', protocol, 'status', 'running',
             'seq', seq, 'lease', lease, 'stop', 0, 'started', now, 'cat', 0, 'bytes', 0)
  redis.call('ZADD', P .. 'running', seq, id)
  redis.call('ZADD', chatk(protocol, chat), seq, id)
end
local function record(id)
  local h = redis.call('HMGET', runk(id), 'chat', 'protocol', 'status', 'lease', 'stop', 'cby',
                       'cat')
  if not h[1] then return false end
  local s = redis.call('HMGET', P .. 'save:' .. id, 'claim', 'checkpoint', 'offset')
  local saved = -1
  if s[1] then saved = 0 end
  if s[2] then saved = tonumber(s[3]) end
  return {id, h[1], h[2], h[3], redis.call('LLEN', P .. 'events:' .. id), h[4], h[5],
          h[6] or '', h[7], saved}
end
"""

# ARGV: prefix, run, chat, protocol, now, lease, cutoff (started before: pruned), keep, max bytes
_BEGIN = _LIB + """
if redis.call('EXISTS', runk(ARGV[2])) == 1 then return {'exists', ARGV[2]} end
local last = latest(ARGV[4], ARGV[3])
if last then
  local h = redis.call('HMGET', runk(last), 'status', 'lease')
  if h[1] == 'running' then
    if tonumber(h[2]) > tonumber(ARGV[5]) then return {'busy', last} end
    close(last, 'interrupted')
  end
end
for _, id in ipairs(redis.call('SMEMBERS', P .. 'ended_saves')) do
  redis.call('DEL', P .. 'save:' .. id)
end
redis.call('DEL', P .. 'ended_saves')
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'ended_started', '-inf', '(' .. ARGV[7])) do
  forget(id)
end
local keep = tonumber(ARGV[8])
local n = redis.call('ZCARD', P .. 'ended')
if n > keep then
  for _, id in ipairs(redis.call('ZRANGE', P .. 'ended', 0, n - keep - 1)) do forget(id) end
end
while tonumber(redis.call('GET', P .. 'ended_bytes') or '0') > tonumber(ARGV[9]) do
  local oldest = redis.call('ZRANGE', P .. 'ended', 0, 0)[1]
  if not oldest then break end
  forget(oldest)
end
insert(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
return {'ok', ARGV[2]}
"""

# ARGV: prefix, run, payload. Returns the frame's offset, -1 when the run has no log.
_APPEND = _LIB + """
local status = redis.call('HGET', runk(ARGV[2]), 'status')
if not status then return -1 end
redis.call('HINCRBY', runk(ARGV[2]), 'bytes', string.len(ARGV[3]))
if status ~= 'running' and redis.call('ZSCORE', P .. 'ended', ARGV[2]) then
  redis.call('INCRBY', P .. 'ended_bytes', string.len(ARGV[3]))
end
return redis.call('RPUSH', P .. 'events:' .. ARGV[2], ARGV[3]) - 1
"""

# ARGV: prefix, run, lease. Returns 1 when a stop was requested.
_RENEW = _LIB + """
if redis.call('EXISTS', runk(ARGV[2])) == 0 then return 0 end
redis.call('HSET', runk(ARGV[2]), 'lease', ARGV[3])
return tonumber(redis.call('HGET', runk(ARGV[2]), 'stop'))
"""

# ARGV: prefix, run, field, value: set one field of an existing run.
_SET = _LIB + """
if redis.call('EXISTS', runk(ARGV[2])) == 1 then redis.call('HSET', runk(ARGV[2]), ARGV[3], ARGV[4]) end
return 0
"""

# ARGV: prefix, run, status
_END = _LIB + """
local status = redis.call('HGET', runk(ARGV[2]), 'status')
if not status then return 0 end
if status == 'running' then close(ARGV[2], ARGV[3])
else
  redis.call('HSET', runk(ARGV[2]), 'status', ARGV[3])
  redis.call('DEL', P .. 'save:' .. ARGV[2])
end
return 1
"""

# ARGV: prefix, run, claim
_CLAIM = _LIB + """
local status = redis.call('HGET', runk(ARGV[2]), 'status')
if not status then return 0 end
redis.call('DEL', P .. 'save:' .. ARGV[2])
redis.call('HSET', P .. 'save:' .. ARGV[2], 'claim', ARGV[3], 'fed', '', 'offset', 0)
if status ~= 'running' then redis.call('SADD', P .. 'ended_saves', ARGV[2]) end
return 1
"""

# ARGV: prefix, run, checkpoint, fed (appended), offset
_SAVE = _LIB + """
local k = P .. 'save:' .. ARGV[2]
if redis.call('EXISTS', k) == 0 then return 0 end
local fed = redis.call('HGET', k, 'fed') or ''
redis.call('HSET', k, 'checkpoint', ARGV[3], 'fed', fed .. ARGV[4], 'offset', ARGV[5])
return 1
"""

# ARGV: prefix, now. The running runs with a claim whose lease ran out, oldest first.
_LOST = _LIB + """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'running', 0, -1)) do
  local lease = redis.call('HGET', runk(id), 'lease')
  if lease and tonumber(lease) <= tonumber(ARGV[2])
      and redis.call('EXISTS', P .. 'save:' .. id) == 1 then
    table.insert(out, id)
  end
end
return out
"""

# ARGV: prefix, now. Close the running runs whose lease ran out as interrupted.
_RECOVER = _LIB + """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'running', 0, -1)) do
  if tonumber(redis.call('HGET', runk(id), 'lease')) <= tonumber(ARGV[2]) then
    close(id, 'interrupted', true)
    table.insert(out, id)
  end
end
return out
"""

# ARGV: prefix, run, new run, now, lease.
# Returns {claim, has checkpoint, checkpoint, fed, offset} or 0.
_TAKE_OVER = _LIB + """
local old, new = ARGV[2], ARGV[3]
if redis.call('EXISTS', runk(new)) == 1 then return redis.error_reply('run ' .. new .. ' exists') end
local h = redis.call('HMGET', runk(old), 'chat', 'protocol', 'status', 'lease')
if not h[1] or h[3] ~= 'running' or tonumber(h[4]) > tonumber(ARGV[4]) then return 0 end
local savek = P .. 'save:' .. old
if redis.call('EXISTS', savek) == 0 then return 0 end
if latest(h[2], h[1]) ~= old then return 0 end
local s = redis.call('HMGET', savek, 'claim', 'checkpoint', 'fed', 'offset')
local offset, has = 0, 0
if s[2] then offset, has = tonumber(s[4]), 1 end
redis.call('RENAME', savek, P .. 'save:' .. new)
redis.call('HSET', runk(old), 'cby', new, 'cat', offset)
close(old, 'continued')
insert(new, h[1], h[2], ARGV[4], ARGV[5])
return {s[1], has, s[2] or '', s[3] or '', offset}
"""

# ARGV: prefix, chat, protocol, now. Returns {'busy', run} or {'ok', how many}.
_DELETE_CHAT = _LIB + """
local runs = redis.call('ZRANGE', chatk(ARGV[3], ARGV[2]), 0, -1)
local last = runs[#runs]
if last then
  local h = redis.call('HMGET', runk(last), 'status', 'lease')
  if h[1] == 'running' and tonumber(h[2]) > tonumber(ARGV[4]) then return {'busy', last} end
end
for _, id in ipairs(runs) do forget(id) end
return {'ok', #runs}
"""

# ARGV: prefix, run
_RECORD = _LIB + "return record(ARGV[2])"

# ARGV: prefix, chat, protocol
_LATEST = _LIB + """
local last = latest(ARGV[3], ARGV[2])
if not last then return false end
return record(last)
"""

# ARGV: prefix, chat, max chats, then (call id, encoded call) pairs.
_PENDING_RECORD = """
local P = ARGV[1]
local k = P .. 'pending:' .. ARGV[2]
for i = 4, #ARGV, 2 do redis.call('HSET', k, ARGV[i], ARGV[i + 1]) end
if redis.call('EXISTS', k) == 1 then
  redis.call('ZADD', P .. 'pending_chats', redis.call('INCR', P .. 'pending_seq'), ARGV[2])
end
local n = redis.call('ZCARD', P .. 'pending_chats')
local max = tonumber(ARGV[3])
if n > max then
  for _, chat in ipairs(redis.call('ZRANGE', P .. 'pending_chats', 0, n - max - 1)) do
    redis.call('DEL', P .. 'pending:' .. chat)
    redis.call('ZREM', P .. 'pending_chats', chat)
  end
end
return 0
"""

# ARGV: prefix, chat, call id. Returns the encoded call, or false.
_PENDING_TAKE = """
local P = ARGV[1]
local k = P .. 'pending:' .. ARGV[2]
local call = redis.call('HGET', k, ARGV[3])
if not call then return false end
redis.call('HDEL', k, ARGV[3])
if redis.call('EXISTS', k) == 0 then redis.call('ZREM', P .. 'pending_chats', ARGV[2]) end
return call
"""

# ARGV: prefix, chat. Returns how many calls it waited on.
_PENDING_FORGET = """
local P = ARGV[1]
local n = redis.call('HLEN', P .. 'pending:' .. ARGV[2])
redis.call('DEL', P .. 'pending:' .. ARGV[2])
redis.call('ZREM', P .. 'pending_chats', ARGV[2])
return n
"""

_CALL = msgspec.json.Decoder(tuple[str, str])


def _redis_sync() -> Any:
    try:
        import redis
        import redis.backoff
        import redis.retry
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise UsageError("RedisRunLogs needs redis-py: pip install redis (bindloop's redis "
                         "extra)") from exc
    return redis



def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Scripts:
    """A synchronous client of the server at ``url`` and the scripts it runs; driver errors
    become :class:`~bindloop.stores.StoreError`."""

    def __init__(self, url: str, prefix: str, socket_timeout_s: float,
                 scripts: dict[str, str]) -> None:
        if not isinstance(prefix, str):
            raise UsageError(f"prefix must be a str, got {prefix!r}")
        timeout = check_seconds("socket_timeout_s", socket_timeout_s)
        self._redis = redis = _redis_sync()
        self.prefix = prefix
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout,
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0), retry_on_error=[])
        self._scripts = {name: self.client.register_script(src) for name, src in scripts.items()}
        self._checked = False

    def __call__(self, operation: str, script: str, *args: Any) -> Any:
        try:
            if not self._checked:
                self._check_layout(operation)
            return self._scripts[script](keys=[], args=[self.prefix, *args])
        except self._redis.exceptions.RedisError as exc:
            raise StoreError("redis", operation, first_line(exc)) from exc

    def _check_layout(self, operation: str) -> None:
        key = f"{self.prefix}chat-schema"
        self.client.set(key, str(CHAT_SCHEMA_VERSION), nx=True)
        stored = self.client.get(key)
        if stored != str(CHAT_SCHEMA_VERSION).encode():
            raise StoreError("redis", operation, f"prefix {self.prefix!r} has chat store layout "
                             f"version {stored!r}; this bindloop reads version "
                             f"{CHAT_SCHEMA_VERSION}")
        self._checked = True

    def close(self) -> None:
        self.client.close()


def _num(value: float) -> str:
    return repr(float(value))


class RedisRunLogs:
    """Run logs in Redis at ``url`` (``redis://host:port/db``), shared by every process of a chat
    host: a :class:`~bindloop.hosts.asgi.run_logs.ContinuableRunLogs`, so a run whose process
    died is continued by another (see the module docstring).

    Ended runs are pruned at each :meth:`begin`: those started more than ``max_age_ms`` ago, all
    but the newest ``keep`` ended ones, and the oldest ones while the ended runs' frames pass
    ``max_bytes``; what a run kept to be continued goes when it ends. A running run is never
    pruned. Nothing connects until the first call; :meth:`close` closes the client."""

    name = "redis"

    def __init__(self, url: str, *, prefix: str = "bindloop:", keep: int = 10_000,
                 max_age_ms: float = 7 * 24 * 3_600_000, max_bytes: int = 1024 * 1024 * 1024,
                 socket_timeout_s: float = 10.0) -> None:
        if keep < 1 or not max_age_ms > 0 or max_bytes < 1:
            raise UsageError("RedisRunLogs(keep=, max_age_ms=, max_bytes=) must be positive")
        self._keep = keep
        self._max_age_ms = max_age_ms
        self._max_bytes = max_bytes
        self._call = _Scripts(url, prefix, socket_timeout_s, {
            "begin": _BEGIN, "append": _APPEND, "renew": _RENEW, "set": _SET, "end": _END,
            "claim": _CLAIM, "save": _SAVE, "lost": _LOST, "recover": _RECOVER,
            "take_over": _TAKE_OVER, "delete_chat": _DELETE_CHAT, "record": _RECORD,
            "latest": _LATEST})
        self._events = f"{prefix}events:"

    def close(self) -> None:
        self._call.close()

    def recover(self, now_ms: float) -> list[str]:
        """Close every run left ``running`` whose lease ran out (its process died) as
        ``interrupted``; runs other processes still renew are left alone. What a closed run
        stored to be continued (its request, its last save) stays until the next :meth:`begin`,
        as in the SQLite and Postgres logs. Returns the ids closed."""
        return [_text(r) for r in self._call("recover", "recover", _num(now_ms))]

    def begin(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
              lease_until_ms: float) -> None:
        outcome, run = self._call("begin", "begin", run_id, chat_id, protocol, _num(now_ms),
                                  _num(lease_until_ms), _num(now_ms - self._max_age_ms),
                                  self._keep, self._max_bytes)
        if outcome == b"busy":
            raise RunBusyError(_text(run))
        if outcome == b"exists":
            raise UsageError(f"run {run_id!r} already has a log")

    def claim(self, run_id: str, claim: bytes) -> None:
        self._call("claim", "claim", run_id, claim)

    def save(self, run_id: str, checkpoint: bytes, fed: str, offset: int) -> None:
        self._call("save", "save", run_id, checkpoint, fed, offset)

    def unlink(self, run_id: str) -> None:
        self._call("unlink", "set", run_id, "cat", 0)

    def lost(self, now_ms: float) -> list[RunRecord]:
        found = (self.record(_text(r)) for r in self._call("lost", "lost", _num(now_ms)))
        return [r for r in found if r is not None]

    def take_over(self, run_id: str, new_run_id: str, *, now_ms: float,
                  lease_until_ms: float) -> Continuation | None:
        taken = self._call("take_over", "take_over", run_id, new_run_id, _num(now_ms),
                           _num(lease_until_ms))
        if not isinstance(taken, list):
            return None
        claim, has_checkpoint, checkpoint, fed, offset = taken
        return Continuation(previous=run_id, claim=bytes(claim),
                            checkpoint=bytes(checkpoint) if has_checkpoint else None,
                            fed=_text(fed), offset=int(offset))

    def renew(self, run_id: str, lease_until_ms: float) -> bool:
        return bool(self._call("renew", "renew", run_id, _num(lease_until_ms)))

    def request_stop(self, run_id: str) -> None:
        self._call("request_stop", "set", run_id, "stop", 1)

    def append(self, run_id: str, payload: bytes) -> int:
        offset = int(self._call("append", "append", run_id, payload))
        if offset < 0:
            raise UsageError(f"run {run_id!r} has no log")
        return offset

    def end(self, run_id: str, status: RunStatus) -> None:
        self._call("end", "end", run_id, status)

    def delete_chat(self, chat_id: str, protocol: str, *, now_ms: float) -> bool:
        outcome, value = self._call("delete_chat", "delete_chat", chat_id, protocol,
                                    _num(now_ms))
        if outcome == b"busy":
            raise RunBusyError(_text(value))
        return int(value) > 0

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        start = 0 if after is None else after + 1
        try:
            frames = self._call.client.lrange(self._events + run_id, start, -1)
        except self._call._redis.exceptions.RedisError as exc:
            raise StoreError(self.name, "read", first_line(exc)) from exc
        return [(start + n, bytes(p)) for n, p in enumerate(frames)]

    @staticmethod
    def _record(row: Any) -> RunRecord | None:
        if not isinstance(row, list):
            return None
        run_id, chat_id, protocol, status, events, lease, stop, by, at, saved = row
        return RunRecord(run_id=_text(run_id), chat_id=_text(chat_id),
                         protocol=_text(protocol), status=_text(status),  # type: ignore[arg-type]
                         events=int(events), lease_until_ms=float(lease),
                         stop_requested=_text(stop) == "1", continued_by=_text(by) or None,
                         continued_at=int(at), claimed=int(saved) >= 0,
                         saved=max(0, int(saved)))

    def record(self, run_id: str) -> RunRecord | None:
        return self._record(self._call("record", "record", run_id))

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        return self._record(self._call("latest", "latest", chat_id, protocol))


class RedisPendingApprovals:
    """:class:`~bindloop.stores.PendingApprovals` in Redis at ``url`` (keys ``pending:`` under
    ``prefix``), for the newest ``max_chats`` chats (the oldest chat's pending calls are
    forgotten first). :meth:`take` is one script: of two processes taking the same decision, one
    gets the call."""

    name = "redis"

    def __init__(self, url: str, *, prefix: str = "bindloop:", max_chats: int = 100_000,
                 socket_timeout_s: float = 10.0) -> None:
        if max_chats < 1:
            raise UsageError(f"max_chats must be at least 1, got {max_chats}")
        self._max = max_chats
        self._call = _Scripts(url, prefix, socket_timeout_s,
                              {"record": _PENDING_RECORD, "take": _PENDING_TAKE,
                               "forget": _PENDING_FORGET})

    def close(self) -> None:
        self._call.close()

    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None:
        pairs: list[Any] = []
        for c in calls:
            pairs += [c.id, msgspec.json.encode((c.name, c.arguments))]
        self._call("record", "record", chat_id, self._max, *pairs)

    def take(self, chat_id: str, call_id: str) -> ToolCall | None:
        found = self._call("take", "take", chat_id, call_id)
        if found is None:
            return None
        name, arguments = _CALL.decode(found)
        return ToolCall(id=call_id, name=name, arguments=arguments)

    def forget(self, chat_id: str) -> int:
        return int(self._call("forget", "forget", chat_id))
