"""CPU µs per streamed token through a ``RoutedModel`` vs a ``ModelAdapter``,
side by side in one run: 2000 one-token openai_chat SSE chunks from an in-memory transport, read
(a) straight from the agent model's ``stream()`` and (b) through the agent API (``prompt_chat`` with
an ``on_stream`` consumer, so every delta is folded and multicast). Routes: one candidate (live from
the first byte), two candidates ``settled`` (the primary serves: its events are held, then released
when the attempt ends), two candidates ``live``. Min of 7 runs, on asyncio and trio.

    python bench/routed_stream.py

Times are CPU seconds of the process (time.process_time), so other processes' load on a shared
machine does not count.
"""
import json, time
from contextlib import asynccontextmanager
import anyio, anyio.lowlevel
from bindloop.agent import create_agent, equip_instruction, on_stream, prompt_chat
from bindloop.model import ModelRequest
from bindloop.contracts import UserMessage
from bindloop.routing import OrderedPolicy, RouteCandidate, RoutePlan, RouteStage, canonical_model_id, provider_id
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter

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
    async def aiter_bytes(self):
        for c in CHUNKS:
            await anyio.lowlevel.checkpoint()  # a real socket read yields to the loop
            yield c
class T:
    @asynccontextmanager
    async def open(self, req): yield R()

def adapter():
    return ModelAdapter(create_wire_adapter("openai_chat"), T(), WireOptions(model="m", stream=True))

def route(n, streaming=None):
    mid = canonical_model_id("bench/m")
    names = [f"p{i}" for i in range(n)]
    plan = RoutePlan(stages=(RouteStage(role="primary", model=mid,
        policy=OrderedPolicy(providers=tuple(provider_id(x) for x in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(x), canonical_model_id=mid,
                                        provider_invocation_model="m", credential_source="platform")
                         for x in names)),))
    return RoutedModel(plan=plan, models={x: adapter() for x in names}, streaming=streaming)

MODELS = {
    "ModelAdapter": lambda: adapter(),
    "RoutedModel, 1 candidate": lambda: route(1),
    "RoutedModel, 2, settled": lambda: route(2, "settled"),
    "RoutedModel, 2, live": lambda: route(2, "live"),
}
MSGS = [UserMessage(content="x")]

async def direct(model):
    t0 = time.process_time()
    n = 0
    async for _ in model.stream(MSGS, ModelRequest()):
        n += 1
    assert n >= N
    return (time.process_time() - t0) / N * 1e6

async def agent(model):
    seen = []
    async def consume(events):
        async for e in events:
            seen.append(e)
    async def handler(_):
        equip_instruction("go")
        on_stream(consume)
        return (await prompt_chat()).data
    t0 = time.process_time()
    text = await create_agent(id="b", handler=handler, model=model)(None)
    dt = time.process_time() - t0
    assert len(text) == 4 * N and sum(type(e.event).__name__ == "TextEvent" for e in seen) == N
    return dt / N * 1e6

def measure(kind, factory, backend):
    async def main():
        fn = direct if kind == "stream()" else agent
        return min([await fn(factory()) for _ in range(7)])
    return anyio.run(main, backend=backend)

def run():
    rows = []
    for kind in ("stream()", "agent on_stream"):
        for backend in ("asyncio", "trio"):
            base = None
            for name, factory in MODELS.items():
                us = measure(kind, factory, backend)
                base = us if base is None else base
                rows.append((kind, backend, name, us, us / base))
    print(f"{'path':<16} {'backend':<8} {'model':<26} {'µs/token':>9} {'× adapter':>10}")
    for kind, backend, name, us, ratio in rows:
        print(f"{kind:<16} {backend:<8} {name:<26} {us:9.2f} {ratio:10.2f}")

if __name__ == "__main__":
    run()
