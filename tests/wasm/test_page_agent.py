"""harness/wasm/demo/page_agent.py on CPython, over real loopback HTTP to serve.py's scripted providers.

The same agent the browser page runs (the agent API over a routed model), with httpx in place of the
JS fetch transport: what it reports to the bridge is what the page renders, so the Chromium test's
transcript is pinned here too, without a browser.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.hosts.transports.httpx import HttpxTransport

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


serve = _load("bindloop_demo_serve_for_agent", ROOT / "harness" / "wasm" / "demo" / "serve.py")
page_agent = _load("bindloop_demo_page_agent", ROOT / "harness" / "wasm" / "demo" / "page_agent.py")


class Bridge:
    """Records what the page would be told, in order, decoded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda payload: self.calls.append((name, msgspec.json.decode(payload)))

    def of(self, kind: str) -> list[Any]:
        return [p for k, p in self.calls if k == kind]


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wheels = tmp_path_factory.mktemp("wheels")
    with serve.build_server(wheels, delay_s=0) as server:
        yield server.base_url("").rstrip("/")


def _run(origin: str) -> tuple[str, Bridge]:
    bridge = Bridge()
    stop = anyio.run(lambda: page_agent.run_page_agent(bridge, origin, transport=HttpxTransport))
    return stop, bridge


def test_the_page_agent_reports_the_run(origin: str) -> None:
    stop, bridge = _run(origin)
    assert stop == "done"
    routes = [(r["turn_id"], [(a["provider_id"], a["outcome"]) for a in r["attempts"]])
              for r in bridge.of("route")]
    assert routes == [("turn-1", [("primary", "failed"), ("backup", "succeeded")]),
                      ("turn-2", [("primary", "succeeded")]),
                      ("turn-3", [("primary", "failed"), ("backup", "succeeded")])]

    # Tool calls come from the agent stream, in the model's order, each tagged with its turn.
    events = bridge.of("agent_event")
    calls = [(e["turn_id"], e["tool_call"]["name"]) for e in events if e["type"] == "tool_call_done"]
    assert calls == [("turn-1", "calculator"), ("turn-1", "calculator"),
                     ("turn-2", "notes_write"), ("turn-2", "notes_write"), ("turn-2", "notes_list")]
    assert [e["turn_id"] for e in events if e["type"] == "turn_done"] == ["turn-1", "turn-2", "turn-3"]
    # Results come from the run's tool_finished events: writes ran before the list saw them.
    results = {r["id"]: (r["turn_id"], r["ok"], r["result"]) for r in bridge.of("tool_result")}
    assert results["calc_0"] == ("turn-1", True, "395")
    assert results["note_1"] == ("turn-2", True, "saved note 'result 2'")
    assert msgspec.json.decode(results["list_0"][2]) == [
        {"title": "result 1", "body": "(17 * 23) + 4 = 395"},
        {"title": "result 2", "body": "2 ** 10 / 8 = 128"}]
    assert len(results) == 5

    # The turn text stream: turn 3's cut primary answer is reset, then replaced by the backup's.
    text = [e for e in bridge.of("turn_event") if e["turn_id"] == "turn-3"]
    kinds = [e["kind"] for e in text]
    assert kinds.count("reset") == 1 and 0 < kinds.index("reset") < len(kinds) - 1
    final = "".join(e["text"] for e in text if e["kind"] == "text" and e["epoch"] == 1)
    assert final.startswith("Here is what I found:") and "You have 2 note(s) (5 tool calls made)" in final

    (done,) = bridge.of("done")
    assert done["stop_reason"] == "done" and done["messages"] == 10
    assert done["stats"]["turns"] == 3 and done["stats"]["tool_calls"] == 5
    assert done["stats"]["input_tokens"] > 0 and done["stats"]["output_tokens"] > 0


def test_the_page_runs_note_writes_serially() -> None:
    # The page's tools are equipped with serial=True for writes: the agent API's own ordering.
    names = {t.name for t in page_agent.demo_tools(page_agent.Notes())}
    assert page_agent.SERIAL_TOOLS == {"notes_write"} <= names


def test_the_report_agent_streams_structured_partials(origin: str) -> None:
    _, first = _run(origin)
    (done,) = first.of("done")
    bridge = Bridge()
    shown = anyio.run(lambda: page_agent.run_report_agent(
        bridge, origin, msgspec.json.encode(done["transcript"]).decode(), transport=HttpxTransport))
    report = {"count": 2, "notes": [{"title": "result 1", "body": "(17 * 23) + 4 = 395"},
                                    {"title": "result 2", "body": "2 ** 10 / 8 = 128"}],
              "summary": "2 note(s) saved in a run of 5 tool calls"}
    assert msgspec.json.decode(shown) == report and bridge.of("report") == [report]
    events = bridge.of("structured")
    partials, last = events[:-1], events[-1]
    assert last == {"status": "complete", "data": report, "is_valid": True}
    # Streamed a few characters a chunk: many partials, each a growing view of the same document.
    assert len(partials) > 10 and all(e["status"] == "partial" and not e["is_valid"] for e in partials)
    notes_seen = [len(e["data"].get("notes", [])) for e in partials if isinstance(e["data"], dict)]
    assert notes_seen == sorted(notes_seen) and notes_seen[-1] == 2 and notes_seen[0] == 0


def test_the_structured_provider_refuses_a_request_without_a_schema(origin: str) -> None:
    import httpx

    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    got = httpx.post(f"{origin}/structured/v1/chat/completions", json=body)
    assert got.status_code == 400 and "response_format" in got.json()["error"]["message"]


def test_notes_report_without_a_listing_is_empty() -> None:
    from bindloop.contracts import UserMessage

    assert serve.notes_report([UserMessage(content="hi")]) == {
        "count": 0, "notes": [], "summary": "0 note(s) saved in a run of 0 tool calls"}
