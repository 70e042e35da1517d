"""The provider demo mode: the demo agent over real HTTP, falling back from a 503 provider."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("httpx")

from bindloop.hosts import provider_demo  # noqa: E402


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
