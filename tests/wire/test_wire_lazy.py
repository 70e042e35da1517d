"""Each wire's module loads on first use: the agent and the wire package load none of the four,
and asking for one wire loads that one only (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WIRES = ("_openai_chat", "_openai_responses", "_anthropic", "_gemini")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _loaded_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\nimport json\n"
             "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules "
             f"if m.startswith('bindloop.wire.') and m.rsplit('.', 1)[1] in {WIRES!r})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": SRC})
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def test_importing_the_agent_and_the_wire_package_loads_no_wire() -> None:
    assert _loaded_after("import bindloop.agent, bindloop.wire") == []


@pytest.mark.parametrize("wire, module", [("openai_chat", "_openai_chat"),
                                          ("anthropic", "_anthropic"), ("gemini", "_gemini")])
def test_creating_an_adapter_loads_that_wire_only(wire: str, module: str) -> None:
    assert _loaded_after(
        f"from bindloop.wire import create_wire_adapter\ncreate_wire_adapter({wire!r})") == [module]


def test_reading_an_adapter_name_loads_its_wire_and_publishes_it() -> None:
    from bindloop import wire

    adapter = wire.OpenAIResponsesAdapter
    assert adapter.__module__ == "bindloop.wire" and adapter is wire.OpenAIResponsesAdapter
    # The Responses wire builds on the Chat one; nothing else comes with it.
    assert _loaded_after("from bindloop.wire import OpenAIResponsesAdapter") == [
        "_openai_chat", "_openai_responses"]
    with pytest.raises(AttributeError, match="no attribute 'NoSuchAdapter'"):
        getattr(wire, "NoSuchAdapter")
