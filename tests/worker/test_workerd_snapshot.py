"""The template started from a memory snapshot (D9), as Cloudflare starts every deployed Python
Worker: one workerd boots Python, imports the Worker and writes the snapshot
(``--python-save-snapshot``); a second starts from it (``--python-load-snapshot``) and serves a
whole chat -- a streamed turn, the Session object's lease and commits -- with the same answer.

The start-up times are printed (``-s`` shows them), not asserted: bench/worker_coldstart.py
measures them side by side, and docs/workers.md has its figures.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
from pathlib import Path

import msgspec

from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply, turn_reply
from bindloop.testing import final_answer

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import SNAPSHOT_NAME, Workerd, stage  # noqa: E402


def _answer(request: RecordedRequest) -> ScriptedReply:
    last = msgspec.json.decode(request.body)["messages"][-1]["content"]
    return turn_reply("openai_chat", final_answer(f"You said: {last}"), stream=True)


def _chat(port: int, message: str) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/chat", body=json.dumps({"message": message}),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        lines = resp.read().splitlines()
    finally:
        conn.close()
    return time.perf_counter() - t0, lines


def _done(lines: list[bytes]) -> dict[str, object]:
    i = lines.index(b"event: done")
    done: dict[str, object] = json.loads(lines[i + 1].removeprefix(b"data: "))
    return done


def test_a_worker_started_from_a_memory_snapshot_serves_the_same_chat(tmp_path: Path) -> None:
    with ScriptedProviderServer() as server:
        server.set_responder("p", _answer)
        config = stage(tmp_path / "stage", storage_dir=tmp_path / "do", with_conformance=False,
                       bindings={"OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "k"})
        snapshots = tmp_path / "snapshots"
        with Workerd(config, snapshot=("save", snapshots)) as saving:
            took_plain, lines = _chat(saving.port, "before")
            listen_plain = saving.listen_s
        assert _done(lines)["text"] == "You said: before"
        snapshot = snapshots / SNAPSHOT_NAME
        assert snapshot.is_file() and snapshot.stat().st_size > 1_000_000
        with Workerd(config, snapshot=("load", snapshots)) as loaded:
            took_snap, lines = _chat(loaded.port, "after")
            listen_snap = loaded.listen_s
            log = loaded.log_text()
        done = _done(lines)
        assert (done["status"], done["text"]) == ("finished", "You said: after"), log
        print(f"\n[snapshot] {snapshot.stat().st_size / 2**20:.1f} MiB; listening after "
              f"{listen_plain * 1000:.0f} ms (saving run) vs {listen_snap * 1000:.0f} ms (from the "
              f"snapshot); first chat {took_plain * 1000:.0f} vs {took_snap * 1000:.0f} ms")


# The template's own entry, and a route that says which modules its top level had imported and
# which have been imported since (the served Worker is otherwise the template).
_WATCHED = '''

import json as _json
import sys as _sys

_AT_TOP = frozenset(_sys.modules)
_Served = Default


class Default(_Served):
    async def fetch(self, request):
        if str(request.url).endswith("/__modules"):
            from workers import Response

            return Response(_json.dumps({"at_top": sorted(_AT_TOP),
                                         "since": sorted(set(_sys.modules) - _AT_TOP)}))
        return await super().fetch(request)
'''


def _modules(port: int) -> dict[str, list[str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", "/__modules")
        resp = conn.getresponse()
        assert resp.status == 200
        found: dict[str, list[str]] = json.loads(resp.read())
    finally:
        conn.close()
    return found


def test_a_chat_after_a_cold_start_imports_nothing(tmp_path: Path) -> None:
    """What a first chat would import lazily (the Workers SDK's ``http.client`` for a request's
    headers, anyio's asyncio backend, every wire) is imported by the Worker's top level, so it
    is in the snapshot: restored on a cold start, not compiled from source by the first
    request."""
    entry = tmp_path / "entry.py"
    entry.write_text((REPO / "worker" / "src" / "entry.py").read_text() + _WATCHED)
    with ScriptedProviderServer() as server:
        server.set_responder("p", _answer)
        config = stage(tmp_path / "stage", storage_dir=tmp_path / "do", with_conformance=False,
                       bindings={"OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "k"},
                       entry=entry)
        snapshots = tmp_path / "snapshots"
        with Workerd(config, snapshot=("save", snapshots)) as saving:
            _modules(saving.port)
        with Workerd(config, snapshot=("load", snapshots)) as loaded:
            at_top = set(_modules(loaded.port)["at_top"])
            _took, lines = _chat(loaded.port, "cold")
            since = _modules(loaded.port)["since"]
            log = loaded.log_text()
    assert _done(lines)["text"] == "You said: cold", log
    wires = {f"bindloop.wire.{m}" for m in ("_openai_chat", "_openai_responses", "_anthropic",
                                            "_gemini")}
    assert wires | {"anyio._backends._asyncio", "http.client"} <= at_top
    # Nothing but the runtime's own per-request module (``_cloudflare.*``) is imported by it.
    assert [m for m in since if not m.startswith("_cloudflare.")] == []
