"""The agent's tools: plain functions (hints: the schema; docstrings: the descriptions)."""

from typing import Annotated
import msgspec
from bindloop.contracts import ToolSuspend
from bindloop.tools import define_tool


@define_tool
def ask_user(question: Annotated[str, msgspec.Meta(min_length=1)]) -> ToolSuspend:
    """Ask the user a question and wait for the answer before continuing."""
    return ToolSuspend(mode="waiting_for_reply", detail=question)  # POST .../reply answers it


@define_tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


TOOLS = (ask_user, word_count)
