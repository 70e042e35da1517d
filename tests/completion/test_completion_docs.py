"""The code blocks in docs/completion.md run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "completion.md"


def test_completion_doc_examples_run() -> None:
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)]
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
