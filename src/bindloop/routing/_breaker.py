"""A circuit breaker per endpoint key, with one half-open probe at a time.

States per key: *closed* (calls pass; consecutive failures are counted), *open* (calls are refused
until the cooldown ends), *half-open* (the cooldown ended: exactly one caller gets the probe; its
outcome closes or re-opens the circuit). Time comes from the injected ``now``; nothing sleeps.

Apart from the state, a key can be *deferred*: an endpoint that answered with ``Retry-After`` (a
429, a 503) asked not to be called before that time, and it is not — whatever the failure count,
so the next turn falls back instead of knocking again half a second later. A deferral ends by
itself at its time (capped at ``max_cooldown_ms``); it never opens the circuit on its own.

Keys are (provider, invocation model, credential source, optional credential scope). The scope is how
one tenant's revoked bring-your-own key stays that tenant's problem: with different scopes, failures
never cross. It lands in telemetry, so it must be an opaque, non-secret tag.
"""

from __future__ import annotations

import math
from typing import Literal, TypeAlias

import msgspec

from ..clock import Clock, monotonic_ms
from ..errors import UsageError
from ._plan import RouteCandidate

__all__ = (
    "BreakerAdmission",
    "BreakerKey",
    "BreakerPermit",
    "BreakerSnapshot",
    "CircuitBreaker",
    "CircuitState",
    "create_circuit_breaker",
)

CircuitState: TypeAlias = Literal["closed", "open", "half_open"]
BreakerAdmission: TypeAlias = Literal["pass", "probe", "reject"]


class BreakerKey(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, order=True):
    """One endpoint as the breaker sees it. Hashable and orderable."""

    provider_id: str
    invocation_model: str
    credential_source: str
    credential_scope: str | None = None

    @classmethod
    def for_candidate(cls, candidate: RouteCandidate) -> BreakerKey:
        """The key a route candidate's attempts are recorded under."""
        return cls(
            provider_id=candidate.provider_id,
            invocation_model=candidate.provider_invocation_model,
            credential_source=candidate.credential_source,
            credential_scope=candidate.credential_scope,
        )


class BreakerPermit(msgspec.Struct, frozen=True, kw_only=True):
    """:meth:`CircuitBreaker.try_acquire`'s answer. ``kind``: ``pass`` (closed), ``probe`` (you hold
    the single half-open probe — end it by passing this permit to :meth:`~CircuitBreaker.record_success`,
    :meth:`~CircuitBreaker.record_failure` or :meth:`~CircuitBreaker.release_probe`), ``reject``.
    ``probe_id`` identifies the probe, so a late report from an older probe can never free a newer
    one's slot."""

    kind: BreakerAdmission
    probe_id: int | None = None

    @property
    def admitted(self) -> bool:
        return self.kind != "reject"


_PASS = BreakerPermit(kind="pass")
_REJECT = BreakerPermit(kind="reject")


class BreakerSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A read-out for telemetry. ``state`` is the effective state at the time of reading (an open
    circuit whose cooldown has ended reads ``half_open``); ``open_until_ms`` is on the breaker's
    clock."""

    key: BreakerKey
    state: CircuitState
    consecutive_failures: int
    open_until_ms: float | None
    probe_in_flight: bool
    times_opened: int
    not_before_ms: float | None = None
    """While the endpoint's ``Retry-After`` runs: the time before which it is not called."""


class _Entry:
    __slots__ = ("failures", "not_before", "open_until", "opened", "probe", "state")

    def __init__(self) -> None:
        self.state: CircuitState = "closed"
        self.failures = 0
        self.open_until: float | None = None
        self.probe: int | None = None  # the probe_id holding the half-open slot
        self.opened = 0
        self.not_before: float | None = None  # the endpoint's Retry-After, on the breaker's clock


class CircuitBreaker:
    """See the module docstring. Make one with :func:`create_circuit_breaker`; share it across
    completions (its whole value is memory across calls), never across processes."""

    __slots__ = ("_entries", "_now", "_probe_ids", "cooldown_ms", "failure_threshold",
                 "max_cooldown_ms")

    def __init__(
        self, *, now: Clock, failure_threshold: int, cooldown_ms: float, max_cooldown_ms: float
    ) -> None:
        self._now = now
        self.failure_threshold = failure_threshold
        self.cooldown_ms = cooldown_ms
        self.max_cooldown_ms = max_cooldown_ms
        self._entries: dict[BreakerKey, _Entry] = {}
        self._probe_ids = 0

    def try_acquire(self, key: BreakerKey) -> BreakerPermit:
        """Ask to call ``key``; see :class:`BreakerPermit`. Refused while open, and while another
        probe holds the half-open slot, and while the endpoint's own ``Retry-After`` runs."""
        entry = self._entries.get(key)
        if entry is None or (entry.state == "closed" and entry.not_before is None):
            return _PASS  # the common case reads no clock
        now = self._now()
        if entry.not_before is not None:
            if now < entry.not_before:
                return _REJECT
            entry.not_before = None
            if entry.state == "closed":
                return _PASS
        self._settle(entry, now)
        if entry.state == "open":
            return _REJECT
        if entry.probe is not None:
            return _REJECT
        self._probe_ids += 1
        entry.probe = self._probe_ids
        return BreakerPermit(kind="probe", probe_id=self._probe_ids)

    def record_success(self, key: BreakerKey, *, permit: BreakerPermit | None = None) -> None:
        """The endpoint answered: close the circuit, forget its failures, free the probe slot.
        (``permit`` is accepted for symmetry; any success closes the circuit.)"""
        self._entries.pop(key, None)

    def record_failure(
        self,
        key: BreakerKey,
        *,
        retry_after_ms: float | None = None,
        open_now: bool = False,
        permit: BreakerPermit | None = None,
    ) -> None:
        """Count a failure; with the caller's probe ``permit`` it also frees that probe's slot.

        The circuit opens at ``failure_threshold`` consecutive failures, at once with ``open_now`` (a
        refused credential), and on any failure while half-open — including an open circuit whose
        cooldown has ended but whose probe nobody has taken yet. Opening sets the cooldown to
        ``max(cooldown_ms, retry_after_ms)`` with the retry-after capped at ``max_cooldown_ms``; a
        failure reported while already open can only extend it. A probe held by someone else stays
        held, so re-opening never lets a second probe start beside it. A ``retry_after_ms`` above
        zero also defers the key (see the module docstring) until then, capped the same way.
        """
        if retry_after_ms is not None and (
            isinstance(retry_after_ms, bool) or not isinstance(retry_after_ms, (int, float))
            or not math.isfinite(retry_after_ms) or retry_after_ms < 0
        ):
            raise UsageError(f"retry_after_ms must be a finite number >= 0, got {retry_after_ms!r}")
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.failures += 1
        self._free(entry, permit)
        now = self._now()
        # A cooldown that ended is half-open whether or not anyone asked for the probe yet, so this
        # failure re-opens rather than being folded into a cooldown already in the past.
        self._settle(entry, now)
        extra = 0.0 if retry_after_ms is None else min(float(retry_after_ms), self.max_cooldown_ms)
        if extra > 0:
            entry.not_before = max(entry.not_before or now, now + extra)
        if entry.state == "open":
            assert entry.open_until is not None
            entry.open_until = max(entry.open_until, now + extra)
            return
        if entry.state == "half_open" or open_now or entry.failures >= self.failure_threshold:
            entry.state = "open"
            entry.open_until = now + max(self.cooldown_ms, extra)
            entry.opened += 1

    def release_probe(self, key: BreakerKey, permit: BreakerPermit | None = None) -> None:
        """End a half-open probe that produced no recordable outcome (an abort, a propagated client
        error), so the slot cannot stick. With ``permit``, only that probe's slot is freed; without
        it, whichever probe holds the slot. No-op when none does."""
        entry = self._entries.get(key)
        if entry is None:
            return
        if permit is None:
            entry.probe = None
        else:
            self._free(entry, permit)

    @staticmethod
    def _settle(entry: _Entry, now: float) -> None:
        """Move an open entry whose cooldown has ended to half-open (the state it reads as)."""
        if entry.state == "open":
            assert entry.open_until is not None
            if now >= entry.open_until:
                entry.state = "half_open"

    @staticmethod
    def _free(entry: _Entry, permit: BreakerPermit | None) -> None:
        if permit is not None and permit.probe_id is not None and entry.probe == permit.probe_id:
            entry.probe = None

    def state(self, key: BreakerKey) -> BreakerSnapshot:
        """The key's current state, without changing it."""
        entry = self._entries.get(key)
        if entry is None:
            return BreakerSnapshot(key=key, state="closed", consecutive_failures=0,
                                   open_until_ms=None, probe_in_flight=False, times_opened=0)
        now = self._now()
        state = entry.state
        if state == "open" and entry.open_until is not None and now >= entry.open_until:
            state = "half_open"
        deferred = entry.not_before if entry.not_before is not None and now < entry.not_before \
            else None
        return BreakerSnapshot(key=key, state=state, consecutive_failures=entry.failures,
                               open_until_ms=entry.open_until if entry.state != "closed" else None,
                               probe_in_flight=entry.probe is not None,
                               times_opened=entry.opened, not_before_ms=deferred)

    def snapshot(self) -> tuple[BreakerSnapshot, ...]:
        """Every key with a non-default state, sorted by key (stable output for telemetry)."""
        return tuple(self.state(key) for key in sorted(self._entries))


def create_circuit_breaker(
    *,
    now: Clock = monotonic_ms,
    failure_threshold: int = 3,
    cooldown_ms: float = 30_000.0,
    max_cooldown_ms: float = 600_000.0,
) -> CircuitBreaker:
    """A :class:`CircuitBreaker`. ``failure_threshold`` consecutive recorded failures open a
    closed circuit for ``cooldown_ms`` (extended by a ``retry_after_ms`` up to ``max_cooldown_ms``)."""
    if isinstance(failure_threshold, bool) or not isinstance(failure_threshold, int) \
            or failure_threshold < 1:
        raise UsageError(f"failure_threshold must be a positive int, got {failure_threshold!r}")
    for name, value in (("cooldown_ms", cooldown_ms), ("max_cooldown_ms", max_cooldown_ms)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise UsageError(f"{name} must be a finite number >= 0, got {value!r}")
    if max_cooldown_ms < cooldown_ms:
        raise UsageError("max_cooldown_ms must be >= cooldown_ms")
    return CircuitBreaker(now=now, failure_threshold=failure_threshold,
                          cooldown_ms=float(cooldown_ms), max_cooldown_ms=float(max_cooldown_ms))
