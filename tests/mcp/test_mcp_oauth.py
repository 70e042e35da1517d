"""MCP authorization: the pure decisions (challenge parsing, discovery order, resource check, scope
selection, PKCE) and the whole flow over loopback HTTP against a scripted resource server and
authorization server (401 → discovery → registration → PKCE code flow → token with a resource
indicator → 403 step-up → refresh on expiry). The official suite's 22 authorization scenarios run
in ``make test-mcp-conformance``."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import urllib.parse
from typing import Any

import pytest
from hypothesis import given, strategies as st

from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply
from bindloop.mcp import (
    McpLimits,
    McpHttpClient,
    McpHttpError,
)
from bindloop.mcp.auth import (
    AuthorizationServerMetadata,
    McpAuthorizationError,
    McpOAuth,
    ProtectedResourceMetadata,
    parse_www_authenticate,
    transport_fetch,
)
from bindloop.stores import (
    MemoryTokenStore,
    OAuthClientInfo,
)
from bindloop.mcp._oauth_model import (
    authorization_server_metadata_urls,
    form_encode,
    pkce_pair,
    protected_resource_metadata_urls,
    query_params,
    resource_allowed,
    select_scope,
)
from test_mcp_hostile import ADD_TOOL, initialize_result, json_reply, result

pytestmark = pytest.mark.anyio


def test_www_authenticate_parameters_quoted_escaped_and_bare() -> None:
    parsed = parse_www_authenticate(
        'Bearer error="insufficient_scope", scope="a b", '
        'resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp", '
        'error_description="say \\"please\\"", realm=x')
    assert parsed.scheme == "bearer" and parsed.error == "insufficient_scope"
    assert parsed.scope == "a b" and parsed.error_description == 'say "please"'
    assert parsed.resource_metadata == ("https://rs.example/.well-known/"
                                        "oauth-protected-resource/mcp")
    assert parse_www_authenticate(None).resource_metadata is None


def test_discovery_order() -> None:
    plain = parse_www_authenticate("Bearer")
    assert protected_resource_metadata_urls("https://rs.example/mcp", plain) == [
        "https://rs.example/.well-known/oauth-protected-resource/mcp",
        "https://rs.example/.well-known/oauth-protected-resource"]
    hinted = parse_www_authenticate('Bearer resource_metadata="https://rs.example/custom.json"')
    assert protected_resource_metadata_urls("https://rs.example/mcp", hinted)[0] == (
        "https://rs.example/custom.json")
    # A path-aware issuer is never looked up at the root.
    assert authorization_server_metadata_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]
    assert authorization_server_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]


@pytest.mark.parametrize(("resource", "allowed"), [
    ("https://rs.example/mcp", True), ("https://rs.example", True), ("https://RS.example/", True),
    ("https://rs.example/mcp/", True), ("https://evil.example/mcp", False),
    ("https://rs.example/other", False), ("https://rs.example/mc", False), ("not a url", False)])
def test_a_resource_must_be_the_server_or_a_parent_of_it(resource: str, allowed: bool) -> None:
    assert resource_allowed("https://rs.example/mcp", resource) is allowed


def test_scope_selection() -> None:
    server = AuthorizationServerMetadata(scopes_supported=["a", "offline_access"])
    prm = ProtectedResourceMetadata(scopes_supported=["a", "b"])
    challenge = parse_www_authenticate('Bearer scope="c"')
    assert select_scope(challenge, prm, server, offline=False) == "c"
    assert select_scope(parse_www_authenticate("Bearer"), prm, server, offline=False) == "a b"
    assert select_scope(parse_www_authenticate("Bearer"), None, server, offline=False) is None
    assert select_scope(challenge, prm, server, offline=True, previous="a c") == (
        "a c offline_access")
    assert "offline_access" not in (select_scope(challenge, prm, AuthorizationServerMetadata(
        scopes_supported=["a"]), offline=True) or "")


def test_pkce_follows_rfc_7636_appendix_b() -> None:
    octets = bytes([116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
                    22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121])
    assert pkce_pair(octets) == ("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
                                 "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    with pytest.raises(ValueError):
        pkce_pair(b"short")


@given(st.lists(st.tuples(st.text(min_size=1), st.text()), max_size=6, unique_by=lambda p: p[0]))
def test_form_encoding_round_trips(pairs: list[tuple[str, str]]) -> None:
    assert query_params("https://x.example/cb?" + form_encode(pairs)) == dict(pairs)


class World:
    """A resource server at /mcp and an authorization server under /as, scripted on one port."""

    def __init__(self, scripted: ScriptedProviderServer) -> None:
        self.base = scripted.base_url("")[:-1]
        self.tokens: dict[str, set[str]] = {}
        self.challenges: dict[str, str] = {}
        self.token_forms: list[dict[str, str]] = []
        self.authorizations: list[dict[str, str]] = []
        self.counter = itertools.count(1)
        self.echo = False
        scripted.set_responder("mcp", self.mcp)
        scripted.set_responder(".well-known", self.well_known)
        scripted.set_responder("as", self.auth_server)

    def mcp(self, request: RecordedRequest) -> ScriptedReply:
        if request.method != "POST":
            return ScriptedReply(status=405, streamed=False)
        rpc = json.loads(request.body)
        token = dict(request.headers).get("authorization", "").removeprefix("Bearer ")
        needed = {"mcp:write"} if rpc.get("method") == "tools/call" else {"mcp:read"}
        meta = f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
        if token not in self.tokens:
            return ScriptedReply(status=401, streamed=False, chunks=(b"{}",), headers=(
                ("www-authenticate", f'Bearer scope="mcp:read", {meta}'),))
        if not needed <= self.tokens[token]:
            return ScriptedReply(status=403, streamed=False, chunks=(b"{}",), headers=(
                ("www-authenticate", f'Bearer error="insufficient_scope", '
                                     f'scope="{" ".join(sorted(needed))}", {meta}'),))
        if self.echo:
            return ScriptedReply(status=500, streamed=False,
                                 chunks=(f"denied for Bearer {token}".encode(),))
        if rpc.get("method") == "initialize":
            return initialize_result(rpc)
        if rpc.get("method") == "tools/list":
            return json_reply(result(rpc, {"tools": [ADD_TOOL]}))
        if rpc.get("method") == "tools/call":
            return json_reply(result(rpc, {"content": [{"type": "text", "text": "3"}]}))
        return ScriptedReply(status=202, streamed=False)

    def well_known(self, request: RecordedRequest) -> ScriptedReply:
        if request.path == "/.well-known/oauth-protected-resource/mcp":
            return json_reply({"resource": f"{self.base}/mcp",
                               "authorization_servers": [f"{self.base}/as"]})
        if request.path == "/.well-known/oauth-authorization-server/as":
            return json_reply({
                "issuer": f"{self.base}/as", "authorization_endpoint": f"{self.base}/as/authorize",
                "token_endpoint": f"{self.base}/as/token",
                "registration_endpoint": f"{self.base}/as/register",
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp:read", "mcp:write", "offline_access"]})
        return ScriptedReply(status=404, streamed=False)

    def auth_server(self, request: RecordedRequest) -> ScriptedReply:
        if request.path == "/as/register":
            body = json.loads(request.body)
            assert body["token_endpoint_auth_method"] == "none"
            return ScriptedReply(status=201, streamed=False, headers=(
                ("content-type", "application/json"),), chunks=(json.dumps(
                    {"client_id": "client-1", "redirect_uris": body["redirect_uris"]}).encode(),))
        if request.path == "/as/token":
            form = query_params("?" + request.body.decode())
            self.token_forms.append(form)
            if form["grant_type"] == "authorization_code":
                asked = self.authorizations[-1]
                digest = hashlib.sha256(form["code_verifier"].encode()).digest()
                assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == (
                    asked["code_challenge"])
                assert form["code"] == asked["code"] and form["resource"] == f"{self.base}/mcp"
                scopes = set(asked["scope"].split())
            else:
                assert form["grant_type"] == "refresh_token"
                scopes = {"mcp:read", "mcp:write"}
            token = f"access-token-{next(self.counter):04d}"
            self.tokens[token] = scopes
            return json_reply({"access_token": token, "token_type": "Bearer", "expires_in": 60,
                               "refresh_token": f"refresh-token-{token}",
                               "scope": " ".join(sorted(scopes))})
        return ScriptedReply(status=404, streamed=False)

    async def authorize(self, url: str) -> str:
        params = query_params(url)
        assert url.startswith(f"{self.base}/as/authorize?")
        assert params["client_id"] == "client-1" and params["code_challenge_method"] == "S256"
        params["code"] = f"code-{len(self.authorizations)}"
        self.authorizations.append(params)
        return f"{params['redirect_uri']}?code={params['code']}&state={params['state']}"


async def test_the_whole_flow_discovery_pkce_step_up_and_refresh(
        scripted: ScriptedProviderServer) -> None:
    world = World(scripted)
    clock = [0.0]
    randomness = itertools.count()
    store = MemoryTokenStore()
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=lambda n: bytes(next(randomness) % 256 for _ in range(n)),
                         store=store, now=lambda: clock[0])
        mcp = McpHttpClient(transport, server="guarded", auth=oauth,
                            limits=McpLimits(timeout_ms=5_000))
        await mcp.connect()  # 401 → discovery → registration → code flow → initialize again
        assert [a["scope"] for a in world.authorizations] == ["mcp:read offline_access"]
        await mcp.list_tools()
        # tools/call needs mcp:write: 403 insufficient_scope → authorize again with the union.
        assert (await mcp.call_tool("add", {"a": 1, "b": 2})).content[0]["text"] == "3"
        assert world.authorizations[1]["scope"] == "mcp:read offline_access mcp:write"
        assert world.authorizations[0]["state"] != world.authorizations[1]["state"]
        assert all(a["resource"] == world.base + "/mcp" for a in world.authorizations)
        assert store.tokens is not None and store.tokens.access_token == "access-token-0002"
        # The token expires on the injected clock: the next request refreshes it first.
        clock[0] += 120_000
        await mcp.call_tool("add", {"a": 1, "b": 2})
        assert world.token_forms[-1]["grant_type"] == "refresh_token"
        assert world.token_forms[-1]["refresh_token"] == "refresh-token-access-token-0002"
        assert oauth.tokens is not None and oauth.tokens.access_token == "access-token-0003"
        # A server that echoes the token gets it blanked in the error.
        world.echo = True
        with pytest.raises(McpHttpError) as caught:
            await mcp.call_tool("add", {"a": 1, "b": 2})
        assert "access-token-0003" not in str(caught.value) and "denied" in caught.value.body
    finally:
        await transport.aclose()
        await http.aclose()


async def test_metadata_naming_another_resource_is_refused_before_authorizing(
        scripted: ScriptedProviderServer) -> None:
    world = World(scripted)
    evil = ScriptedReply(status=200, streamed=False, headers=(("content-type", "application/json"),),
                         chunks=(json.dumps({"resource": "https://evil.example/mcp",
                                             "authorization_servers": [f"{world.base}/as"]}
                                            ).encode(),))
    scripted.set_responder(".well-known", lambda request: evil)
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=bytes)
        with pytest.raises(McpAuthorizationError, match="evil.example"):
            await McpHttpClient(transport, server="guarded", auth=oauth).connect()
        assert world.authorizations == []
    finally:
        await transport.aclose()
        await http.aclose()


@pytest.mark.parametrize(("path", "named"), [
    ("/.well-known/oauth-protected-resource/mcp", "protected resource metadata"),
    ("/.well-known/oauth-authorization-server/as", "authorization server metadata")])
async def test_malformed_metadata_is_named_before_authorizing(
        scripted: ScriptedProviderServer, path: str, named: str) -> None:
    world = World(scripted)
    scripted.set_responder(".well-known", lambda request: (
        json_reply({"resource": 7, "issuer": 7}) if request.path == path
        else world.well_known(request)))
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=bytes)
        with pytest.raises(McpAuthorizationError, match=f"{named} at .*{path} is malformed"):
            await McpHttpClient(transport, server="guarded", auth=oauth).connect()
        assert world.authorizations == []
    finally:
        await transport.aclose()
        await http.aclose()


def test_an_authorization_code_provider_needs_its_ports() -> None:
    from bindloop.errors import UsageError

    async def fetch(_: Any) -> Any:
        raise AssertionError

    with pytest.raises(UsageError, match="random_bytes"):
        McpOAuth(server_url="https://rs.example/mcp", fetch=fetch)


@pytest.mark.parametrize("case", ["state", "denied", "token"])
async def test_a_broken_authorization_step_is_named_and_sends_no_token(
        scripted: ScriptedProviderServer, case: str) -> None:
    world = World(scripted)
    if case == "token":
        scripted.set_responder("as", lambda request: (
            ScriptedReply(status=400, streamed=False, headers=(
                ("content-type", "application/json"),), chunks=(
                b'{"error": "invalid_grant", "error_description": "code sk-live-0123456789"}',))
            if request.path == "/as/token" else world.auth_server(request)))

    async def authorize(url: str) -> str:
        redirect = await world.authorize(url)
        if case == "state":
            return redirect.replace("state=", "state=forged")
        if case == "denied":
            return "http://127.0.0.1:9/cb?error=access_denied"
        return redirect

    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=lambda n: bytes(range(n)))
        with pytest.raises(McpAuthorizationError) as caught:
            await McpHttpClient(transport, server="guarded", auth=oauth).connect()
    finally:
        await transport.aclose()
        await http.aclose()
    expected = {"state": "state does not match", "denied": "access_denied",
                "token": "HTTP 400 (invalid_grant)"}[case]
    assert expected in str(caught.value) and "sk-live" not in str(caught.value)
    assert oauth.tokens is None and world.tokens == {}


class ForeignHintWorld(World):
    """The 401 challenge names protected-resource metadata on another origin (``localhost`` for a
    server reached as ``127.0.0.1``): it serves a document there too, so a fetch would succeed."""

    def __init__(self, scripted: ScriptedProviderServer) -> None:
        super().__init__(scripted)
        self.foreign = self.base.replace("127.0.0.1", "localhost")
        scripted.set_responder("elsewhere", lambda request: json_reply(
            {"resource": f"{self.base}/mcp", "authorization_servers": [f"{self.base}/as"]}))

    def mcp(self, request: RecordedRequest) -> ScriptedReply:
        reply = super().mcp(request)
        if reply.status == 401:
            return ScriptedReply(status=401, streamed=False, chunks=(b"{}",), headers=(
                ("www-authenticate",
                 f'Bearer scope="mcp:read", resource_metadata="{self.foreign}/elsewhere/prm"'),))
        return reply


@pytest.mark.parametrize("allowed", [False, True])
async def test_a_challenge_cannot_send_discovery_to_another_origin(
        scripted: ScriptedProviderServer, allowed: bool) -> None:
    world = ForeignHintWorld(scripted)
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=bytes,
                         metadata_origins=(world.foreign,) if allowed else ())
        await McpHttpClient(transport, server="guarded", auth=oauth).connect()
        paths = [r.path for r in scripted.requests]
        assert ("/elsewhere/prm" in paths) is allowed
        # not allowed: the well-known URL at the server's own origin was used instead
        assert ("/.well-known/oauth-protected-resource/mcp" in paths) is not allowed
    finally:
        await transport.aclose()
        await http.aclose()


class IssWorld(World):
    """The authorization server says it sends ``iss`` (RFC 9207); the redirect's ``iss`` is
    ``iss`` (``None``: left out)."""

    def __init__(self, scripted: ScriptedProviderServer, iss: str | None,
                 advertised: bool = True) -> None:
        super().__init__(scripted)
        self.iss = iss
        self.advertised = advertised
        self.registrations = 0

    def well_known(self, request: RecordedRequest) -> ScriptedReply:
        reply = super().well_known(request)
        if request.path != "/.well-known/oauth-authorization-server/as":
            return reply
        metadata = json.loads(b"".join(reply.chunks))
        metadata["authorization_response_iss_parameter_supported"] = self.advertised
        return json_reply(metadata)

    def auth_server(self, request: RecordedRequest) -> ScriptedReply:
        if request.path == "/as/register":
            assert json.loads(request.body)["application_type"] == "native"  # a loopback redirect
            self.registrations += 1
        return super().auth_server(request)

    async def authorize(self, url: str) -> str:
        redirect = await super().authorize(url)
        if self.iss is None:
            return redirect
        return redirect + "&iss=" + urllib.parse.quote(self.iss, safe="")


@pytest.mark.parametrize(("iss", "advertised", "refused"), [
    ("{as}", True, None),
    ("{as}", False, None),
    (None, False, None),
    (None, True, "no iss"),
    ("https://evil.example/as", True, "evil.example"),
    ("https://evil.example/as", False, "evil.example"),
    ("{as}/", True, "is not the authorization server"),  # compared exactly: no normalization
])
async def test_the_redirects_issuer_is_checked_exactly_rfc_9207(
        scripted: ScriptedProviderServer, iss: str | None, advertised: bool,
        refused: str | None) -> None:
    world = IssWorld(scripted, None if iss is None else iss.format(**{"as": "AS"}),
                     advertised)
    if world.iss is not None:
        world.iss = world.iss.replace("AS", f"{world.base}/as")
    # A registration stored at another issuer is not used there: this one registers anew.
    store = MemoryTokenStore()
    await store.save_client(OAuthClientInfo(client_id="old-client", issuer="https://old.example"))
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=lambda n: bytes(range(n)), store=store)
        client = McpHttpClient(transport, server="guarded", auth=oauth,
                               limits=McpLimits(timeout_ms=5_000))
        if refused is None:
            await client.connect()
            assert world.token_forms and world.registrations == 1
            assert store.client is not None and store.client.issuer == f"{world.base}/as"
        else:
            with pytest.raises(McpAuthorizationError, match=refused):
                await client.connect()
            assert world.token_forms == []  # the code is never redeemed
    finally:
        await transport.aclose()
        await http.aclose()


class MovingWorld(World):
    """After ``move()`` the resource names another authorization server (``/as2``, a copy of the
    first under another issuer) and refuses the tokens of the first."""

    def __init__(self, scripted: ScriptedProviderServer) -> None:
        super().__init__(scripted)
        self.moved = False
        self.registered_at: list[str] = []
        self.token_calls: list[tuple[str, str]] = []  # (token endpoint path, grant type)
        scripted.set_responder("as2", self.auth_server)

    def move(self) -> None:
        self.moved = True
        self.tokens.clear()

    def well_known(self, request: RecordedRequest) -> ScriptedReply:
        if request.path == "/.well-known/oauth-protected-resource/mcp" and self.moved:
            return json_reply({"resource": f"{self.base}/mcp",
                               "authorization_servers": [f"{self.base}/as2"]})
        if request.path == "/.well-known/oauth-authorization-server/as2":
            first = super().well_known(with_path(
                request, "/.well-known/oauth-authorization-server/as"))
            return json_reply(json.loads(b"".join(first.chunks).replace(
                b"/as", b"/as2")))
        return super().well_known(request)

    def auth_server(self, request: RecordedRequest) -> ScriptedReply:
        if request.path.endswith("/register"):
            self.registered_at.append(request.path.split("/")[1])
        if request.path.endswith("/token"):
            grant = query_params("?" + request.body.decode()).get("grant_type", "")
            self.token_calls.append((request.path, grant))
        if self.moved and request.path.startswith("/as/"):
            # The old authorization server is gone: a refresh there is refused.
            return ScriptedReply(status=400, streamed=False, headers=(
                ("content-type", "application/json"),), chunks=(b'{"error":"invalid_grant"}',))
        return super().auth_server(with_path(
            request, request.path.replace("/as2/", "/as/")))

    async def authorize(self, url: str) -> str:
        return await super().authorize(url.replace("/as2/", "/as/"))


def with_path(request: RecordedRequest, path: str) -> RecordedRequest:
    return dataclasses.replace(request, path=path)


async def test_a_resource_that_moves_to_another_issuer_is_rediscovered_and_registered_again(
        scripted: ScriptedProviderServer) -> None:
    world = MovingWorld(scripted)
    store = MemoryTokenStore()
    transport = HttpxTransport(world.base + "/mcp")
    import httpx

    http = httpx.AsyncClient()
    try:
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=lambda n: bytes(range(n)), store=store)
        client = McpHttpClient(transport, server="guarded", auth=oauth,
                               limits=McpLimits(timeout_ms=5_000))
        await client.connect()
        assert world.registered_at == ["as"]
        world.move()
        await client.list_tools()  # 401: the metadata is read again, the client registers anew
        assert world.registered_at == ["as", "as2"]
        assert store.client is not None and store.client.issuer == f"{world.base}/as2"
    finally:
        await transport.aclose()
        await http.aclose()


async def test_a_stored_refresh_token_is_only_ever_sent_to_its_issuer(
        scripted: ScriptedProviderServer) -> None:
    world = MovingWorld(scripted)
    store = MemoryTokenStore()
    clock = [0.0]
    import httpx

    http = httpx.AsyncClient()
    transports: list[HttpxTransport] = []

    def connect() -> McpHttpClient:
        transports.append(HttpxTransport(world.base + "/mcp"))
        oauth = McpOAuth(server_url=world.base + "/mcp",
                         fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                         authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                         random_bytes=lambda n: bytes(range(n)), store=store,
                         now=lambda: clock[0])
        return McpHttpClient(transports[-1], server="guarded", auth=oauth,
                             limits=McpLimits(timeout_ms=5_000))

    try:
        await connect().connect()
        assert store.tokens is not None and store.tokens.issuer == f"{world.base}/as"
        world.move()
        clock[0] = 120_000.0  # the stored token has expired; a new process starts from the store
        await connect().connect()
        refreshed_at = [path for path, grant in world.token_calls if grant == "refresh_token"]
        assert not any(path.startswith("/as2/") for path in refreshed_at)
        assert store.tokens is not None and store.tokens.issuer == f"{world.base}/as2"
        assert world.registered_at == ["as", "as2"]
    finally:
        for transport in transports:
            await transport.aclose()
        await http.aclose()
