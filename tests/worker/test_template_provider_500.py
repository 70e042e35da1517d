"""What docs/workers.md says of a failing provider in the template (checked on CPython, where its
agent module runs unchanged): with one provider, a 500 is one call and the run fails with
``provider_failed`` / ``server_error``; a fallback provider is the Worker's only second try."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from bindloop.contracts import UserMessage
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply, turn_reply
from bindloop.checkpoints import create_loop_checkpoint
from bindloop.testing import final_answer

from bindloop.hosts.workers import agent

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "worker" / "src"))
from tools import TOOLS  # noqa: E402  # the template's

BOOM = b'{"error": {"message": "internal", "type": "server_error"}}'


def _run(server: ScriptedProviderServer, **vars: str) -> object:
    cfg = agent.config_from_env(tools=TOOLS, env=SimpleNamespace(
        PROVIDER_BASE_URL=server.base_url("p"), PROVIDER_MODEL="m", PROVIDER_API_KEY="k", **vars))
    model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                              on_turn_event=lambda e: None, turn_prefix="s", first_turn=0)
    start = create_loop_checkpoint(execution_id="s", max_iterations=2,
                                   messages=[UserMessage(content="hi")])
    return anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=model))


def test_a_single_provider_s_500_is_one_call_and_fails_the_run() -> None:
    with ScriptedProviderServer() as server:
        server.set_responder("p", lambda _r: error_reply(500, BOOM))
        with pytest.raises(Exception) as info:
            _run(server)
        assert len(server.requests) == 1  # not retried
    shown = agent.error_event(info.value, session_id="s", revision=0)
    assert (shown["error"], shown["category"], shown["status"]) == ("provider_failed", "server_error", 500)


def test_with_a_fallback_the_500_moves_on_to_it_once() -> None:
    with ScriptedProviderServer() as server:
        server.set_responder("p", lambda _r: error_reply(500, BOOM))
        server.set_responder("f", lambda _r: turn_reply("openai_chat", final_answer("ok"), stream=True))
        _run(server, FALLBACK_BASE_URL=server.base_url("f"), FALLBACK_MODEL="m2",
             FALLBACK_API_KEY="k2")
        assert [r.path.split("/")[1] for r in server.requests] == ["p", "f"]
