"""The README example and the tutorial's code blocks run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(text: str) -> list[str]:
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]


def test_readme_example_runs() -> None:
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks, "README lost its example"
    assert len(blocks[0].strip().splitlines()) <= 16
    exec(compile(blocks[0], "README.md", "exec"), {})


def test_tutorial_runs_end_to_end(capsys) -> None:  # type: ignore[no-untyped-def]
    blocks = _python_blocks((ROOT / "docs" / "tutorial.md").read_text())
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "tutorial.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "done 2" in out
    assert "ToolMessage" in out
