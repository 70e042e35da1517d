"""The Worker template's files agree with each other and with the workerd config the tests use;
its agent module (no Workers API in it) is checked on CPython."""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import anyio
import msgspec

from bindloop.contracts import ModelTurnResult, ToolError, ToolResult, ToolSuspend, UserMessage
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply, turn_reply
from bindloop.checkpoints import (
    CheckpointReply,
    LoopCheckpoint,
    apply_checkpoint_input,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.tools import define_tool
from bindloop.testing import final_answer, tool_call, tool_call_turn

WORKER = Path(__file__).resolve().parents[2] / "worker"
sys.path.insert(0, str(WORKER / "src"))
sys.path.insert(0, str(WORKER / "tools"))
from tools import TOOLS  # noqa: E402  # the template's

from bindloop.hosts.workers import agent  # noqa: E402
from workerd_harness import COMPATIBILITY_FLAGS  # noqa: E402


def wrangler() -> dict:  # type: ignore[type-arg]
    text = (WORKER / "wrangler.jsonc").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def test_wrangler_config_matches_the_entry_module() -> None:
    cfg = wrangler()
    assert (WORKER / cfg["main"]).is_file()
    tree = ast.parse((WORKER / cfg["main"]).read_text())
    # The entry module exports each bound Durable Object class: Session subclasses the
    # library's (with the template's tools), RateLimiter is imported from it as it is.
    defined = {n.name: [ast.unparse(b) for b in n.bases] for n in tree.body
               if isinstance(n, ast.ClassDef)}
    imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                and n.module == "bindloop.hosts.workers.app" for a in n.names}
    bindings = cfg["durable_objects"]["bindings"]
    assert bindings == [{"name": "SESSION", "class_name": "Session"},
                        {"name": "LIMITS", "class_name": "RateLimiter"}]
    assert defined["Session"] == ["app.Session"] and defined["Default"] == ["app.ChatWorker"]
    assert "RateLimiter" in imported
    migrated = [c for m in cfg["migrations"] for c in m["new_sqlite_classes"]]
    assert migrated == ["Session", "RateLimiter"]
    # Deploy flags are the test flags minus the dev-Pyodide ones only workerd's tests use, plus
    # the two that pin Python 3.14 -- which the tests switch off (no_...) to load the dev bundle.
    dev_only = {f for f in COMPATIBILITY_FLAGS if f.startswith(("no_python_workers", "python_workers_"))}
    pinned = {"python_workers_20260610", "python_workers_314"}
    assert set(cfg["compatibility_flags"]) == set(COMPATIBILITY_FLAGS) - dev_only | pinned
    assert {f"no_{f}" for f in pinned} <= set(COMPATIBILITY_FLAGS)
    assert "OPENAI_API_KEY" not in cfg["vars"]  # a secret, never a var


def test_pyproject_is_pywrangler_shaped() -> None:
    meta = tomllib.loads((WORKER / "pyproject.toml").read_text())
    assert meta["project"]["dependencies"] == ["bindloop"]
    # Never by index name: the repository's own wheel (tests/worker/test_workerd_resolve.py
    # resolves it offline).
    assert meta["tool"]["uv"]["sources"]["bindloop"]["path"].startswith("../dist/bindloop-")
    assert meta["project"]["requires-python"] == ">=3.14"
    assert any(d.startswith("workers-py") for d in meta["dependency-groups"]["dev"])
    assert "$schema" not in wrangler()  # it pointed into a node_modules/wrangler never installed


def env(**values: str) -> SimpleNamespace:
    base = {"PROVIDER_BASE_URL": "http://p", "PROVIDER_MODEL": "m", "PROVIDER_API_KEY": "sk-1"}
    return SimpleNamespace(**{**base, **values})


def test_config_from_env_reads_providers_and_refuses_naming_the_variable() -> None:
    cfg = agent.config_from_env(tools=TOOLS, env=env(FALLBACK_BASE_URL="http://f", FALLBACK_WIRE="anthropic",
                                    FALLBACK_MODEL="c", FALLBACK_API_KEY="sk-2", MAX_ITERATIONS="3"))
    assert [(p.id, p.wire) for p in cfg.providers] == [("primary", "openai_chat"),
                                                       ("fallback", "anthropic")]
    assert cfg.max_iterations == 3
    assert cfg.max_log_bytes == 8 * 1024 * 1024  # MAX_LOG_BYTES unset: the default quota
    assert agent.config_from_env(tools=TOOLS, env=env(MAX_LOG_BYTES="20000")).max_log_bytes == 20000
    plan = agent.route_plan(cfg)
    assert [c.provider_invocation_model for c in plan.stages[0].candidates] == ["m", "c"]
    for bad, name in ((env(PROVIDER_API_KEY=""), "PROVIDER_API_KEY"),
                      (env(PROVIDER_WIRE="soap"), "PROVIDER_WIRE"),
                      (env(MAX_ITERATIONS="0"), "MAX_ITERATIONS"),
                      (env(MAX_LOG_BYTES="4 MiB"), "MAX_LOG_BYTES"),
                      (env(MAX_LOG_BYTES="0"), "MAX_LOG_BYTES"),
                      (SimpleNamespace(), "PROVIDER_BASE_URL")):
        with pytest.raises(agent.HttpError) as info:
            agent.config_from_env(tools=TOOLS, env=bad)
        assert name in info.value.message and "sk-" not in info.value.message


def test_tools() -> None:
    ask, count = TOOLS
    assert anyio.run(ask.execute, '{"question": "Name?"}', None) == ToolSuspend(
        mode="waiting_for_reply", detail="Name?")
    assert anyio.run(count.execute, '{"text": "a b c"}', None) == ToolResult(content="3")
    for raw in ("{", "[]", '{"question": ""}', "{}"):
        outcome = anyio.run(ask.execute, raw, None)
        assert isinstance(outcome, ToolError) and outcome.kind == "validation", raw


def _served_session(turns: list[ModelTurnResult]) -> tuple[list[Any], ScriptedProviderServer]:
    server = ScriptedProviderServer().start()
    queue = list(turns)
    server.set_responder("p", lambda _r: turn_reply("openai_chat", queue.pop(0), stream=True))
    return [], server


def test_run_session_through_the_agent_api_on_cpython() -> None:
    """prompt_chat to a suspend, the reply applied, resume_chat to done: each settled checkpoint
    one revision after its input, the session's id, budget and turn count kept."""
    events, server = _served_session([
        tool_call_turn([tool_call("ask_user", {"question": "Name?"}, id="q1")]),
        final_answer("Hi, Ada."),
    ])
    try:
        cfg = agent.config_from_env(tools=TOOLS, env=env(PROVIDER_BASE_URL=server.base_url("p"), MAX_ITERATIONS="5"))

        def model(start: LoopCheckpoint) -> Any:
            return agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                                     on_turn_event=events.append, turn_prefix="s1",
                                     first_turn=start.iterations)

        start = create_loop_checkpoint(execution_id="s1", max_iterations=5,
                                       messages=[UserMessage(content="ask me")])
        paused = anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=model(start)))
        cp = paused.checkpoint
        assert (paused.stop_reason, cp.status, cp.revision) == ("waiting_for_reply", "waiting_for_reply", 1)
        assert (cp.execution_id, cp.max_iterations, cp.iterations) == ("s1", 5, 1)
        replied = apply_checkpoint_input(cp, CheckpointReply(tool_call_id="q1", content="Ada"))
        done = anyio.run(lambda: agent.run_session(replied, tools=TOOLS, model=model(replied)))
        end = done.checkpoint
        assert (done.stop_reason, done.text, end.status) == ("done", "Hi, Ada.", "finished")
        assert (end.revision, end.iterations, end.execution_id) == (replied.revision + 1, 2, "s1")
        assert parse_loop_checkpoint(serialize_loop_checkpoint(end)) == end
        assert [type(m).__name__ for m in end.messages] == [
            "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]
        assert sorted({e.turn_id for e in events}) == ["s1:2"]  # the text turn, streamed live
        spent = msgspec.structs.replace(end, max_iterations=2)  # the budget all used
        again = apply_checkpoint_input(spent, UserMessage(content="more"))
        with pytest.raises(agent.HttpError) as info:
            anyio.run(lambda: agent.run_session(again, tools=TOOLS, model=model(again)))
        assert info.value.code == "iteration_limit"
    finally:
        server.stop()


def test_run_session_saves_each_finished_round_and_a_failed_run_resumes_from_it() -> None:
    """The provider fails after one word_count round: the save of that round is what storage
    holds, and running it again finishes without asking for (or running) the round again."""
    replies = [turn_reply("openai_chat", tool_call_turn([tool_call("word_count", {"text": "a b c"},
                                                                   id="w1")]), stream=True),
               error_reply(503, b'{"error": {"message": "overloaded"}}'),
               turn_reply("openai_chat", final_answer("Three words."), stream=True)]
    server = ScriptedProviderServer().start()
    server.set_responder("p", lambda _r: replies.pop(0))
    try:
        cfg = agent.config_from_env(tools=TOOLS, env=env(PROVIDER_BASE_URL=server.base_url("p"), MAX_ITERATIONS="5"))

        def model(start: LoopCheckpoint) -> Any:
            return agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                                     on_turn_event=lambda e: None, turn_prefix="s2",
                                     first_turn=start.iterations)

        stored: list[LoopCheckpoint] = []

        async def save(cp: LoopCheckpoint) -> None:
            stored.append(parse_loop_checkpoint(serialize_loop_checkpoint(cp)))

        start = msgspec.structs.replace(create_loop_checkpoint(
            execution_id="s2", max_iterations=5, messages=[UserMessage(content="count a b c")]),
            revision=3)
        with pytest.raises(Exception, match="503|overloaded"):
            anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=model(start), save=save))
        (saved,) = stored
        assert (saved.status, saved.revision, saved.iterations, saved.execution_id) == (
            "ready", 4, 1, "s2")
        assert [type(m).__name__ for m in saved.messages][-1] == "ToolMessage"
        done = anyio.run(lambda: agent.run_session(saved, tools=TOOLS, model=model(saved), save=save))
        end = done.checkpoint
        assert (done.text, end.status, end.revision, end.iterations) == ("Three words.", "finished", 5, 2)
        assert [type(m).__name__ for m in end.messages].count("ToolMessage") == 1
        assert len(server.requests) == 3 and len(stored) == 1  # the round was not asked for again
        assert agent.stopped_checkpoint(saved).revision == saved.revision + 1
    finally:
        server.stop()


def test_a_rate_limit_without_a_store_is_a_named_misconfiguration() -> None:
    cfg = agent.config_from_env(tools=TOOLS, env=env(RATE_LIMIT_CONCURRENCY="2"))
    assert cfg.rate_limit_concurrency == 2 and cfg.rate_limit_rpm is None
    with pytest.raises(agent.HttpError) as info:
        agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                          on_turn_event=lambda e: None, turn_prefix="s", first_turn=0)
    assert "LIMITS" in info.value.message


def test_reply_then_a_tool_round_then_the_answer_stores_consistent_counters() -> None:
    """D2: a session that asked the user, then (after the reply) ran one more tool round, then
    answered: every stored checkpoint -- the suspend, the round's save, the settled one -- reloads,
    and requested tool calls cover the calls that ran. Then a second message in the same session
    (prompt_chat over the history) with a round of its own: the same holds."""
    turns = [tool_call_turn([tool_call("ask_user", {"question": "Name?"}, id="q1")]),
             tool_call_turn([tool_call("word_count", {"text": "a b"}, id="w1")]),
             final_answer("Two words, Ada."),
             tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="w2"),
                             tool_call("word_count", {"text": "d"}, id="w3")]),
             final_answer("Done again.")]
    server = ScriptedProviderServer().start()
    server.set_responder("p", lambda _r: turn_reply("openai_chat", turns.pop(0), stream=True))
    stored: list[LoopCheckpoint] = []

    async def save(cp: LoopCheckpoint) -> None:
        stored.append(parse_loop_checkpoint(serialize_loop_checkpoint(cp)))

    try:
        cfg = agent.config_from_env(tools=TOOLS, env=env(PROVIDER_BASE_URL=server.base_url("p"), MAX_ITERATIONS="9"))

        def run(cp: LoopCheckpoint) -> Any:
            model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                                      on_turn_event=lambda e: None, turn_prefix="s3",
                                      first_turn=cp.iterations)
            return anyio.run(lambda: agent.run_session(cp, tools=TOOLS, model=model, save=save))

        start = create_loop_checkpoint(execution_id="s3", max_iterations=9,
                                       messages=[UserMessage(content="ask me, then count")])
        paused = run(start).checkpoint
        replied = apply_checkpoint_input(paused, CheckpointReply(tool_call_id="q1", content="Ada"))
        done = run(replied)
        end = parse_loop_checkpoint(serialize_loop_checkpoint(done.checkpoint))
        assert (done.text, end.status, end.iterations) == ("Two words, Ada.", "finished", 3)
        assert end.stats.tool_calls == 2 and end.counters.requested_tool_calls == 2
        assert len(stored) == 1 and stored[0].counters.requested_tool_calls == 2
        again = apply_checkpoint_input(end, UserMessage(content="count more"))
        more = run(again)
        last = parse_loop_checkpoint(serialize_loop_checkpoint(more.checkpoint))
        assert (more.text, last.iterations, last.stats.tool_calls) == ("Done again.", 5, 4)
        assert last.counters.requested_tool_calls == 4
        assert stored[-1].counters.requested_tool_calls == 4  # the second prompt's round save
    finally:
        server.stop()


def test_error_events_keep_a_refused_save_s_revision_and_never_show_a_url() -> None:
    """D5: a save refused by storage names storage's revision, not the run's stale one. D6: a
    provider that cannot be reached is reported by provider id and failure category only."""
    refused = agent.HttpError(409, "stale_revision", "session 's' is at revision 1, not 0",
                              revision=1)
    event = agent.error_event(refused, session_id="s", revision=0)
    assert (event["error"], event["revision"], event["session_id"]) == ("stale_revision", 1, "s")
    assert agent.error_event(RuntimeError("x"), session_id="s", revision=4)["revision"] == 4

    import socket
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = agent.config_from_env(tools=TOOLS, env=env(PROVIDER_BASE_URL=f"http://127.0.0.1:{port}/internal-gw/v1"))
    model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                              on_turn_event=lambda e: None, turn_prefix="s", first_turn=0)
    start = create_loop_checkpoint(execution_id="s", max_iterations=2,
                                   messages=[UserMessage(content="hi")])
    with pytest.raises(Exception) as info:
        anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=model))
    assert "127.0.0.1" in str(info.value)  # the exception itself names the upstream ...
    shown = agent.error_event(info.value, session_id="s", revision=0)
    assert shown["error"] == "provider_failed" and shown["category"] == "connection"
    text = json.dumps(shown)
    assert "127.0.0.1" not in text and "internal-gw" not in text and "://" not in text  # ... not this
    assert "primary" in shown["message"]


def test_budgets_heartbeat_and_lease_come_from_the_worker_s_vars() -> None:
    default = agent.config_from_env(tools=TOOLS, env=env())
    assert default.budgets.first_token_ms == 120_000 and default.heartbeat_ms == 15_000
    assert default.lease_ms == agent.DEFAULT_LEASE_MS
    cfg = agent.config_from_env(tools=TOOLS, env=env(STREAM_FIRST_TOKEN_MS="2500", STREAM_INTER_CHUNK_MS="0",
                                    STREAM_TOTAL_MS="90000", SSE_HEARTBEAT_MS="0",
                                    RUN_LEASE_MS="5000"))
    assert (cfg.budgets.first_token_ms, cfg.budgets.inter_chunk_ms, cfg.budgets.total_ms) == (
        2500, None, 90_000)
    assert (cfg.heartbeat_ms, cfg.lease_ms) == (None, 5000)
    for name, bad in (("STREAM_TOTAL_MS", "-1"), ("SSE_HEARTBEAT_MS", "soon"), ("RUN_LEASE_MS", "0")):
        with pytest.raises(agent.HttpError) as info:
            agent.config_from_env(tools=TOOLS, env=env(**{name: bad}))
        assert name in info.value.message


def test_continue_delay_and_approval_tools_come_from_the_worker_s_vars() -> None:
    default = agent.config_from_env(tools=TOOLS, env=env())
    assert (default.continue_after_ms, default.approval_tools) == (0, frozenset())
    cfg = agent.config_from_env(tools=TOOLS, env=env(RUN_CONTINUE_MS="4000", APPROVAL_TOOLS=" word_count, "))
    assert (cfg.continue_after_ms, cfg.approval_tools) == (4000, frozenset({"word_count"}))
    for name, bad in (("RUN_CONTINUE_MS", "later"), ("APPROVAL_TOOLS", "word_count,rm_rf")):
        with pytest.raises(agent.HttpError) as info:
            agent.config_from_env(tools=TOOLS, env=env(**{name: bad}))
        assert name in info.value.message and info.value.status == 500


def test_run_view_tells_a_live_run_from_a_lost_one() -> None:
    live = agent.run_view({"lease": {"run": "r3", "expires_in_ms": 900}, "last_run": None})
    assert live == {"state": "running", "run_id": "r3", "lease_ms_left": 900}
    lost = agent.run_view({"lease": {"run": "r3", "expires_in_ms": -10},
                           "last_run": {"run": "r1", "outcome": "waiting_for_reply"}})
    assert lost == {"state": "lost", "run_id": "r3",
                    "last": {"run_id": "r1", "outcome": "waiting_for_reply"}}
    assert agent.run_view({"lease": None, "last_run": None}) == {"state": "idle"}


def test_run_session_reports_each_tool_call_for_the_v1_stream() -> None:
    """``on_tool`` (the ``/v1`` stream's ``tool`` events) sees every call start with its
    arguments and finish with its outcome; a raise is the redacted tool error the model read,
    never the exception's message."""

    @define_tool
    def lookup(city: str) -> str:
        """Look a city up."""
        raise ConnectionError(f"backend down for {city} at http://10.0.0.1/secret")

    events, server = _served_session([
        tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="w1"),
                        tool_call("lookup", {"city": "Lisbon"}, id="l1")]),
        final_answer("Done."),
    ])
    seen: list[dict[str, Any]] = []
    try:
        cfg = agent.config_from_env(tools=TOOLS, env=env(PROVIDER_BASE_URL=server.base_url("p")))
        model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                                  on_turn_event=events.append, turn_prefix="t", first_turn=0)
        start = create_loop_checkpoint(execution_id="t", max_iterations=4,
                                       messages=[UserMessage(content="count")])
        run = anyio.run(lambda: agent.run_session(start, tools=(*TOOLS, lookup), model=model,
                                                  on_tool=seen.append))
    finally:
        server.stop()
    assert run.text == "Done."
    by_phase = {(e["phase"], e["id"]): e for e in seen}
    assert by_phase["started", "w1"] == {"phase": "started", "id": "w1", "name": "word_count",
                                         "arguments": '{"text":"a b c"}'}
    assert by_phase["finished", "w1"] == {"phase": "finished", "id": "w1", "name": "word_count",
                                          "outcome": "result", "content": "3"}
    failed = by_phase["finished", "l1"]
    assert failed["outcome"] == "error" and "ConnectionError" in failed["error"], failed
    assert "Lisbon" not in json.dumps(failed) and "10.0.0.1" not in json.dumps(failed)
    assert len(seen) == 4


def test_live_run_bound_and_chat_expiry_vars() -> None:
    default = agent.config_from_env(tools=TOOLS, env=env())
    assert (default.max_live_runs, default.chat_ttl_ms) == (None, None)
    cfg = agent.config_from_env(tools=TOOLS, env=env(MAX_LIVE_RUNS="3", CHAT_TTL_MS="86400000"))
    assert (cfg.max_live_runs, cfg.chat_ttl_ms) == (3, 86_400_000)
    assert agent.chat_ttl_ms(env(CHAT_TTL_MS="0")) is None
    for name, bad in (("MAX_LIVE_RUNS", "0"), ("MAX_LIVE_RUNS", "x"), ("CHAT_TTL_MS", "-1"),
                      ("CHAT_TTL_MS", "1.5")):
        with pytest.raises(agent.HttpError) as info:
            agent.config_from_env(tools=TOOLS, env=env(**{name: bad}))
        assert info.value.code == "misconfigured" and name in info.value.message


def template_model() -> Any:
    """The template's ``model`` function, as written in worker/src/entry.py (the module itself
    imports the Workers runtime): its source run with ``create_model``."""
    from bindloop.hosts import create_model

    tree = ast.parse((WORKER / "src" / "entry.py").read_text())
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "model"]
    space: dict[str, Any] = {"create_model": create_model}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "entry.py", "exec"), space)
    return space["model"]


def test_the_template_s_model_is_one_create_model_line_and_a_class_attribute() -> None:
    tree = ast.parse((WORKER / "src" / "entry.py").read_text())
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "model"]
    assert len(func.body) == 1 and "create_model(" in ast.unparse(func.body[0])
    # Both classes carry it, read from the class (model_of), so it is never bound as a method.
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        assert "model" in ast.unparse(cls)
    holder = type("Holder", (), {"model": template_model()})
    assert agent.model_of(holder()) is holder.__dict__["model"]
    assert agent.model_of(object()) is None
    # The template's Python, entry.py and tools.py together: within 40 lines of code.
    lines = [line for f in ("entry.py", "tools.py") for line in
             (WORKER / "src" / f).read_text().splitlines()]
    assert len(lines) <= 40, len(lines)


def test_the_template_s_one_line_model_runs_a_tool_round_with_its_key_from_the_env() -> None:
    """The key the OPENAI_API_KEY secret, the endpoint moved by OPENAI_BASE_URL; the Worker routes
    its calls itself (turn events under its prefix), so the /v1 stream shows them as before."""
    events, server = _served_session([
        tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="w1")]),
        final_answer("Three words."),
    ])
    try:
        worker_env = SimpleNamespace(OPENAI_BASE_URL=server.base_url("p"),
                                     OPENAI_API_KEY="sk-env-key", MAX_ITERATIONS="5")
        cfg = agent.config_from_env(worker_env, TOOLS, template_model())
        assert cfg.providers == () and cfg.model is not None
        model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url),
                                  on_turn_event=events.append, turn_prefix="m1", first_turn=0)
        start = create_loop_checkpoint(execution_id="m1", max_iterations=5,
                                       messages=[UserMessage(content="count a b c")])
        done = anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=model))
        assert (done.text, done.checkpoint.status) == ("Three words.", "finished")
        assert [dict((k.lower(), v) for k, v in r.headers).get("authorization")
                for r in server.requests] == ["Bearer sk-env-key"] * 2
        assert msgspec.json.decode(server.requests[0].body)["model"] == "gpt-4.1-mini"
        assert sorted({e.turn_id for e in events}) == ["m1:2"]  # the text turn, streamed live
    finally:
        server.stop()


def test_a_model_from_the_env_is_a_named_misconfiguration_without_its_key() -> None:
    with pytest.raises(agent.HttpError) as info:
        agent.config_from_env(SimpleNamespace(PROVIDER_API_KEY="sk-other"), TOOLS,
                              template_model())
    assert (info.value.status, info.value.code) == (500, "misconfigured")
    assert "OPENAI_API_KEY" in info.value.message and "sk-other" not in info.value.message
    with pytest.raises(agent.HttpError, match="must return a ModelAdapter or a RoutedModel"):
        agent.config_from_env(SimpleNamespace(), TOOLS, lambda _env: "openai:gpt-4.1-mini")


def test_a_routed_model_from_the_env_falls_back_and_keeps_the_shared_rate_limit() -> None:
    """``create_model(..., fallback=...)``: a 503 of the first moves on to the second, whose
    text is streamed after the first's ``reset``; RATE_LIMIT_* still wraps it (and still needs
    the LIMITS store)."""
    from bindloop.hosts import create_model

    server = ScriptedProviderServer().start()
    server.set_responder("a", lambda _r: error_reply(503, b'{"error": {"message": "busy"}}'))
    server.set_responder("b", lambda _r: turn_reply("openai_chat", final_answer("From b."),
                                                    stream=True))
    try:
        def model(env: Any) -> Any:
            return create_model("openai:first", base_url=env.A_URL, api_key=env.KEY,
                                fallback=create_model("openai:second", base_url=env.B_URL,
                                                      api_key=env.KEY))

        worker_env = SimpleNamespace(A_URL=server.base_url("a"), B_URL=server.base_url("b"),
                                     KEY="k")
        cfg = agent.config_from_env(worker_env, TOOLS, model)
        events: list[Any] = []
        routed = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url),
                                   on_turn_event=events.append, turn_prefix="f", first_turn=0)
        start = create_loop_checkpoint(execution_id="f", max_iterations=3,
                                       messages=[UserMessage(content="hi")])
        done = anyio.run(lambda: agent.run_session(start, tools=TOOLS, model=routed))
        assert done.text == "From b."
        assert [msgspec.json.decode(r.body)["model"] for r in server.requests] == [
            "first", "second"]
        limited = agent.config_from_env(
            SimpleNamespace(**vars(worker_env), RATE_LIMIT_RPM="5"), TOOLS, model)
        with pytest.raises(agent.HttpError, match="LIMITS"):
            agent.build_model(limited, transport_for=lambda p, h: HttpxTransport(p.base_url),
                              on_turn_event=lambda e: None, turn_prefix="f", first_turn=0)
    finally:
        server.stop()
