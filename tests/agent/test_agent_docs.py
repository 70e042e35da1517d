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
    assert "waiting_for_reply [('rm', '{\"path\":\"/home/a.txt\"}')]" in out
    assert "refused: ('call_1_0',)" in out
    assert "Removed it. ['/home/a.txt'] finished" in out  # approved once, run inside the run
    assert "['draft 1', 'draft 2']" in out
    assert "complete:{'city': 'Oslo', 'high_c': -3, 'note': 'snow'}" in out


def test_readme_agent_example_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## The agent API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(textwrap.dedent(block), "README.md", "exec"), {})
    assert "Weather(city='Lisbon', high_c=24)" in capsys.readouterr().out


START, END = "<!-- agent-events:start -->", "<!-- agent-events:end -->"


def render_event_table() -> str:
    """The docs table of what an AgentStreamEvent's ``event`` can be, from the types themselves."""
    import typing

    import msgspec

    from bindloop.agent import AgentEvent

    rows = ["| `type` | class | from | fields |", "|---|---|---|---|"]
    for cls in typing.get_args(AgentEvent):
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        fields = ", ".join(f"`{f.name}`" for f in info.fields) or "—"
        source = "agent" if cls.__module__.startswith("bindloop.agent") else "model stream"
        rows.append(f"| `{info.tag}` | `{cls.__name__}` | {source} | {fields} |")
    return "\n".join(rows)


def _doc_table(text: str) -> str:
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def test_the_event_table_is_generated_from_the_types() -> None:
    assert _doc_table(DOC.read_text()) == render_event_table(), (
        "docs/agent.md's event table is stale: run python tests/agent/test_agent_docs.py")


if __name__ == "__main__":  # rewrite the table in docs/agent.md
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    DOC.write_text(f"{head}{START}\n{render_event_table()}\n{END}{rest.split(END, 1)[1]}")
