"""The demo agent through a real provider wire over real HTTP.

``scripted`` (default): a local scripted provider server on 127.0.0.1 plays two providers. The
primary speaks the Anthropic wire and answers every request with ``503`` (Gemini-style
``UNAVAILABLE`` body, ``Retry-After: 2``); the backup speaks OpenAI Chat Completions, streams SSE,
and decides its turns with the demo's deterministic policy model reading the transcript it was sent.
Routing falls back from one to the other on every turn, and the trace shows each attempt.

``openai``: the same agent against a real OpenAI-compatible endpoint: ``--base-url`` and
``--model`` on the command line, the key read by this CLI from the environment variable named by
``--api-key-env`` (the core never reads the environment).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import anyio
import msgspec

from bindloop import Message, ModelTurnResult, ToolLoopResult
from bindloop.completion import TextEvent
from bindloop.model import ModelRequest
from bindloop.contracts import messages_from_openai
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import (
    AnthropicAdapter,
    ModelAdapter,
    OpenAIChatAdapter,
    RoutedModel,
    WireOptions,
)

from examples.demos.demo import DEFAULT_PROMPT, Narrated, PolicyModel, run_agent
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply, turn_reply

_UNAVAILABLE = (b'{"error":{"code":503,"message":"The model is overloaded. Please try again later.",'
                b'"status":"UNAVAILABLE"}}')


def _policy_responder(model: PolicyModel) -> Callable[[RecordedRequest], ScriptedReply]:
    """An OpenAI-chat provider whose turns come from the policy model reading the request."""
    def respond(request: RecordedRequest) -> ScriptedReply:
        body = msgspec.json.decode(request.body)
        messages = messages_from_openai(body["messages"])
        turn = _sync(model, messages)
        return turn_reply("openai_chat", turn, stream=bool(body.get("stream")), model=body["model"],
                          delay_s=0.002)
    return respond


def _sync(model: PolicyModel, messages: list[Message]):  # type: ignore[no-untyped-def]
    # PolicyModel.complete is a coroutine that never awaits: drive it to completion here.
    coro = model.complete(messages, ModelRequest())
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the policy model awaited")  # pragma: no cover


async def run_scripted(prompt: str, write: Callable[[str], None],
                       max_iterations: int = 8) -> ToolLoopResult:
    with ScriptedProviderServer() as server:
        server.set_responder("primary", lambda _r: ScriptedReply(
            status=503, headers=(("content-type", "application/json"), ("retry-after", "2")),
            chunks=(_UNAVAILABLE,), streamed=False))
        server.set_responder("backup", _policy_responder(PolicyModel()))
        model_id = canonical_model_id("demo/policy-model")
        plan = RoutePlan(stages=(RouteStage(
            role="primary", model=model_id,
            policy=OrderedPolicy(providers=(provider_id("primary"), provider_id("backup"))),
            candidates=(
                RouteCandidate(provider_id=provider_id("primary"), canonical_model_id=model_id,
                               provider_invocation_model="claude-demo",
                               credential_source="platform"),
                RouteCandidate(provider_id=provider_id("backup"), canonical_model_id=model_id,
                               provider_invocation_model="gpt-demo", credential_source="platform"),
            )),))
        anthropic, chat = AnthropicAdapter(), OpenAIChatAdapter()
        line: list[str] = []

        def stream_text(event: object) -> None:
            if isinstance(event, TextEvent):
                line.append(event.content)

        models = {
            "primary": ModelAdapter(anthropic, HttpxTransport(
                server.base_url("primary"), headers=anthropic.auth_headers("demo-key")),
                WireOptions(model="claude-demo", stream=True)),
            "backup": ModelAdapter(chat, HttpxTransport(
                server.base_url("backup"), headers=chat.auth_headers("demo-key")),
                WireOptions(model="gpt-demo", stream=True), on_event=stream_text),
        }
        turn = [0]

        def on_route(result: RouteResult[object]) -> None:
            turn[0] += 1
            write(f"\n── turn {turn[0]} ─ route:")
            for a in result.attempts:
                detail = (f"{a.category} (HTTP {a.status_code}) → {a.action}"
                          if a.outcome == "failed" else a.outcome)
                write(f"   · {a.provider_id}/{a.canonical_model_id}: {detail}")
            if line:
                write("   🗨 " + "".join(line).replace("\n", "\n     "))
                line.clear()

        routed = RoutedModel(plan=plan, models=models, on_route=on_route)  # type: ignore[arg-type]
        write(f"scripted providers on {server.base_url('')}: primary=anthropic wire (503), "
              "backup=openai_chat wire (SSE)")
        result = await run_agent(routed, prompt, write, max_iterations,
                                 show_text=False)
        write(f"HTTP requests served: {len(server.requests)}")
        return result


async def run_openai(prompt: str, write: Callable[[str], None], *, base_url: str, model: str,
                     api_key: str, max_iterations: int = 8) -> ToolLoopResult:
    chat = OpenAIChatAdapter()
    transport = HttpxTransport(base_url, headers=chat.auth_headers(api_key))
    printed: list[str] = []

    def stream_text(event: object) -> None:
        if isinstance(event, TextEvent):
            printed.append(event.content)

    adapter = ModelAdapter(chat, transport, WireOptions(model=model, stream=True),
                           on_event=stream_text)

    def after(turn: ModelTurnResult) -> None:
        if printed:
            write("   🗨 " + "".join(printed))
            printed.clear()

    try:
        return await run_agent(Narrated(adapter, after=after), prompt, write, max_iterations,
                               show_text=False)
    finally:
        await transport.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bindloop-provider-demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=("scripted", "openai"), default="scripted")
    parser.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT)
    parser.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. https://api.openai.com/v1")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="name of the environment variable holding the key")
    parser.add_argument("--max-iterations", type=int, default=8)
    args = parser.parse_args(argv)

    def write(line: str) -> None:
        print(line, flush=True)

    if args.mode == "openai":
        if not args.base_url:
            parser.error("openai mode needs --base-url")
        key = os.environ.get(args.api_key_env, "")
        if not key:
            parser.error(f"set {args.api_key_env} to the API key")
        result = anyio.run(lambda: run_openai(args.prompt, write, base_url=args.base_url,
                                              model=args.model, api_key=key,
                                              max_iterations=args.max_iterations))
    else:
        result = anyio.run(run_scripted, args.prompt, write, args.max_iterations)
    return 0 if result.stop_reason == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
