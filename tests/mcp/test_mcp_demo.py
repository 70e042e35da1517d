"""``make demo-mcp`` end to end against the SDK's server: catalog, activation, real tool results,
a validation refusal, progress, cancellation by the signal, and a finished run."""

from __future__ import annotations

import pytest

from examples.demos.mcp_demo import run_mcp_demo

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_demo_loads_the_server_and_uses_its_tools(reference_url: str) -> None:
    lines: list[str] = []
    result = await run_mcp_demo(reference_url, lines.append)
    text = "\n".join(lines)
    assert result.stop_reason == "done"
    assert "connected to MCP server 'shapes': 6 tools, 0 skipped" in text
    assert 'shapes__add({"a":1234,"b":4321}) → 5555' in text
    assert "['ImagePart(image/png)']" in text
    assert "/a: expected integer, got string" in text and "kind='validation'" in text
    assert "shapes__slow progress" in text and "kind='cancelled'" in text
    assert "stop reason: aborted" in text and "stop reason: done" in text
    assert "I drew the red square" in text
