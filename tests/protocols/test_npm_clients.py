"""The real frontend clients from npm, on Node, against the ASGI host under uvicorn: npm ``ai``
``DefaultChatTransport`` + ``readUIMessageStream``, npm ``@ag-ui/client``'s ``HttpAgent`` with
its event verifier, and ``@ai-sdk/react``'s ``useChat`` on a page in headless Chromium. The AI SDK
tests run once per major: ``ai@6`` on the system Node (harness/clients/package-lock.json) and ``ai@7`` with
its ``@ai-sdk/react`` on Node 22 from npm ``node@22`` (harness/clients/v7/package-lock.json) -- the same
scripts, given the module root of the major. ``make test-clients`` installs both and runs this
file; without the installs the tests skip, unless ``BINDLOOP_REQUIRE_CLIENTS=1``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from bindloop.textstream import TurnResetEvent, TurnTextEvent
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.hosts.asgi.run_logs import SqliteRunLogs
from bindloop.contracts import AssistantMessage, Message, ToolMessage, UserMessage
from examples.demos.ui_demo import DemoModel, build_demo_app
from ai_sdk_majors import CLIENTS, MAJORS, installed, module_root, node_for, ran_major


def _node_ready(major: int = 6) -> None:
    if not installed(major):
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail("the npm clients are not installed: run `make test-clients`")
        pytest.skip("npm clients not installed (make test-clients)")


def _run(script: str, base: str, *args: str, major: int = 6) -> str:
    """``script`` on the major's Node with its module root as the last argument."""
    node = node_for(major)
    assert node is not None
    proc = subprocess.run([node, str(CLIENTS / script), base, *args, str(module_root(major))],
                          capture_output=True, text=True, timeout=180, cwd=CLIENTS)
    assert proc.returncode == 0, f"{script} (ai@{major}) failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


class RecordingModel(DemoModel):
    """The demo model, keeping every prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[tuple[Message, ...]] = []

    def stream(self, messages: Any, options: Any) -> Any:
        self.prompts.append(tuple(messages))
        return super().stream(messages, options)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize(("script", "major"),
                         [("ai_sdk.mjs", 6), ("ai_sdk.mjs", 7), ("ag_ui.mjs", 6)],
                         ids=["ai_sdk-6", "ai_sdk-7", "ag_ui"])
def test_the_real_client(served: Any, tmp_path: Path, script: str, major: int,
                         store: str) -> None:
    """Each client's scenarios (harness/clients/<script>): a whole run, a cut connection resumed, an
    approval granted and one denied (AI SDK, each major) or resumed as an interrupt (AG-UI), a
    client-side tool (AG-UI), stop -- with the run logs in memory and in SQLite."""
    _node_ready(major)
    deleted: list[str] = []
    logs = SqliteRunLogs(tmp_path / "runs.db") if store == "sqlite" else None
    model = RecordingModel()
    app = build_demo_app(delay_s=0.02, logs=logs, deleted=deleted, model=model)
    with served(app) as base:
        if script == "ag_ui.mjs":
            _run(script, base)
        else:
            assert ran_major(_run(script, base, major=major)) == major
    # The approved deletion ran exactly once; the denied one never.
    assert deleted == ["groceries"]
    # What the client sent back decodes into the transcript the model saw (byte-stable prompts,
    # so a provider's prompt cache keeps hitting): the tool round's prompt, then the answer.
    follow = next(p for p in model.prompts if isinstance(p[-1], UserMessage)
                  and p[-1].content == "thanks")
    first = next(p for p in model.prompts if len(p) == 3 and p[0] == follow[0])
    assert follow[:3] == first
    assert follow[3] == AssistantMessage(content="The tool answered: 6.")
    if script == "ag_ui.mjs":
        return
    # A call whose arguments were not JSON goes back with them (AI SDK 7: the part's input, 6:
    # its rawInput), and the model reads the failure again.
    garbled = next(p for p in model.prompts if isinstance(p[-1], UserMessage)
                   and p[-1].content == "and now?")
    asked = next(p for p in model.prompts if len(p) == 3 and p[0] == garbled[0])
    assert isinstance(garbled[1], AssistantMessage) and isinstance(asked[1], AssistantMessage)
    sent, back = asked[1].tool_calls[0], garbled[1].tool_calls[0]
    assert sent.arguments == '{"text": "two words'
    assert back == sent
    assert isinstance(garbled[2], ToolMessage) and garbled[2].is_error


def test_both_majors_fold_the_stream_into_the_same_messages(served: Any) -> None:
    """ai@6 and ai@7 read the same responses (harness/clients/ai_sdk.mjs, one host) into the same UI
    messages, but for what 7 adds: the approval's requestReason, and a failed call's raw
    arguments as input where 6 has rawInput."""
    for major in MAJORS:
        _node_ready(major)
    with served(build_demo_app(delay_s=0.01)) as base:
        got = {major: json.loads(_run("ai_sdk.mjs", base, major=major).splitlines()[-1])
               for major in MAJORS}
    six, seven = got[6], got[7]
    assert (six.pop("ai")[0], seven.pop("ai")[0]) == ("6", "7")
    approval = seven["approved"]["parts"][1]["approval"]
    assert approval.pop("requestReason") == "approve delete_note?"
    failed = seven["garbled"]["parts"][1]
    failed["rawInput"] = failed.pop("input")
    assert seven == six


@pytest.mark.parametrize(("major", "ai_sdk"), [(6, 6), (7, 6), (7, 7), (6, 7)])
def test_a_retracted_attempt_as_each_client_ends_with_it(served: Any, major: int,
                                                         ai_sdk: int) -> None:
    """A retracted attempt (harness/clients/reset.mjs): announced as a data part (``ChatApp()``), which
    each major keeps and a renderer hides; or as AI SDK 7's reset-step (``ChatApp(ai_sdk=7)``),
    after which ai@7 holds only the retry -- and which ai@6 refuses."""
    _node_ready(major)

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TurnTextEvent(turn_id="t", epoch=0, seq=0, text="Partial"))
        await anyio.sleep(0.01)
        emit(0, TurnResetEvent(turn_id="t", epoch=1, seq=1, reason="fallback"))
        emit(0, TurnTextEvent(turn_id="t", epoch=1, seq=2, text="Full answer."))
        return "Full answer."

    mode = "step" if ai_sdk >= 7 else "data"
    with served(ChatApp(runner, ai_sdk=ai_sdk)) as base:
        if major < ai_sdk:
            with pytest.raises(AssertionError, match="reset-step"):
                _run("reset.mjs", base, mode, major=major)
            return
        assert ran_major(_run("reset.mjs", base, mode, major=major), "version") == major


@pytest.mark.parametrize("major", MAJORS)
def test_use_chat_in_headless_chromium_with_an_approval_clicked_through(served: Any,
                                                                        major: int) -> None:
    """@ai-sdk/react's useChat (the major matching each ``ai``) on a page bundled offline by
    esbuild (harness/clients/use_chat/app.jsx), in headless Debian Chromium driven by playwright-core: a
    tool round streams in, then an approval is clicked and the same assistant message goes on to
    the answer; the deletion runs once."""
    _node_ready(major)
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    if not Path(chromium).is_file():
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail(f"{chromium} not found: apt-get install -y chromium")
        pytest.skip("no Chromium")
    deleted: list[str] = []
    with served(build_demo_app(delay_s=0.01, deleted=deleted)) as base:
        out = _run("use_chat.mjs", base, "demo", major=major)
    assert deleted == ["groceries"]
    assert ran_major(out) == major
    assert ran_major(out, "react") == {6: 3, 7: 4}[major]  # @ai-sdk/react's own major


@pytest.mark.parametrize("major", MAJORS)
def test_a_run_stopped_at_its_log_quota_as_each_client_ends_with_it(served: Any,
                                                                    major: int) -> None:
    """A run streaming without end, stopped at the host's log quota (harness/clients/log_full.mjs):
    the AI SDK keeps the text that came and reports one error, ``log_full`` with the run's id;
    AG-UI's verifying ``HttpAgent`` ends with ``RUN_ERROR`` saying the same."""
    _node_ready(major)
    from bindloop.completion import TextEvent

    async def endless(chat: ChatInput, emit: Emit) -> Any:
        while True:
            emit(0, TextEvent(content="word " * 200))
            await anyio.sleep(0)

    with served(ChatApp(endless, max_log_bytes=40_000)) as base:
        got = json.loads(_run("log_full.mjs", base, major=major).splitlines()[-1])
    assert got["version"].split(".")[0] == str(major)
    assert got["ui"].startswith("the run was stopped: log_full [ref ")
    assert got["agUi"] == "the run was stopped: log_full [ref run-full]"
