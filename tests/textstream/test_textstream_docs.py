"""The code blocks in docs/textstream.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "textstream.md"


def test_textstream_doc_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
