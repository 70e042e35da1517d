"""The adapter command the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``)
launches for its client scenarios: ``python -m bindloop.hosts.mcp_conformance_client <server-url>``.

The suite starts a server for one scenario, runs this command with the server's URL as the last
argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` (and, for some, a JSON object in
``MCP_CONFORMANCE_CONTEXT``), then grades what the server saw. This host reads both (it is outside
the core's fences) and drives bindloop's client as a user would: connect, list the tools, call the
one the scenario expects, close. Exit status 0 on success; a failure prints its error on stderr.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid
from typing import Any

import anyio

from bindloop.hosts.httpx_transport import HttpxTransport
from bindloop.mcp import McpHttpClient, McpLimits
from bindloop.mcp.auth import (
    McpOAuth,
    id_jag_exchange,
    transport_fetch,
)
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    ServerRequestHandlers,
)

__all__ = ("main", "run_scenario")

_TOOL_FOR = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


_LIST_ONLY = frozenset({"initialize", "json-schema-ref-no-deref"})
_EVERY_TOOL = frozenset({"sep-2322-client-request-state"})


def _context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    value = json.loads(raw)
    return value if isinstance(value, dict) else {}


REDIRECT_URI = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


async def accept_with_defaults(request: ElicitationRequest) -> ElicitationResult:
    """The user accepts and fills in nothing: the client applies the schema's defaults."""
    del request
    return ElicitationResult(action="accept", content={})


def _es256_assertion(client_id: str, private_key_pem: str) -> Any:
    """A ``client_assertion`` port signing RFC 7523 JWTs with ES256 (``cryptography``)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    async def assertion(audience: str) -> str:
        now = int(time.time())
        header = b64(json.dumps({"alg": "ES256", "typ": "JWT"}).encode())
        claims = b64(json.dumps({"iss": client_id, "sub": client_id, "aud": audience,
                                 "iat": now, "exp": now + 300,
                                 "jti": str(uuid.uuid4())}).encode())
        der = key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{header}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    return assertion


def _oauth(url: str, scenario: str, context: dict[str, Any], http: Any) -> McpOAuth:
    """The authorization provider for an ``auth/*`` scenario: this host's ports (HTTP through
    httpx, the browser step as a followed redirect, os.urandom) around bindloop's McpOAuth."""
    fetch = transport_fetch(lambda endpoint: HttpxTransport(endpoint, client=http))

    async def authorize(authorization_url: str) -> str:
        resp = await http.get(authorization_url, follow_redirects=False)
        location = resp.headers.get("location")
        if resp.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RuntimeError(f"the authorization endpoint answered {resp.status_code}")
        return str(location)

    client_id = context.get("client_id")
    secret = context.get("client_secret")
    if "idp_id_token" in context:  # cross-app access: the IdP's assertion, then jwt-bearer
        grant = id_jag_exchange(fetch, token_endpoint=context["idp_token_endpoint"],
                                id_token=context["idp_id_token"])
        return McpOAuth(server_url=url, fetch=fetch, grant="jwt_bearer", client_id=client_id,
                        client_secret=secret, authorization_grant=grant)
    if scenario.startswith("auth/client-credentials"):
        assertion = (_es256_assertion(str(client_id), context["private_key_pem"])
                     if "private_key_pem" in context else None)
        return McpOAuth(server_url=url, fetch=fetch, grant="client_credentials",
                        client_id=client_id, client_secret=secret, client_assertion=assertion)
    return McpOAuth(server_url=url, fetch=fetch, authorize=authorize, redirect_uri=REDIRECT_URI,
                    random_bytes=os.urandom, client_id=client_id, client_secret=secret,
                    client_metadata_url=CLIENT_METADATA_URL, client_name="bindloop-conformance")


async def run_scenario(url: str, scenario: str, context: dict[str, Any]) -> None:
    """Run ``scenario`` against the server at ``url``."""
    import httpx

    transport = HttpxTransport(url)
    http = httpx.AsyncClient(timeout=20.0)
    try:
        options: dict[str, Any] = {"limits": McpLimits(timeout_ms=20_000), "handlers": ServerRequestHandlers(
            elicitation=accept_with_defaults)}
        if scenario.startswith("auth/"):
            options["auth"] = _oauth(url, scenario, context, http)
        # As a user would: ``async with`` connects and opens the server's GET stream, where
        # servers send the requests (elicitation) they make from inside a tool.
        async with McpHttpClient(transport, server="conformance", **options) as mcp:
            tools, _ = await mcp.list_tools()
            if scenario in _LIST_ONLY:
                return
            if scenario in _EVERY_TOOL:
                # Each tool in turn: an input_required flow of one call must not leak its
                # inputResponses or requestState into the next.
                for tool in tools:
                    result = await mcp.call_tool(tool.name, {})
                    print(json.dumps({"tool": tool.name, "content": result.content})[:2000])
                return
            echo = next((t for t in tools if t.name == "json_schema_echo"), None)
            if echo is not None:
                # What the client kept of the other tool's inputSchema goes back verbatim.
                other = next(t for t in tools if t is not echo)
                await mcp.call_tool(echo.name, {"schema": other.input_schema})
                return
            calls = context.get("toolCalls")
            if isinstance(calls, list) and calls:
                for call in calls:
                    result = await mcp.call_tool(call["name"], call.get("arguments") or {})
                    print(json.dumps({"tool": call["name"], "content": result.content})[:2000])
                return
            name, arguments = _TOOL_FOR.get(scenario, (None, {}))
            if name is None:
                if not tools:
                    return
                name = tools[0].name
            result = await mcp.call_tool(name, arguments)
            print(json.dumps({"tool": name, "is_error": result.is_error,
                              "content": result.content})[:2000])
    finally:
        await transport.aclose()
        await http.aclose()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m bindloop.hosts.mcp_conformance_client <server-url>", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    try:
        anyio.run(run_scenario, args[-1], scenario, _context())
    except Exception as exc:  # reported to the suite through the exit status and stderr
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
