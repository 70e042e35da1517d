# Runs under Pyodide: the JS fetch transport streams an SSE body through a ReadableStream reader,
# and aborts the request when it is cancelled before the headers arrive.
import asyncio

from pyodide.code import run_js
from pyodide.ffi import to_js

from bindloop.contracts import ModelTurnResult, ToolCall, TurnUsage, UserMessage
from bindloop.hosts.transports.js_fetch import FetchTransport
from harness.fixtures.provider_replies import render_sse
from bindloop.completion import TextEvent
from bindloop.wire import StreamStalledError
from bindloop.errors import RunCancelledError
from bindloop.model import ModelRequest
from bindloop.signal import AbortController
from bindloop.wire import StreamBudgets
from bindloop.wire import ModelAdapter, OpenAIChatAdapter, ProviderHttpError, WireOptions

turn = ModelTurnResult(text="héllo from fetch", tool_calls=(ToolCall(id="c1", name="f", arguments='{"a":1}'),),
                       usage=TurnUsage(input_tokens=5, output_tokens=3), finish_reason="tool_calls")
blob = b"".join(render_sse("openai_chat", turn))
chunks = [blob[i:i + 7] for i in range(0, len(blob), 7)]  # 7-byte chunks split UTF-8 characters
make_fetch = run_js("""
(chunks, status, seen) => async (url, init) => {
  seen.push([url, init.method, [...init.headers.entries()], new TextDecoder().decode(init.body)]);
  const body = new ReadableStream({start(c) { for (const x of chunks) c.enqueue(x); c.close(); }});
  return new Response(body, {status, headers: {"content-type": "text/event-stream", "retry-after": "3"}});
}
""")
seen = run_js("[]")
fetch = make_fetch(to_js(chunks), 200, seen)
chat = OpenAIChatAdapter()
model = ModelAdapter(chat, FetchTransport("https://example.test/v1", headers=chat.auth_headers("k"), fetch=fetch),
                     WireOptions(model="m", stream=True))
got = await model.complete([UserMessage(content="hi")])
assert got == turn, got
url, method, headers, body = seen[0]
assert url == "https://example.test/v1/chat/completions" and method == "POST", (url, method)
assert ["authorization", "Bearer k"] in headers.to_py(), headers.to_py()
assert '"stream":true' in body

# open_stream(): the same events live, one scope for the call, under Pyodide's event loop too.
texts = []
async with model.open_stream([UserMessage(content="hi")]) as events:
    async for event in events:
        if isinstance(event, TextEvent):
            texts.append(event.content)
assert "".join(texts) == turn.text, texts

err = b'{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}'
model2 = ModelAdapter(chat, FetchTransport("https://example.test/v1", fetch=make_fetch(to_js([err]), 429, run_js("[]"))),
                      WireOptions(model="m", stream=True), retry=None)  # one call: its own error
try:
    await model2.complete([UserMessage(content="hi")])
    raise AssertionError("expected a rate limit")
except ProviderHttpError as e:
    assert e.category == "rate_limited" and e.retry_after_ms == 3000.0, e

# Cancelled before the headers arrive: a fetch that answers only by rejecting once its signal aborts.
# The request must be aborted whether the watchdog's first-token budget (armed before the request
# is sent) or the caller's own signal ends the wait.
make_silent_fetch = run_js("""
(log) => (url, init) => new Promise((resolve, reject) => {
  log.push("sent");
  init.signal.addEventListener("abort", () => {
    log.push("aborted");
    reject(new DOMException("the request was aborted", "AbortError"));
  });
})
""")
budgets = StreamBudgets(first_token_ms=50, inter_chunk_ms=50, total_ms=5000)
log = run_js("[]")
silent = ModelAdapter(chat, FetchTransport("https://example.test/v1", fetch=make_silent_fetch(log)),
                      WireOptions(model="m", stream=True), budgets=budgets, retry=None)
try:
    await silent.complete([UserMessage(content="hi")])
    raise AssertionError("expected a first-token stall")
except StreamStalledError as e:
    assert e.stall.kind == "first_token", e
assert log.to_py() == ["sent", "aborted"], log.to_py()

log = run_js("[]")
silent = ModelAdapter(chat, FetchTransport("https://example.test/v1", fetch=make_silent_fetch(log)),
                      WireOptions(model="m", stream=True), retry=None)  # default budgets: minutes
stop = AbortController()
asyncio.get_running_loop().call_later(0.05, stop.abort, "user pressed stop")
try:
    await silent.complete([UserMessage(content="hi")], ModelRequest(signal=stop.signal))
    raise AssertionError("expected a cancellation")
except RunCancelledError:
    pass
assert log.to_py() == ["sent", "aborted"], log.to_py()

# GET and HEAD go out without a body: the platform's own Request refuses one (even empty), as
# fetch does. The double builds a real Request from what the transport passes.
from bindloop.wire import HttpRequest, TransportError

make_strict_fetch = run_js("""
(log) => async (url, init) => {
  const req = new Request(url, init);
  log.push([req.method, init.body === undefined ? "no body" : new TextDecoder().decode(init.body)]);
  return new Response(req.method === "HEAD" ? null : "ok", {status: 200});
}
""")
log = run_js("[]")
strict = FetchTransport("https://example.test/v1", fetch=make_strict_fetch(log))
for method, body in (("GET", b""), ("HEAD", b""), ("DELETE", b""), ("POST", b"{}")):
    async with strict.open(HttpRequest(method=method, path="/x", headers=(), body=body)) as resp:
        assert resp.status == 200, (method, resp.status)
        assert b"".join([c async for c in resp.aiter_bytes()]) == (b"" if method == "HEAD" else b"ok")
assert log.to_py() == [["GET", "no body"], ["HEAD", "no body"], ["DELETE", ""], ["POST", "{}"]], log.to_py()
try:
    async with strict.open(HttpRequest(method="GET", path="/x", headers=(), body=b"q")):
        raise AssertionError("a GET with a body was sent")
except TransportError as e:
    assert "GET" in str(e) and "use POST" in str(e), e

# No credential in any message: a Gemini key in the base URL's query (merged into the request's
# own query), a fetch that rejects with the whole URL in its error, and a 401 echoing the key.
from bindloop.wire import GeminiAdapter

KEY = "AIzaSyD-canary-5b7e0c19d2f4"
make_leaky_fetch = run_js("""
(log) => async (url, init) => { log.push(url); throw new TypeError("fetch failed for " + url); }
""")
log = run_js("[]")
gemini = GeminiAdapter()
leaky = ModelAdapter(gemini, FetchTransport(f"https://example.test?key={KEY}",
                                            fetch=make_leaky_fetch(log)),
                     WireOptions(model="m", stream=True), retry=None)
try:
    await leaky.complete([UserMessage(content="hi")])
    raise AssertionError("expected a transport error")
except TransportError as e:
    text = f"{e} {e!r} {e.__cause__!r}"
    assert KEY not in text and "key=<redacted" in text, text
    assert e.__cause__ is None, e.__cause__  # the JS error shows the key: not chained
assert log.to_py()[0].endswith(f"?alt=sse&key={KEY}"), log.to_py()

echo = ('{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"API key not valid: '
        + KEY + '"}}').encode()
echoing = ModelAdapter(gemini, FetchTransport("https://example.test",
                                              headers=gemini.auth_headers(KEY),
                                              fetch=make_fetch(to_js([echo]), 400, run_js("[]"))),
                       WireOptions(model="m", stream=True))
try:
    await echoing.complete([UserMessage(content="hi")])
    raise AssertionError("expected a 400")
except ProviderHttpError as e:
    assert KEY not in f"{e} {e!r} {e.provider_message}" and "<redacted" in str(e), e

"fetch transport ok: " + got.text
