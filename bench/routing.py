"""Routing and receipt-hashing overhead.

1. Plan build + execute for a 3-stage x 3-candidate plan with failures injected: the primary stage's
   first two candidates fail (503, then a response defect retried once), the fallback stages are
   never reached in the "provider" row; in the "model" row every primary candidate fails (timeout,
   429, 500) and the second stage's first candidate succeeds. The attempt function is a no-op
   coroutine, so the figures are routing's own cost (plus one event-loop-free coroutine drive per
   attempt). A fresh circuit breaker per run (failures would otherwise open circuits and change the
   path).
2. ``canonical_json`` on an argument object of at least 100,000 bytes of canonical JSON versus ``json.dumps(sort_keys=True,
   separators=(",", ":"), ensure_ascii=False)`` (C-accelerated; *not* RFC 8785: it sorts by code
   point, prints floats with Python's repr and accepts NaN) and ``msgspec.json.encode(order="sorted")``.

Run: ``.venv/bin/python bench/routing.py``. Prints a table; timings are medians of repeated runs.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from bindloop.routing import (
    AttemptError,
    AttemptFailure,
    AttemptSuccess,
    AttemptTarget,
    Availability,
    OrderedPolicy,
    ResolvedCandidate,
    RouteCandidate,
    RouteCursor,
    RouteRequirements,
    build_route_plan,
    create_circuit_breaker,
    execute_route_plan,
    provider_id,
)
from bindloop.run import canonical_json

MODELS = ("openai/gpt-example", "anthropic/claude-example", "google/gemini-example")
PROVIDERS = tuple(provider_id(p) for p in ("alpha", "beta", "gamma"))
REQ = RouteRequirements(capabilities=frozenset({"chat_completions"}))


class Transport:
    def __init__(self, pid: Any) -> None:
        self.id = pid

    def get_availability(self) -> Availability:
        return Availability(available=True)

    def resolve_candidate(self, model: Any, requirements: RouteRequirements) -> ResolvedCandidate:
        return ResolvedCandidate(candidate=RouteCandidate(
            provider_id=self.id, canonical_model_id=model,
            provider_invocation_model=model.split("/")[1], credential_source="platform",
            capabilities=frozenset({"chat_completions"}), binding_fingerprint=f"{self.id}:{model}"))


TRANSPORTS = {p: Transport(p) for p in PROVIDERS}
POLICY = OrderedPolicy(providers=PROVIDERS)


def build() -> Any:
    return build_route_plan(primary_model=MODELS[0], fallback_model=MODELS[1:], requirements=REQ,
                            policy_for=lambda m: POLICY, transports=TRANSPORTS).plan


def attempt_for(script: dict[tuple[int, int, int], tuple[str, int | None]]) -> Callable[..., Any]:
    async def attempt(c: RouteCandidate, cursor: RouteCursor) -> Any:
        step = script.get((cursor.stage, cursor.candidate, cursor.attempt))
        if step is None:
            return AttemptSuccess("ok")
        category, status = step
        target = AttemptTarget(cursor=cursor, provider_id=c.provider_id,
                               canonical_model_id=c.canonical_model_id,
                               provider_invocation_model=c.provider_invocation_model)
        return AttemptFailure(error=AttemptError(category, target, status_code=status))  # type: ignore[arg-type]

    return attempt


def drive(coro: Any) -> Any:
    # The attempt never suspends, so the executor runs to completion without an event loop: this
    # measures routing, not asyncio.
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("suspended")


PROVIDER_FALLBACK = attempt_for({(0, 0, 0): ("server_error", 503),
                                 (0, 1, 0): ("response_defect", None),
                                 (0, 1, 1): ("response_defect", None)})
MODEL_FALLBACK = attempt_for({(0, 0, 0): ("timeout", None), (0, 1, 0): ("rate_limited", 429),
                              (0, 2, 0): ("server_error", 500)})


def route_once(attempt: Callable[..., Any], expect: str) -> None:
    plan = build()
    result = drive(execute_route_plan(plan=plan, attempt=attempt,
                                      breaker=create_circuit_breaker(now=lambda: 0.0)))
    assert result.ok and result.fallback_kind == expect, result


def timeit(fn: Callable[[], Any], *, number: int, repeat: int = 7) -> float:
    """Median microseconds per call."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(samples)


def args_object(target_bytes: int = 100_000) -> dict[str, Any]:
    """An argument object whose canonical JSON is at least ``target_bytes`` UTF-8 bytes (measured on
    the whole object as ``canonical_json`` prints it, not estimated from ``json.dumps`` characters:
    the non-ASCII words are 2-4 bytes each)."""
    rnd = random.Random(8785)
    words = ["alpha", "beta", "gamma", "δέλτα", "ε", "😀", "line\nbreak", 'quote"d', "tab\t"]
    rows: list[dict[str, Any]] = []
    obj = {"query": "bench", "rows": rows, "options": {"limit": 50, "offset": 0, "sort": "score"}}

    def add_row() -> None:
        rows.append({
            "id": len(rows), "score": rnd.random() * 1000, "ratio": rnd.uniform(-1, 1) * 1e-7,
            "label": " ".join(rnd.choice(words) for _ in range(6)), "tags": rnd.sample(words, 3),
            "active": rnd.random() < 0.5, "parent": None if rnd.random() < 0.3 else rnd.randrange(10**6),
        })

    while len(json.dumps(rows, ensure_ascii=False)) < target_bytes * 0.9:  # cheap bulk growth
        add_row()
    while len(canonical_json(obj).encode("utf-8")) < target_bytes:  # then exact
        add_row()
    return obj


def main() -> None:
    build_us = timeit(build, number=2_000)
    provider_us = timeit(lambda: route_once(PROVIDER_FALLBACK, "provider"), number=2_000)
    model_us = timeit(lambda: route_once(MODEL_FALLBACK, "model"), number=2_000)

    obj = args_object()
    size = len(canonical_json(obj).encode("utf-8"))
    assert size >= 100_000, size
    jcs_us = timeit(lambda: canonical_json(obj), number=20)
    dumps_us = timeit(lambda: json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                         ensure_ascii=False), number=20)
    enc = msgspec.json.Encoder(order="sorted")
    msgspec_us = timeit(lambda: enc.encode(obj), number=50)

    print("routing: 3 stages x 3 candidates, defect_retries=1")
    print(f"| {'operation':<52} | {'median':>11} |")
    print(f"|{'-' * 54}|{'-' * 13}|")
    print(f"| {'build_route_plan':<52} | {build_us:>8.1f} us |")
    print(f"| {'build + execute, provider fallback (4 attempts)':<52} | {provider_us:>8.1f} us |")
    print(f"| {'build + execute, model fallback (4 attempts)':<52} | {model_us:>8.1f} us |")
    print()
    print(f"canonical JSON of a {size:,}-byte tool-argument object ({len(obj['rows'])} rows)")
    print(f"| {'encoder':<52} | {'median':>11} | {'MB/s':>7} |")
    print(f"|{'-' * 54}|{'-' * 13}|{'-' * 9}|")
    for name, us in (("bindloop canonical_json (RFC 8785)", jcs_us),
                     ("json.dumps(sort_keys=True) (not RFC 8785)", dumps_us),
                     ("msgspec.json.encode(order='sorted') (not RFC 8785)", msgspec_us)):
        print(f"| {name:<52} | {us / 1000:>8.2f} ms | {size / us:>7.1f} |")
    print(f"\ncanonical_json / json.dumps = {jcs_us / dumps_us:.1f}x")


if __name__ == "__main__":
    main()
