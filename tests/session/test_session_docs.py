"""docs/session.md's example runs as written and prints what it claims."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "session.md"


def test_the_example_runs(capsys: Any) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(DOC), "exec"), {})
    assert capsys.readouterr().out.split() == ["checkpointed", "done", "2"]
