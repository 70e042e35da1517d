from __future__ import annotations

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bindloop.errors import UsageError
from bindloop.routing import BreakerKey, BreakerPermit, create_circuit_breaker
from routing_fakes import candidate


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


KEY = BreakerKey(provider_id="p", invocation_model="m", credential_source="platform")


def test_threshold_opens_cooldown_then_single_probe() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=2, cooldown_ms=1000)
    assert b.try_acquire(KEY).kind == "pass"
    b.record_failure(KEY)
    assert b.state(KEY).state == "closed" and b.state(KEY).consecutive_failures == 1
    b.record_failure(KEY)
    snap = b.state(KEY)
    assert (snap.state, snap.open_until_ms, snap.times_opened) == ("open", 1000.0, 1)
    clock.t = 999
    assert b.try_acquire(KEY).kind == "reject"
    clock.t = 1000
    assert b.state(KEY).state == "half_open"  # reading does not take the probe
    assert b.try_acquire(KEY).kind == "probe"
    assert b.try_acquire(KEY).kind == "reject"  # one probe at a time
    b.record_success(KEY)
    assert b.state(KEY).state == "closed" and b.snapshot() == ()
    assert b.try_acquire(KEY).kind == "pass"


def test_failed_probe_reopens_and_release_frees_the_slot() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=1, cooldown_ms=100)
    b.record_failure(KEY)
    clock.t = 100
    probe = b.try_acquire(KEY)
    assert probe.kind == "probe"
    b.record_failure(KEY, permit=probe)
    assert b.state(KEY).state == "open" and b.state(KEY).open_until_ms == 200
    clock.t = 200
    probe2 = b.try_acquire(KEY)
    assert probe2.kind == "probe" and probe2.probe_id != probe.probe_id
    b.release_probe(KEY, probe)  # a stale permit frees nothing
    assert b.state(KEY).probe_in_flight is True
    b.release_probe(KEY, probe2)
    assert b.state(KEY).probe_in_flight is False
    assert b.try_acquire(KEY).kind == "probe"
    b.release_probe(KEY)  # without a permit: whichever probe holds the slot
    assert b.state(KEY).probe_in_flight is False


def test_failure_after_the_cooldown_but_before_any_acquire_reopens() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=1, cooldown_ms=100)
    b.record_failure(KEY)
    clock.t = 150  # the cooldown ended; nobody has asked for the probe yet
    assert b.state(KEY).state == "half_open"
    b.record_failure(KEY)  # e.g. a late report from a call admitted before the circuit opened
    snap = b.state(KEY)
    assert (snap.state, snap.open_until_ms, snap.times_opened) == ("open", 250.0, 2)
    assert b.try_acquire(KEY).kind == "reject"


def test_stale_failure_while_probe_in_flight_never_allows_a_second_probe() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=1, cooldown_ms=100)
    b.record_failure(KEY)
    clock.t = 100
    probe = b.try_acquire(KEY)
    assert probe.kind == "probe"
    b.record_failure(KEY)  # a call admitted earlier reports late; it is not the probe
    clock.t = 1000
    assert b.try_acquire(KEY).kind == "reject"  # the original probe still holds the slot
    b.record_failure(KEY, permit=probe)
    clock.t = 2000
    assert b.try_acquire(KEY).kind == "probe"


def test_late_report_from_an_old_probe_cannot_free_a_newer_probe() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=1, cooldown_ms=100)
    b.record_failure(KEY)
    clock.t = 100
    old = b.try_acquire(KEY)
    b.record_success(KEY)  # another caller's success closes the circuit
    b.record_failure(KEY)  # ...and it fails again
    clock.t = 200
    new = b.try_acquire(KEY)
    assert new.kind == "probe"
    b.record_failure(KEY, permit=old)  # the old probe reports late
    clock.t = 10_000
    assert b.try_acquire(KEY).kind == "reject"  # `new` still holds the slot


def test_open_now_and_retry_after_extend_cooldown_up_to_cap() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=5, cooldown_ms=100, max_cooldown_ms=5000)
    b.record_failure(KEY, open_now=True, retry_after_ms=2000)
    assert b.state(KEY).open_until_ms == 2000
    b.record_failure(KEY, retry_after_ms=10**9)  # while open: extends, capped
    assert b.state(KEY).open_until_ms == 5000
    b.record_failure(KEY, retry_after_ms=1)  # never shortens
    assert b.state(KEY).open_until_ms == 5000


def test_scopes_isolate_tenants() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=1)
    t1 = BreakerKey.for_candidate(candidate("p", "openai/gpt-example", scope="t1"))
    t2 = BreakerKey.for_candidate(candidate("p", "openai/gpt-example", scope="t2"))
    b.record_failure(t1, open_now=True)
    assert b.try_acquire(t1).kind == "reject" and b.try_acquire(t2).kind == "pass"
    unscoped = BreakerKey(provider_id="p", invocation_model="gpt-example", credential_source="tenant")
    assert b.try_acquire(unscoped).kind == "pass"
    assert [s.key.credential_scope for s in b.snapshot()] == ["t1"]


@pytest.mark.parametrize("kw", [dict(failure_threshold=0), dict(cooldown_ms=-1),
                                dict(cooldown_ms=float("inf")), dict(cooldown_ms=10, max_cooldown_ms=5),
                                dict(failure_threshold=True)])
def test_bad_configuration(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        create_circuit_breaker(**kw)  # type: ignore[arg-type]


def test_bad_retry_after() -> None:
    b = create_circuit_breaker()
    with pytest.raises(UsageError):
        b.record_failure(KEY, retry_after_ms=float("nan"))


TENANT_KEYS = [
    BreakerKey(provider_id="p", invocation_model="m", credential_source="tenant", credential_scope=s)
    for s in ("t1", "t2", "t3")
]


class BreakerMachine(RuleBasedStateMachine):
    """Random interleavings of admissions, outcomes and time. The model tracks who holds what."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.breaker = create_circuit_breaker(now=self.clock, failure_threshold=2, cooldown_ms=50,
                                              max_cooldown_ms=400)
        self.permits: list[tuple[BreakerKey, BreakerPermit]] = []  # outstanding admissions
        self.live_probe: dict[BreakerKey, int | None] = {k: None for k in TENANT_KEYS}
        self.failed: set[BreakerKey] = set()
        self.floor: dict[BreakerKey, float] = {}  # the cooldown a retry-after demanded

    @rule(key=st.sampled_from(TENANT_KEYS))
    def acquire(self, key: BreakerKey) -> None:
        before = self.breaker.state(key)
        got = self.breaker.try_acquire(key)
        if got.kind == "probe":
            assert self.live_probe[key] is None, "two probes in flight for one key"
            self.live_probe[key] = got.probe_id
        if got.admitted:
            self.permits.append((key, got))
        if before.state == "open":
            assert got.kind == "reject"
        if key in self.floor and self.clock.t < self.floor[key]:
            assert got.kind == "reject", "a cooldown ended before the retry-after it was given"

    @precondition(lambda self: bool(self.permits))
    @rule(data=st.data(), outcome=st.sampled_from(["success", "failure", "release"]),
          retry_after=st.none() | st.floats(0, 1000), open_now=st.booleans())
    def finish(self, data: st.DataObject, outcome: str, retry_after: float | None,
               open_now: bool) -> None:
        i = data.draw(st.integers(0, len(self.permits) - 1))
        key, permit = self.permits.pop(i)
        mine = permit.kind == "probe" and self.live_probe[key] == permit.probe_id
        if outcome == "success":
            self.breaker.record_success(key, permit=permit)
            self.floor.pop(key, None)
            self.live_probe[key] = None
        elif outcome == "release":
            self.breaker.release_probe(key, permit)
            if mine:
                self.live_probe[key] = None
        else:
            self.failed.add(key)
            before = self.breaker.state(key).state
            self.breaker.record_failure(key, retry_after_ms=retry_after, permit=permit,
                                        open_now=open_now)
            if mine:
                self.live_probe[key] = None
            snap = self.breaker.state(key)
            if before == "half_open":  # any failure while (effectively) half-open re-opens
                assert snap.state == "open" and snap.open_until_ms is not None
                assert snap.open_until_ms >= self.clock.t + 50
            if snap.state == "open" and retry_after is not None:
                want = self.clock.t + min(retry_after, 400)
                assert snap.open_until_ms is not None and snap.open_until_ms >= want
                self.floor[key] = max(self.floor.get(key, 0.0), want)

    @rule(ms=st.floats(0, 200))
    def advance(self, ms: float) -> None:
        self.clock.t += ms

    @invariant()
    def untouched_tenants_stay_closed(self) -> None:
        for key in TENANT_KEYS:
            if key not in self.failed:
                assert self.breaker.state(key).state == "closed"

    @invariant()
    def probe_flag_matches_model(self) -> None:
        for key in TENANT_KEYS:
            assert self.breaker.state(key).probe_in_flight == (self.live_probe[key] is not None)


TestBreakerMachine = BreakerMachine.TestCase
TestBreakerMachine.settings = settings(max_examples=150, deadline=None, stateful_step_count=40)


def test_retry_after_defers_the_endpoint_below_the_failure_threshold() -> None:
    # One 429 with Retry-After: 7 s. The circuit stays closed (one failure of three), but the
    # endpoint is not called again before it asked; afterwards it passes as before.
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=3, cooldown_ms=1000)
    b.record_failure(KEY, retry_after_ms=7000)
    snap = b.state(KEY)
    assert (snap.state, snap.consecutive_failures, snap.not_before_ms) == ("closed", 1, 7000.0)
    clock.t = 500
    assert b.try_acquire(KEY).kind == "reject"
    clock.t = 6999
    assert b.try_acquire(KEY).kind == "reject"
    clock.t = 7000
    assert b.state(KEY).not_before_ms is None
    assert b.try_acquire(KEY).kind == "pass"
    assert b.state(KEY).consecutive_failures == 1  # the deferral did not forget the failure


def test_retry_after_zero_or_absent_defers_nothing_and_is_capped() -> None:
    clock = ManualClock()
    b = create_circuit_breaker(now=clock, failure_threshold=3, cooldown_ms=10,
                               max_cooldown_ms=2000)
    b.record_failure(KEY, retry_after_ms=0)
    b.record_failure(KEY)
    assert b.try_acquire(KEY).kind == "pass" and b.state(KEY).not_before_ms is None
    b.record_success(KEY)
    b.record_failure(KEY, retry_after_ms=10**9)  # a hostile Retry-After
    assert b.state(KEY).not_before_ms == 2000.0
    clock.t = 2000
    assert b.try_acquire(KEY).kind == "pass"


@pytest.mark.parametrize("threshold", [1, 3])
def test_property_no_call_passes_before_a_retry_after(threshold: int) -> None:
    from hypothesis import given

    step = st.tuples(st.sampled_from(["fail", "ok", "ask"]),
                     st.one_of(st.none(), st.integers(0, 5000)), st.integers(0, 3000))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(step, max_size=30))
    def run(steps: list[tuple[str, int | None, int]]) -> None:
        clock = ManualClock()
        b = create_circuit_breaker(now=clock, failure_threshold=threshold, cooldown_ms=100,
                                   max_cooldown_ms=4000)
        not_before = 0.0
        for op, retry_after, advance in steps:
            clock.t += advance
            if op == "fail":
                b.record_failure(KEY, retry_after_ms=retry_after)
                if retry_after:
                    not_before = max(not_before, clock.t + min(retry_after, 4000))
            elif op == "ok":
                b.record_success(KEY)
                not_before = 0.0
            else:
                permit = b.try_acquire(KEY)
                if clock.t < not_before:
                    assert permit.kind == "reject"
                if permit.kind == "probe":
                    b.release_probe(KEY, permit)
    run()
