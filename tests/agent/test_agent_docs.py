"""docs/agent.md: every Python block runs as written, in order."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "agent.md"


def test_agent_tutorial_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)]
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "agent.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Weather(city='Lisbon', high_c=24, note=None)" in out
    assert "high_c 240 is implausible" in out
    assert "waiting_for_reply -> done Lisbon it is." in out
    assert "Noted. ['buy milk']" in out  # the saved round was not run again
    assert "['draft 1', 'draft 2']" in out
    assert "complete:{'city': 'Oslo', 'high_c': -3, 'note': 'snow'}" in out


def test_readme_agent_example_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## The agent API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(textwrap.dedent(block), "README.md", "exec"), {})
    assert "Weather(city='Lisbon', high_c=24)" in capsys.readouterr().out
