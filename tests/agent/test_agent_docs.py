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
    try:
        for block in blocks:
            exec(compile(block, "agent.md", "exec"), namespace)
    finally:
        import logging

        logging.getLogger("weather.tools").handlers.clear()  # the page's handler, not ours
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
    # The run events: the text as it streams, tools started and finished, turns and saves.
    assert "Sunny| in L|isbon|, 24C|.| -> Sunny in Lisbon, 24C." in out
    assert ('[\'done flaky: {"outcome":"error","error":"ConnectionError: the tool failed"} '
            "ConnectionError', 'done weather: {\"outcome\":\"result\",\"content\":\"sunny, "
            "24C\"} None', 'start flaky', 'start weather']") in out
    assert "['turn 0 tool_calls 0', 'saved ready r0', 'turn 1 stop 0', 'saved finished r1']" in out
    # Stats without a trace bus; the tool failure logged, redacted; the model read no message.
    assert "(Weather(city='Lisbon', high_c=24, note=None), 2, 60)" in out
    assert "tool lookup (call call_1_0) of agent costed failed: ConnectionError: db at " \
        "postgres://<redacted>@db.internal refused" in out
    assert '{"error":"ConnectionError: the tool failed","kind":"error"}' in out
    assert "hunter22" not in out
    assert "Noted. ['buy milk', 'call mum']" in out  # saved and resumed through SqliteStore


def test_readme_agent_example_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## The agent API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    exec(compile(textwrap.dedent(block), "README.md", "exec"), {})
    assert "Weather(city='Lisbon', high_c=24)" in capsys.readouterr().out


START, END = "<!-- agent-events:start -->", "<!-- agent-events:end -->"


def _type_name(tp: object) -> str:
    """A field's type as a reader writes it (``str | None``, ``'stop' | 'length'``, ``ToolCall``)."""
    import types
    import typing

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if tp is typing.Any:
        return "Any"
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`".replace("`'", "`\"").replace("'`", "\"`") for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{origin.__name__}[{inner}]"
    return getattr(tp, "__name__", str(tp))


def _fields(cls: type) -> list[tuple[str, object]]:
    import typing

    import msgspec

    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in msgspec.structs.fields(cls)]


def _nested(tp: object, into: dict[str, type]) -> None:
    """Every Struct a field's type names, and the Structs those name (the fields' own shapes)."""
    import typing

    import msgspec

    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        if tp.__name__ == "LoopCheckpoint":  # the session's document, described in its own docs
            return
        if tp.__name__ not in into:
            into[tp.__name__] = tp
            for _, inner in _fields(tp):
                _nested(inner, into)
        return
    for arg in typing.get_args(tp):
        _nested(arg, into)


def render_event_table() -> str:
    """The docs tables of what an AgentStreamEvent's ``event`` can be, and of the values its
    fields hold, from the types themselves (names and types of every field)."""
    import typing

    import msgspec

    from bindloop.agent.events import RunEvent

    def fields(cls: type) -> str:
        return ", ".join(f"`{name}`: {_type_name(tp)}" for name, tp in _fields(cls)) or "—"

    rows = ["| `type` | class | from | fields |", "|---|---|---|---|"]
    nested: dict[str, type] = {}
    for cls in typing.get_args(RunEvent):
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        source = "agent" if cls.__module__.startswith("bindloop.agent") else "model stream"
        rows.append(f"| `{info.tag}` | `{cls.__name__}` | {source} | {fields(cls)} |")
        for _, tp in _fields(cls):
            _nested(tp, nested)
    rows += ["", "The values those fields hold:", "", "| class | fields |", "|---|---|"]
    rows += [f"| `{name}` | {fields(cls)} |" for name, cls in sorted(nested.items())]
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
