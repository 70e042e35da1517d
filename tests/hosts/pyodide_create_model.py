# Runs under Pyodide (node tests/mcp/run_pyodide_mcp.mjs THIS_FILE http://127.0.0.1:PORT), driven by
# tests/hosts/test_create_model_pyodide.py: create_model on emscripten builds FetchTransports, reads
# no environment, streams, and falls back across a 503, over real loopback HTTP.
import json
import os
import sys
from mcp_host import fetch, url  # the real fetch, restricted to 127.0.0.1, and the server's URL

from pyodide.code import run_js

from bindloop.completion import TextEvent
from bindloop.contracts import UserMessage
from bindloop.hosts import create_model
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.hosts.models import MissingApiKeyError

assert sys.platform == "emscripten", sys.platform
os.environ["OPENAI_API_KEY"] = "sk-in-the-wasm-environment"  # create_model must not read it
try:
    create_model("openai:gpt-x")
    raise AssertionError("the environment was read")
except MissingApiKeyError as exc:
    missing = str(exc)
assert "api_key=" in missing and "OPENAI_API_KEY" in missing and "sk-in" not in missing, missing

# One provider, streaming: the text arrives as events while the answer is read.
texts = []
gemini = create_model("google:m-1", api_key="k-gemini-wasm", base_url=url + "/google", fetch=fetch)
assert isinstance(gemini.transport, FetchTransport)
turn = await gemini.complete([UserMessage(content="hi")],  # noqa: F704 (top-level await)
                             on_event=lambda e: texts.append(e.content)
                             if isinstance(e, TextEvent) and e.content else None)

# A Worker's bindings as env= (a JS object: its secrets are attributes), and a fallback across a 503.
bindings = run_js("({OPENAI_API_KEY: 'k-openai-binding'})")
try:
    create_model("anthropic:claude-x", env=bindings)
    raise AssertionError("a binding that is not there was found")
except MissingApiKeyError as exc:
    assert "env= has no ANTHROPIC_API_KEY" in str(exc), str(exc)
routed = create_model(
    "anthropic:claude-x", api_key="k-anthropic-wasm", base_url=url + "/primary", fetch=fetch,
    fallback=create_model("openai:gpt-x", base_url=url + "/backup", env=bindings, fetch=fetch))
assert all(isinstance(m.transport, FetchTransport) for m in routed.models.values())
served = await routed.complete([UserMessage(content="hi")])  # noqa: F704

json.dumps({"ok": True, "missing": missing, "texts": texts, "single": turn.text,
            "routed": served.text, "served_by": routed.last_result.served.provider_id})
