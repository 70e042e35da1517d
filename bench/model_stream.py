"""µs per chunk through ModelAdapter.complete() / open_stream() / stream() with an in-memory
transport (2000 one-token SSE chunks, openai_chat); min of 7 runs, on asyncio and trio, with the
watchdog's budgets on and off, and with reads that do or do not yield to the event loop.

    python bench/model_stream.py [label]
    python bench/model_stream.py --baseline CHECKOUT [ROUNDS]   # before/after side by side

Times are CPU seconds of the process (time.process_time), so other processes' load on a shared
machine does not count.
"""
import json, sys, time
from contextlib import aclosing, asynccontextmanager
import anyio, anyio.lowlevel
from bindloop.contracts import UserMessage
from bindloop.wire import StreamBudgets
from bindloop.wire import ModelAdapter, WireOptions, create_wire_adapter

N = 2000
def chat_sse(n):
    out = [b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}).encode() + b"\n\n"
           for _ in range(n)]
    out.append(b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}}).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out
CHUNKS = chat_sse(N)

class R:
    status = 200; headers = ()
    def __init__(self, cp): self.cp = cp
    async def aiter_bytes(self):
        for c in CHUNKS:
            if self.cp: await anyio.lowlevel.checkpoint()
            yield c
class T:
    def __init__(self, cp): self.cp = cp
    @asynccontextmanager
    async def open(self, req): yield R(self.cp)

MSGS = [UserMessage(content="x")]
async def once(via, budgets, cp):
    m = ModelAdapter(create_wire_adapter("openai_chat"), T(cp), WireOptions(model="m", stream=True), budgets=budgets)
    t0 = time.process_time()
    if via == "complete":
        r = await m.complete(MSGS); assert len(r.text) == 4 * N
    elif via == "open_stream":
        async with m.open_stream(MSGS) as ev:
            async for _ in ev: pass
    else:
        async with aclosing(m.stream(MSGS)) as g:
            async for _ in g: pass
    return (time.process_time() - t0) / len(CHUNKS) * 1e6

async def main(via, budgets, cp):
    return min([await once(via, budgets, cp) for _ in range(7)])

def measure():
    rows = {}
    for backend in ("asyncio", "trio"):
        for cp in (False, True):
            for bname, b in (("default", StreamBudgets()),
                             ("none", StreamBudgets(first_token_ms=None, inter_chunk_ms=None,
                                                    total_ms=None))):
                for v in VIAS:
                    rows[f"{backend} {cp} {bname} {v}"] = anyio.run(main, v, b, cp,
                                                                   backend=backend)
    return rows

VIAS = ["complete", "stream"] + (["open_stream"] if hasattr(ModelAdapter, "open_stream") else [])
args = sys.argv[1:]
if args[:1] == ["--json"]:
    print(json.dumps(measure()))
elif args[:1] == ["--baseline"]:
    # The same workload on another checkout (its src first on the path of a child process),
    # rounds interleaved so a load spike hits both sides; best of each, CPU µs per chunk.
    import os, subprocess
    env = {**os.environ, "PYTHONPATH": os.path.join(args[1], "src")}
    before, after = {}, {}
    for _ in range(int(args[2]) if len(args) > 2 else 3):
        child = json.loads(subprocess.run([sys.executable, __file__, "--json"], env=env,
                                          capture_output=True, text=True, check=True).stdout)
        for k, v in child.items():
            before[k] = min(v, before.get(k, v))
        for k, v in measure().items():
            after[k] = min(v, after.get(k, v))
    print(f"CPU µs per chunk, {N} one-token chunks, openai_chat, ModelAdapter over an in-memory transport")
    print(f"{'backend':8} {'read checkpoint':16} {'budgets':8} {'via':12} {'before':>8} {'after':>8} {'speedup':>8}")
    for k, v in after.items():
        backend, cp, bname, via = k.split()
        print(f"{backend:8} {cp:16} {bname:8} {via:12} {before[k]:8.1f} {v:8.1f} {before[k] / v:7.2f}x")
else:
    tag = args[0] if args else "now"
    rows = measure()
    print(f"{'code':6} {'backend':8} {'read checkpoint':16} {'budgets':8} " + " ".join(f"{v:>12}" for v in VIAS))
    for backend in ("asyncio", "trio"):
        for cp in (False, True):
            for bname in ("default", "none"):
                row = [rows[f"{backend} {cp} {bname} {v}"] for v in VIAS]
                print(f"{tag:6} {backend:8} {str(cp):16} {bname:8} " + " ".join(f"{x:12.1f}" for x in row))
