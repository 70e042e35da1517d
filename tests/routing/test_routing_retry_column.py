"""One retry table: ``create_retry_middleware`` decides same-provider retries from the disposition table's
``same_provider_retry`` column, and a clamped disposition (output already shown) never retries."""

from __future__ import annotations

import pytest

from bindloop.wire import is_retryable
from bindloop.wire import StreamStalledError
from bindloop.wire import StreamStall
from bindloop.routing.failures import FAILURE_CATEGORIES, FAILURE_DISPOSITIONS, failure_disposition
from bindloop.wire import IncompleteStreamError, ProviderHttpError, TransportError


@pytest.mark.parametrize("category", sorted(FAILURE_CATEGORIES))
def test_is_retryable_reads_the_table(category: str) -> None:
    error = ProviderHttpError("boom", wire="openai_chat", category=category, status_code=500)
    assert is_retryable(error) is FAILURE_DISPOSITIONS[category].same_provider_retry
    assert failure_disposition(category, produced_output=True).same_provider_retry is False


def test_the_transient_categories_are_the_retried_ones() -> None:
    retried = {c for c, d in FAILURE_DISPOSITIONS.items() if d.same_provider_retry}
    assert retried == {"rate_limited", "server_error", "timeout", "connection", "stream_stall"}


def test_errors_without_an_http_category_map_to_one() -> None:
    stall = StreamStall(kind="idle", budget_ms=1.0, elapsed_ms=2.0, answer_chunks=0,
                        reasoning_chunks=0)
    assert is_retryable(StreamStalledError(stall))
    assert is_retryable(TransportError("reset", kind="connection"))
    assert is_retryable(TransportError("slow", kind="timeout"))
    assert is_retryable(IncompleteStreamError("cut"))
    assert not is_retryable(ValueError("bug"))
