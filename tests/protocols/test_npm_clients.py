"""The real frontend clients from npm, on Node, against the ASGI host under uvicorn: npm ``ai`` (v6)
``DefaultChatTransport`` + ``readUIMessageStream``, npm ``@ag-ui/client``'s ``HttpAgent`` with
its event verifier, and ``@ai-sdk/react``'s ``useChat`` on a page in headless Chromium. ``make test-clients`` installs them (clients/package-lock.json) and runs this
file; without the install the tests skip, unless ``BINDLOOP_REQUIRE_CLIENTS=1``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from bindloop.textstream import TurnResetEvent, TurnTextEvent
from bindloop.hosts.asgi import ChatApp, ChatInput, Emit
from bindloop.hosts.asgi_log import SqliteRunLogs
from bindloop.contracts import AssistantMessage, Message, UserMessage
from bindloop.hosts.ui_demo import DemoModel, build_demo_app

CLIENTS = Path(__file__).resolve().parents[2] / "clients"


def _node_ready() -> None:
    installed = all((CLIENTS / "node_modules" / name).is_dir()
                    for name in ("ai", "@ag-ui/client", "@ai-sdk/react", "esbuild",
                                 "playwright-core"))
    if shutil.which("node") is None or not installed:
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail("the npm clients are not installed: run `make test-clients`")
        pytest.skip("npm clients not installed (make test-clients)")


def _run(script: str, base: str) -> str:
    proc = subprocess.run(["node", str(CLIENTS / script), base], capture_output=True, text=True,
                          timeout=120, cwd=CLIENTS)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


class RecordingModel(DemoModel):
    """The demo model, keeping every prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[tuple[Message, ...]] = []

    def stream(self, messages: Any, options: Any) -> Any:
        self.prompts.append(tuple(messages))
        return super().stream(messages, options)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("script", ["ai_sdk.mjs", "ag_ui.mjs"])
def test_the_real_client(served: Any, tmp_path: Path, script: str, store: str) -> None:
    """Each client's scenarios (clients/<script>): a whole run, a cut connection resumed, an
    approval granted and one denied (AI SDK) or resumed as an interrupt (AG-UI), a client-side
    tool (AG-UI), stop -- with the run logs in memory and in SQLite."""
    _node_ready()
    deleted: list[str] = []
    logs = SqliteRunLogs(tmp_path / "runs.db") if store == "sqlite" else None
    model = RecordingModel()
    app = build_demo_app(delay_s=0.02, logs=logs, deleted=deleted, model=model)
    with served(app) as base:
        _run(script, base)
    # The approved deletion ran exactly once; the denied one never.
    assert deleted == ["groceries"]
    # What the client sent back decodes into the transcript the model saw (byte-stable prompts,
    # so a provider's prompt cache keeps hitting): the tool round's prompt, then the answer.
    follow = next(p for p in model.prompts if isinstance(p[-1], UserMessage)
                  and p[-1].content == "thanks")
    first = next(p for p in model.prompts if len(p) == 3 and p[0] == follow[0])
    assert follow[:3] == first
    assert follow[3] == AssistantMessage(content="The tool answered: 6.")


def test_a_retracted_attempt_as_each_client_ends_with_it(served: Any) -> None:
    _node_ready()

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TurnTextEvent(turn_id="t", epoch=0, seq=0, text="Partial"))
        await anyio.sleep(0.01)
        emit(0, TurnResetEvent(turn_id="t", epoch=1, seq=1, reason="fallback"))
        emit(0, TurnTextEvent(turn_id="t", epoch=1, seq=2, text="Full answer."))
        return "Full answer."

    with served(ChatApp(runner)) as base:
        _run("reset.mjs", base)


def test_use_chat_in_headless_chromium_with_an_approval_clicked_through(served: Any) -> None:
    """@ai-sdk/react's useChat on a page bundled offline by esbuild (clients/use_chat/app.jsx), in
    headless Debian Chromium driven by playwright-core: a tool round streams in, then an approval
    is clicked and the same assistant message goes on to the answer; the deletion runs once."""
    _node_ready()
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    if not Path(chromium).is_file():
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail(f"{chromium} not found: apt-get install -y chromium")
        pytest.skip("no Chromium")
    deleted: list[str] = []
    with served(build_demo_app(delay_s=0.01, deleted=deleted)) as base:
        _run("use_chat.mjs", base)
    assert deleted == ["groceries"]
