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

import pytest

from bindloop.contracts import ToolCall, ToolError, ToolResult, ToolSuspend

WORKER = Path(__file__).resolve().parents[2] / "worker"
sys.path.insert(0, str(WORKER / "src"))
sys.path.insert(0, str(WORKER / "tools"))
import agent  # noqa: E402
from workerd_harness import COMPATIBILITY_FLAGS  # noqa: E402


def wrangler() -> dict:  # type: ignore[type-arg]
    text = (WORKER / "wrangler.jsonc").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def test_wrangler_config_matches_the_entry_module() -> None:
    cfg = wrangler()
    assert (WORKER / cfg["main"]).is_file()
    tree = ast.parse((WORKER / cfg["main"]).read_text())
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    (binding,) = cfg["durable_objects"]["bindings"]
    assert binding == {"name": "SESSION", "class_name": "Session"} and "Session" in classes
    assert "Session" in cfg["migrations"][0]["new_sqlite_classes"]
    # Deploy flags are the test flags minus the dev-Pyodide ones only workerd's tests use.
    dev_only = {f for f in COMPATIBILITY_FLAGS if f.startswith(("no_python_workers", "python_workers_"))}
    assert set(cfg["compatibility_flags"]) == set(COMPATIBILITY_FLAGS) - dev_only
    assert "PROVIDER_API_KEY" not in cfg["vars"]  # a secret, never a var


def test_pyproject_is_pywrangler_shaped() -> None:
    meta = tomllib.loads((WORKER / "pyproject.toml").read_text())
    assert "bindloop" in meta["project"]["dependencies"]
    assert "workers-py" in meta["dependency-groups"]["dev"]


def env(**values: str) -> SimpleNamespace:
    base = {"PROVIDER_BASE_URL": "http://p", "PROVIDER_MODEL": "m", "PROVIDER_API_KEY": "sk-1"}
    return SimpleNamespace(**{**base, **values})


def test_config_from_env_reads_providers_and_refuses_naming_the_variable() -> None:
    cfg = agent.config_from_env(env(FALLBACK_BASE_URL="http://f", FALLBACK_WIRE="anthropic",
                                    FALLBACK_MODEL="c", FALLBACK_API_KEY="sk-2", MAX_ITERATIONS="3"))
    assert [(p.id, p.wire) for p in cfg.providers] == [("primary", "openai_chat"),
                                                       ("fallback", "anthropic")]
    assert cfg.max_iterations == 3
    plan = agent.route_plan(cfg)
    assert [c.provider_invocation_model for c in plan.stages[0].candidates] == ["m", "c"]
    for bad, name in ((env(PROVIDER_API_KEY=""), "PROVIDER_API_KEY"),
                      (env(PROVIDER_WIRE="soap"), "PROVIDER_WIRE"),
                      (env(MAX_ITERATIONS="0"), "MAX_ITERATIONS"),
                      (SimpleNamespace(), "PROVIDER_BASE_URL")):
        with pytest.raises(agent.HttpError) as info:
            agent.config_from_env(bad)
        assert name in info.value.message and "sk-" not in info.value.message


def test_tools() -> None:
    ask = agent.run_tool_call(ToolCall(id="1", name="ask_user", arguments='{"question": "Name?"}'))
    assert ask == ToolSuspend(mode="waiting_for_reply", detail="Name?")
    assert agent.run_tool_call(ToolCall(id="2", name="word_count",
                                        arguments='{"text": "a b c"}')) == ToolResult(content="3")
    for call in (ToolCall(id="3", name="ask_user", arguments="{"),
                 ToolCall(id="4", name="ask_user", arguments="[]"),
                 ToolCall(id="5", name="nope")):
        assert isinstance(agent.run_tool_call(call), ToolError)
