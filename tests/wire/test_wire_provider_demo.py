"""The provider demo mode: the demo agent over real HTTP, falling back from a 503 provider."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("httpx")

from examples.demos import provider_demo  # noqa: E402


def test_scripted_provider_demo_falls_back_and_finishes() -> None:
    lines: list[str] = []
    result = anyio.run(provider_demo.run_scripted, provider_demo.DEFAULT_PROMPT, lines.append, 8)
    text = "\n".join(lines)
    assert result.stop_reason == "done"
    assert text.count("primary/demo/policy-model: server_error (HTTP 503) → traverse") == 3
    assert text.count("backup/demo/policy-model: succeeded") == 3
    assert "(17 * 23) + 4 = 395" in text and "HTTP requests served: 6" in text


def test_openai_mode_requires_base_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit):
        provider_demo.main(["openai"])
    monkeypatch.delenv("BINDLOOP_TEST_KEY", raising=False)
    with pytest.raises(SystemExit):
        provider_demo.main(["openai", "--base-url", "http://127.0.0.1:9/v1",
                            "--api-key-env", "BINDLOOP_TEST_KEY"])


def test_openai_mode_never_prints_the_key_a_server_echoes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI against a real loopback server that answers 401 with the key in its message, as
    OpenAI-compatible servers do: neither the output nor the error that ends the run shows it."""
    import traceback

    from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply

    key = "sk-live-demo-9Qx7T2canary0c4d"
    body = ('{"error":{"message":"Incorrect API key provided: ' + key + '.",'
            '"type":"invalid_request_error","code":"invalid_api_key"}}').encode()
    monkeypatch.setenv("BINDLOOP_TEST_KEY", key)
    with ScriptedProviderServer() as server:
        server.enqueue("v1", error_reply(401, body))
        with pytest.raises(Exception) as info:
            provider_demo.main(["openai", "hi", "--base-url", server.base_url("v1"),
                                "--model", "m", "--api-key-env", "BINDLOOP_TEST_KEY"])
        assert any(key in v for r in server.requests for _, v in r.headers)  # really sent
    out = capsys.readouterr()
    shown = out.out + out.err + "".join(traceback.format_exception(info.value))
    assert "401" in shown and "<redacted" in shown
    assert key not in shown
