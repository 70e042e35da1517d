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


def test_agent_approval_example_runs_on_its_own(capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/agent.md's approval block is self-contained: it runs alone, the approved call runs
    once inside the resumed run, and the repeated decision is refused."""
    text = (ROOT / "docs" / "agent.md").read_text()
    section = text.split("### Approvals", 1)[1].split("\n### ", 1)[0]
    (block,) = _python_blocks(section)
    exec(compile(block, "agent.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "waiting_for_reply [('rm', '{\"path\":\"/home/a.txt\"}')]",
        "refused: ('call_1_0',)",
        "Removed it. ['/home/a.txt'] finished",
    ]


def test_model_page_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/model.md's blocks: a StreamModel's own fold, priced, and the loop's port over a model."""
    namespace: dict[str, object] = {}
    for block in _python_blocks((ROOT / "docs" / "model.md").read_text()):
        exec(compile(block, "model.md", "exec"), namespace)
    assert capsys.readouterr().out.splitlines() == ["you said: hi 6 5", "done"]
