from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st

from bindloop.errors import PortContractError, RunCancelledError, RunTimeoutError, UsageError
from bindloop.routing import (
    AttemptError,
    AttemptTarget,
    RouteCursor,
    canonical_model_id,
    provider_id,
)
from bindloop.routing.failures import (
    FAILURE_CATEGORIES,
    FAILURE_DISPOSITIONS,
    AttemptClassification,
    TransportFailure,
    clamp_retry_after_ms,
    classify_attempt_error,
    failure_disposition,
    neutral_status_category,
    parse_retry_after,
    retry_after_ms_from_headers,
)
from bindloop.signal import AbortController

TARGET = AttemptTarget(cursor=RouteCursor(stage=0, candidate=0), provider_id=provider_id("gw"),
                       canonical_model_id=canonical_model_id("openai/gpt-example"),
                       provider_invocation_model="gpt-example")

# The table as documented in docs/routing.md; a change to either must change both.
DOCUMENTED = {
    "cancelled": ("propagate", "none", False),
    "client_error": ("propagate", "none", False),
    "invalid_request": ("propagate", "none", False),
    "content_filter": ("propagate", "none", False),
    "context_length": ("next_stage", "none", False),
    "provider_bad_request": ("traverse", "none", False),
    "auth": ("traverse", "open", False),
    "model_not_found": ("traverse", "open", False),
    "rate_limited": ("traverse", "record", True),
    "server_error": ("traverse", "record", True),
    "timeout": ("traverse", "record", True),
    "connection": ("traverse", "record", True),
    "stream_stall": ("traverse", "record", True),
    "response_defect": ("retry", "none", False),
}


def test_disposition_table_is_total_and_documented() -> None:
    assert set(FAILURE_DISPOSITIONS) == FAILURE_CATEGORIES == set(DOCUMENTED)
    for category, (action, breaker, again) in DOCUMENTED.items():
        d = failure_disposition(category)  # type: ignore[arg-type]
        assert (d.action, d.breaker, d.same_provider_retry) == (action, breaker, again)


def test_docs_table_matches_code() -> None:
    from pathlib import Path
    doc = (Path(__file__).parents[2] / "docs" / "routing.md").read_text()
    for category, (action, breaker, again) in DOCUMENTED.items():
        row = f"| `{category}` | {action} | {breaker} | {'yes' if again else 'no'} |"
        assert row in doc, category


@pytest.mark.parametrize("category", sorted(FAILURE_CATEGORIES))
def test_produced_output_clamps_to_propagate_keeping_breaker_effect(category: str) -> None:
    plain = failure_disposition(category)  # type: ignore[arg-type]
    clamped = failure_disposition(AttemptError(category, TARGET), produced_output=True)  # type: ignore[arg-type]
    assert clamped.action == "propagate" and clamped.breaker == plain.breaker


def test_unknown_category_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        failure_disposition("weird")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        AttemptError("weird", TARGET)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        AttemptError("timeout", TARGET, retry_after_ms=-1)


@pytest.mark.parametrize(("status", "category"), [
    (400, "invalid_request"), (401, "auth"), (403, "auth"), (404, "model_not_found"),
    (408, "timeout"), (413, "context_length"), (422, "invalid_request"), (429, "rate_limited"),
    (500, "server_error"), (503, "server_error"), (529, "server_error"), (302, "client_error"),
    (200, "client_error"),
])
def test_neutral_status_mapping(status: int, category: str) -> None:
    assert neutral_status_category(status) == category


class MyLLMError(Exception):
    def __init__(self, kind: str, status: int | None = None, retry_after_ms: float | None = None):
        super().__init__(kind)
        self.kind, self.status, self.retry_after_ms = kind, status, retry_after_ms


def as_transport_failure(error: BaseException) -> TransportFailure | None:
    if isinstance(error, MyLLMError):
        return TransportFailure(kind=error.kind, status_code=error.status,  # type: ignore[arg-type]
                                retry_after_ms=error.retry_after_ms)
    return None


CLASSIFY = AttemptClassification(
    as_transport_failure=as_transport_failure,
    categorize_status=lambda status, pid: "provider_bad_request" if (status, pid) == (403, "gw") else None,
)


def test_seed_gateway_override_and_neutral_fallthrough() -> None:
    err = classify_attempt_error(MyLLMError("http", 403), TARGET, CLASSIFY)
    assert err.category == "provider_bad_request" and err.status_code == 403
    other = AttemptTarget(**{**{f: getattr(TARGET, f) for f in TARGET.__struct_fields__},
                             "provider_id": provider_id("other")})
    assert classify_attempt_error(MyLLMError("http", 403), other, CLASSIFY).category == "auth"
    err = classify_attempt_error(MyLLMError("http", 429, 1500.0), TARGET, CLASSIFY)
    assert (err.category, err.retry_after_ms) == ("rate_limited", 1500.0)
    assert isinstance(err.cause, MyLLMError) and err.__cause__ is err.cause
    assert err.target == TARGET


@pytest.mark.parametrize(("kind", "category"), [
    ("timeout", "timeout"), ("connection", "connection"), ("stream_stall", "stream_stall"),
    ("response_defect", "response_defect"), ("cancelled", "cancelled"),
])
def test_non_http_kinds(kind: str, category: str) -> None:
    assert classify_attempt_error(MyLLMError(kind), TARGET, CLASSIFY).category == category


def test_unrecognised_errors_become_propagating_client_errors() -> None:
    err = classify_attempt_error(KeyError("oops"), TARGET, CLASSIFY)
    assert err.category == "client_error"
    assert failure_disposition(err).action == "propagate"
    assert classify_attempt_error(MyLLMError("http", 500), TARGET).category == "client_error"


class FakeJsAbort(Exception):
    name = "AbortError"


FakeJsAbort.__module__ = "pyodide.ffi"


@pytest.mark.parametrize("error", [
    RunCancelledError("stop"), RunTimeoutError(), asyncio.CancelledError(), FakeJsAbort(),
])
def test_cancellation_is_classified_first(error: BaseException) -> None:
    # The host port would claim every error as a 500; cancellation still wins.
    claims_all = AttemptClassification(
        as_transport_failure=lambda e: TransportFailure(kind="http", status_code=500))
    assert classify_attempt_error(error, TARGET, claims_all).category == "cancelled"


def test_aborted_signal_makes_any_error_a_cancellation() -> None:
    c = AbortController()
    c.abort("user")
    assert classify_attempt_error(MyLLMError("http", 500), TARGET, CLASSIFY,
                                  signal=c.signal).category == "cancelled"


def test_a_prompt_that_does_not_fit_is_context_length_wherever_it_was_raised() -> None:
    from bindloop.errors import PromptTooLongError, ProviderError

    # A host port that would call it a 500 does not get the chance: the cause chain decides.
    claims_all = AttemptClassification(
        as_transport_failure=lambda e: TransportFailure(kind="http", status_code=500))
    direct = PromptTooLongError("context window exceeded")
    wrapped = ProviderError("summarizer failed")
    wrapped.__cause__ = direct
    for error in (direct, wrapped):
        classified = classify_attempt_error(error, TARGET, claims_all)
        assert classified.category == "context_length" and classified.cause is error
        assert failure_disposition(classified).action == "next_stage"


def test_an_attempt_error_passes_through() -> None:
    err = AttemptError("timeout", TARGET)
    assert classify_attempt_error(err, TARGET, CLASSIFY) is err


def test_cancellation_is_checked_before_the_attempt_error_pass_through() -> None:
    c = AbortController()
    c.abort("user")
    err = AttemptError("timeout", TARGET)
    got = classify_attempt_error(err, TARGET, CLASSIFY, signal=c.signal)
    assert got.category == "cancelled" and got.cause is err
    already = AttemptError("cancelled", TARGET)
    assert classify_attempt_error(already, TARGET, CLASSIFY, signal=c.signal) is already


@pytest.mark.parametrize("port", [
    AttemptClassification(as_transport_failure=lambda e: "http"),  # type: ignore[arg-type,return-value]
    AttemptClassification(as_transport_failure=lambda e: TransportFailure(kind="http")),
    AttemptClassification(as_transport_failure=lambda e: TransportFailure(kind="http", status_code=99)),
    AttemptClassification(as_transport_failure=lambda e: TransportFailure(
        kind="timeout", retry_after_ms=float("nan"))),
    AttemptClassification(as_transport_failure=lambda e: TransportFailure(kind="bogus")),  # type: ignore[arg-type]
    AttemptClassification(as_transport_failure=lambda e: TransportFailure(kind="http", status_code=500),
                          categorize_status=lambda s, p: "bogus"),  # type: ignore[arg-type,return-value]
])
def test_port_contract_violations(port: AttemptClassification) -> None:
    with pytest.raises(PortContractError):
        classify_attempt_error(ValueError("x"), TARGET, port)


# --- Retry-After -------------------------------------------------------------------------------

NOW_MS = datetime(1994, 11, 6, 8, 49, 0, tzinfo=timezone.utc).timestamp() * 1000.0


def clock() -> float:
    return NOW_MS


@pytest.mark.parametrize(("value", "expected"), [
    ("120", 120_000.0),
    ("0", 0.0),
    (" 7 ", 7000.0),
    ("Sun, 06 Nov 1994 08:49:37 GMT", 37_000.0),        # IMF-fixdate
    ("Sunday, 06-Nov-94 08:49:37 GMT", 37_000.0),       # obsolete RFC 850
    ("Sun Nov  6 08:49:37 1994", 37_000.0),             # asctime
    ("Sun, 06 Nov 1994 08:48:00 GMT", 0.0),             # in the past
    ("Sun, 06 Nov 1994 08:49:60 GMT", 59_000.0),        # leap second folded
])
def test_parse_retry_after(value: str, expected: float) -> None:
    assert parse_retry_after(value, now=clock) == expected


@pytest.mark.parametrize("value", [
    "", "-5", "1.5", "12abc", "soon", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 31 Feb 1994 08:49:37 GMT",
    "Sun, 06 Nov 94 08:49:37 GMT", "Funday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
    "１２", "0x10",
])
def test_parse_retry_after_garbage_is_none(value: str) -> None:
    assert parse_retry_after(value, now=clock) is None


def test_rfc850_two_digit_year_window() -> None:
    now = datetime(2060, 1, 1, tzinfo=timezone.utc).timestamp() * 1000.0
    # '94' is 2094 (34 years ahead, within 50); '20' is 2020 (in the past -> 0).
    assert parse_retry_after("Friday, 01-Jan-94 00:00:00 GMT", now=lambda: now) > 0
    assert parse_retry_after("Wednesday, 01-Jan-20 00:00:00 GMT", now=lambda: now) == 0.0
    # From 2030, '94' would be 2094 = 64 years ahead, so it means 1994.
    now2 = datetime(2030, 1, 1, tzinfo=timezone.utc).timestamp() * 1000.0
    assert parse_retry_after("Saturday, 01-Jan-94 00:00:00 GMT", now=lambda: now2) == 0.0


def test_headers_lookup_is_case_insensitive_and_prefers_ms() -> None:
    assert retry_after_ms_from_headers({"Retry-After": "3"}, now=clock) == 3000.0
    assert retry_after_ms_from_headers([("retry-after-ms", "250"), ("Retry-After", "3")],
                                       now=clock) == 250.0
    assert retry_after_ms_from_headers([("retry-after-ms", "junk"), ("RETRY-AFTER", "3")],
                                       now=clock) == 3000.0
    assert retry_after_ms_from_headers([("retry-after", "junk"), ("retry-after", "4")],
                                       now=clock) == 4000.0
    assert retry_after_ms_from_headers({"content-type": "x"}, now=clock) is None


@given(st.text(max_size=40))
def test_retry_after_never_raises_and_is_never_negative(value: str) -> None:
    got = retry_after_ms_from_headers({"retry-after": value}, now=clock)
    assert got is None or got >= 0.0


def test_huge_delay_saturates_instead_of_overflowing() -> None:
    got = parse_retry_after("9" * 400, now=clock)
    assert got is not None and got > 0 and got != float("inf")


@pytest.mark.parametrize("digits", [5_000, 100_000])
def test_a_digit_string_past_the_int_conversion_limit_saturates(digits: int) -> None:
    # int() refuses more than 4300 digits; the parser must not depend on it.
    cap = parse_retry_after("9" * 400, now=clock)
    assert parse_retry_after("9" * digits, now=clock) == cap
    assert parse_retry_after("0" * digits + "7", now=clock) == 7000.0  # leading zeros are not size
    assert retry_after_ms_from_headers({"retry-after": "1" * digits}, now=clock) == cap
    assert retry_after_ms_from_headers({"retry-after-ms": "9" * digits}, now=clock) == cap
    assert parse_retry_after("9" * digits + "x", now=clock) is None


def test_clamp_retry_after() -> None:
    assert clamp_retry_after_ms(None, max_ms=10) is None
    assert clamp_retry_after_ms(5e12, max_ms=60_000) == 60_000.0
    assert clamp_retry_after_ms(5, max_ms=60_000, min_ms=100) == 100.0
    with pytest.raises(UsageError):
        clamp_retry_after_ms(5, max_ms=1, min_ms=2)
    with pytest.raises(UsageError):
        clamp_retry_after_ms(float("nan"), max_ms=1)
