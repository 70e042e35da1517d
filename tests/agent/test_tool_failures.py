"""Failures you can see: a tool's raise reaches the host by default — one redacted WARNING record on
the ``bindloop.agent.tools`` logger and a report on ``ChatResult.tool_failures`` — while the model
reads the redacted error it always read; a hook of the host's replaces the record (no duplicate);
bindloop's own store failing inside a tool stops the prompt, which resumes from its last save and
runs the effect once."""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import pytest

from bindloop.errors import UsageError
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    TOOL_LOGGER,
    ChatResult,
    ToolErrorReport,
    create_agent,
    equip_instruction,
    equip_tool,
    log_tool_error,
    prompt_chat,
    resume_chat,
    run_with,
)
from bindloop.contracts import ToolMessage, ToolResult, content_text
from bindloop.tools import define_tool
from bindloop.run import ReceiptExecute, ReceiptReplay, ToolCallReceiptKey, \
    decide_tool_call_receipt
from bindloop.checkpoints import LoopCheckpoint, serialize_loop_checkpoint
from bindloop.stores import StoreError
from bindloop.stores import MemoryToolCallReceiptStore
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio
SECRET = "sk-live-0123456789abcdef"


class Q(msgspec.Struct):
    q: str


class Refused(RuntimeError):
    pass


async def _failing(args: Q, ctx: object) -> ToolResult:
    try:
        raise ConnectionError(f"dial https://user:{SECRET}@db.internal failed")
    except ConnectionError as exc:
        error = Refused(f"db refused: Authorization: Bearer {SECRET}")
        error.add_note(f"retry with ?api_key={SECRET}")
        raise error from exc


FAILING = define_tool(name="flaky", description="f", args=Q, execute=_failing)


async def _no_ctx(args: Q) -> ToolResult:  # the ctx parameter forgotten: a developer's error
    return ToolResult(content=args.q)


def _handler(tool: Any) -> Any:
    async def handler(_: None) -> ChatResult:
        equip_instruction("q")
        equip_tool(tool)
        return await prompt_chat()

    return handler


def _model(name: str = "flaky") -> Any:
    return scripted_stream_model([tool_call_turn([tool_call(name, {"q": "a"}, id="c1")]),
                                  final_answer("sorry")])


def _records(caplog: Any) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == TOOL_LOGGER]


async def test_a_raise_is_a_redacted_warning_and_a_report_on_the_result_by_default(
        caplog: Any) -> None:
    model = _model()
    with caplog.at_level(logging.DEBUG):
        result = await create_agent(id="a", handler=_handler(FAILING), model=model)(None)
    assert result.data == "sorry"  # the chat went on
    (record,) = _records(caplog)
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith("tool flaky (call c1) of agent a failed: Refused: db refused")
    assert record.bindloop == {"call_id": "c1", "tool_name": "flaky", "agent_id": "a",
                               "session_id": None, "trace_id": None, "error_type": "Refused"}
    # exc_info: the real type and traceback; every text in it (chain and notes too) redacted.
    assert record.exc_info is not None and record.exc_info[0] is Refused
    shown = logging.Formatter().format(record)
    assert "Traceback" in shown and "_failing" in shown and "Refused: db refused" in shown
    assert "ConnectionError: dial https://" in shown and "retry with ?api_key=" in shown
    assert SECRET not in shown

    # The result: the exception for the host, and what the model read (unchanged: the redacted
    # type and fixed text).
    (failure,) = result.tool_failures
    assert (failure.call_id, failure.tool_name, failure.agent_id) == ("c1", "flaky", "a")
    assert isinstance(failure.error, Refused) and SECRET in str(failure.error)
    assert failure.error_type == "Refused"
    read = model.requests[1].messages[-1]
    assert isinstance(read, ToolMessage) and failure.model_read == content_text(read.content)
    assert "Refused: the tool failed" in failure.model_read and SECRET not in failure.model_read


async def test_the_model_reads_the_same_with_a_hook_and_the_hook_replaces_the_record(
        caplog: Any) -> None:
    plain, hooked = _model(), _model()
    reports: list[ToolErrorReport] = []
    with caplog.at_level(logging.DEBUG):
        await create_agent(id="a", handler=_handler(FAILING), model=plain)(None)
        caplog.clear()
        result = await run_with(create_agent(id="a", handler=_handler(FAILING)), model=hooked,
                                on_tool_error=reports.append, session_id="s1")
    assert _records(caplog) == []  # the host's hook replaces the default: no duplicate
    (report,) = reports
    assert (report.call_id, report.session_id, report.model_read) == ("c1", "s1", None)
    assert result.tool_failures[0].error is report.error
    assert hooked.requests[1].messages[-1] == plain.requests[1].messages[-1]


async def test_a_hook_can_keep_the_default_record(caplog: Any) -> None:
    reports: list[ToolErrorReport] = []

    def both(report: ToolErrorReport) -> None:
        log_tool_error(report)
        reports.append(report)

    with caplog.at_level(logging.DEBUG):
        await run_with(create_agent(id="a", handler=_handler(FAILING)), model=_model(),
                       on_tool_error=both)
    assert len(_records(caplog)) == 1 and len(reports) == 1


async def test_a_disabled_logger_costs_nothing_and_the_result_still_reports(caplog: Any) -> None:
    with caplog.at_level(logging.ERROR, logger=TOOL_LOGGER):
        result = await create_agent(id="a", handler=_handler(FAILING), model=_model())(None)
    assert _records(caplog) == [] and len(result.tool_failures) == 1


def test_a_tool_written_without_its_ctx_parameter_is_refused_when_defined() -> None:
    """The forgotten ``ctx`` would fail only when the model calls the tool (a TypeError the model
    reads): it is a UsageError when the tool is defined, before any run."""
    with pytest.raises(UsageError, match="execute"):
        define_tool(name="echo", description="e", args=Q, execute=_no_ctx)  # type: ignore[arg-type]


async def test_a_chat_without_failures_reports_none(caplog: Any) -> None:
    ok = define_tool(name="flaky", description="f", args=Q,
                     execute=lambda args, ctx: ToolResult(content="fine"))
    with caplog.at_level(logging.DEBUG):
        result = await create_agent(id="a", handler=_handler(ok), model=_model())(None)
    assert result.tool_failures == () and _records(caplog) == []


# -- bindloop's own store failing inside a tool ------------------------------------------------

class ClaimFailsOnce(MemoryToolCallReceiptStore):
    """The ``fail_at``-th claim raises (the connection dropped before it reached the store)."""

    def __init__(self, fail_at: int = 1) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.claims = 0
        self.effects: list[str] = []

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        self.claims += 1
        if self.claims == self.fail_at:
            raise StoreError("memory", "claim", "connection reset")
        return await super().claim(key, attempt, lease_ms)


def _charging(store: ClaimFailsOnce) -> Any:
    async def charge(args: Q, ctx: object) -> ToolResult:
        key = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash=args.q)
        decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable")
        if isinstance(decision, ReceiptReplay):
            return ToolResult(content=str(decision.result))
        assert isinstance(decision, ReceiptExecute)
        assert await store.claim(key, decision.attempt, 60_000)
        store.effects.append(args.q)
        assert await store.complete(key, decision.attempt, f"charged {args.q}")
        return ToolResult(content=f"charged {args.q}")

    return define_tool(name="charge", description="c", args=Q, execute=charge)


async def test_a_store_error_in_a_tool_stops_the_prompt_and_the_resume_runs_the_effect_once(
        caplog: Any) -> None:
    store = ClaimFailsOnce()
    saved: list[bytes] = []

    def keep(cp: LoopCheckpoint) -> None:
        saved.append(serialize_loop_checkpoint(cp))

    turns = [tool_call_turn([tool_call("charge", {"q": "first"}, id="c1")]),
             tool_call_turn([tool_call("charge", {"q": "second"}, id="c2")]),
             final_answer("charged twice")]

    async def start(_: None) -> ChatResult:
        equip_instruction("charge twice")
        equip_tool(_charging(store))
        return await prompt_chat(on_checkpoint=keep)

    with caplog.at_level(logging.DEBUG), pytest.raises(StoreError, match="claim failed"):
        await create_agent(id="a", handler=start, model=scripted_stream_model(turns))(None)
    assert _records(caplog) == [] and store.effects == []  # fatal: not a tool error, not run
    assert saved == []  # stopped before the first boundary: the chat resumes from its start

    async def again(_: None) -> ChatResult:
        equip_instruction("charge twice")
        equip_tool(_charging(store))
        return await prompt_chat(on_checkpoint=keep)

    model = scripted_stream_model(turns)
    result = await create_agent(id="a", handler=again, model=model)(None)
    assert store.effects == ["first", "second"] and result.tool_failures == ()
    read = [content_text(m.content) for m in result.delta if isinstance(m, ToolMessage)]
    assert read == ["charged first", "charged second"]  # the model never read a store error


async def test_a_store_error_after_a_save_resumes_from_it(caplog: Any) -> None:
    store = ClaimFailsOnce(fail_at=2)  # the second call's claim
    saved: list[bytes] = []

    def keep(cp: LoopCheckpoint) -> None:
        saved.append(serialize_loop_checkpoint(cp))

    turns = [tool_call_turn([tool_call("charge", {"q": "first"}, id="c1")]),
             tool_call_turn([tool_call("charge", {"q": "second"}, id="c2")]),
             final_answer("charged twice")]

    async def start(_: None) -> ChatResult:
        equip_instruction("charge twice")
        equip_tool(_charging(store))
        return await prompt_chat(on_checkpoint=keep)

    with caplog.at_level(logging.DEBUG), pytest.raises(StoreError):
        await create_agent(id="a", handler=start, model=scripted_stream_model(turns))(None)
    assert store.effects == ["first"] and len(saved) == 1

    async def resumed(_: None) -> ChatResult:
        equip_tool(_charging(store))
        return await resume_chat(saved[-1], on_checkpoint=keep)

    model = scripted_stream_model(turns[1:])
    result = await create_agent(id="a", handler=resumed, model=model)(None)
    assert store.effects == ["first", "second"] and result.data == "charged twice"
    assert _records(caplog) == []
    read = [content_text(m.content) for m in result.delta if isinstance(m, ToolMessage)]
    assert read == ["charged second"]


# -- the record never shows a credential, whatever the exception's shape ------------------------

_TOKEN = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789",
                 min_size=12, max_size=24)
_SHAPES = st.sampled_from(["Authorization: Bearer {}", "https://app:{}@db.internal/x",
                           "GET /v1?api_key={}&x=1", "Basic {}=="])
_TYPES = st.sampled_from([ValueError, KeyError, OSError, Refused, ConnectionError])


@st.composite
def _exceptions(draw: st.DrawFn, depth: int = 0) -> tuple[BaseException, list[str]]:
    """An exception tree — causes, contexts, notes, groups — whose texts hold credentials."""
    secrets: list[str] = []

    def text() -> str:
        secret = draw(_TOKEN)
        secrets.append(secret)
        return draw(_SHAPES).format(secret)

    if depth < 2 and draw(st.booleans()):
        inner = [draw(_exceptions(depth + 1)) for _ in range(draw(st.integers(1, 2)))]
        for _, s in inner:
            secrets += s
        exc: BaseException = ExceptionGroup(text(), [e for e, _ in inner])  # type: ignore[misc]
    else:
        exc = draw(_TYPES)(text())
    if draw(st.booleans()):
        exc.add_note(text())
    if depth < 2 and draw(st.booleans()):
        cause, more = draw(_exceptions(depth + 1))
        secrets += more
        if draw(st.booleans()):
            exc.__cause__ = cause
        else:
            exc.__context__ = cause
    return exc, secrets


@settings(max_examples=60, deadline=None)
@given(tree=_exceptions())
def test_no_credential_reaches_the_record_or_its_traceback(tree: tuple[BaseException, list[str]]
                                                           ) -> None:
    exc, secrets = tree
    try:
        raise exc
    except BaseException as raised:  # noqa: BLE001 - the tool's raise, with its traceback
        error = raised
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger, keep = logging.getLogger(TOOL_LOGGER), Keep()
    logger.addHandler(keep)
    try:
        log_tool_error(ToolErrorReport(call_id="c", tool_name="t", agent_id="a", error=error))
    finally:
        logger.removeHandler(keep)
    (record,) = records
    shown = logging.Formatter().format(record)
    assert not [s for s in secrets if s in shown], shown
    assert record.exc_info is not None and record.exc_info[0] is type(error)
    assert f"{type(error).__name__}" in shown and "Traceback" in shown


def test_an_exception_whose_str_raises_is_still_reported(caplog: Any) -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    with caplog.at_level(logging.DEBUG):
        log_tool_error(ToolErrorReport(call_id="c", tool_name="t", agent_id="a", error=Broken()))
    (record,) = _records(caplog)
    assert "Broken: <exception str() failed>" in record.getMessage()


@pytest.mark.parametrize("secret", ["Basic 2aaaaaaaaaaa==", "Basic aaaaaaaaaaaa==",
                                    "Basic Zm9vOmJhcmJhcmJh"])
def test_a_basic_credential_with_a_leading_digit_or_only_padding_is_redacted(secret: str) -> None:
    """Found by the property below: a Basic token whose only digit was its first character (or
    that had only padding) reached the record."""
    try:
        raise ValueError(secret)
    except ValueError as raised:
        error = raised
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger, keep = logging.getLogger(TOOL_LOGGER), Keep()
    logger.addHandler(keep)
    try:
        log_tool_error(ToolErrorReport(call_id="c", tool_name="t", agent_id="a", error=error))
    finally:
        logger.removeHandler(keep)
    (record,) = records
    assert secret.split()[1] not in logging.Formatter().format(record)
