"""The handler ``create_agent`` runs when it is given none: a chat over the given tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..errors import UsageError
from ._hooks import equip_instruction, equip_system, equip_tool
from ._prompt import ChatResult, prompt_chat

__all__ = ("chat_handler",)


def chat_handler(tools: Sequence[Any], instructions: str | None
                 ) -> Callable[[str], Awaitable[ChatResult]]:
    """``handler(prompt)``: ``instructions`` as the system message, every tool equipped (a plain
    function or a ``Tool``, as :func:`equip_tool` takes them), ``prompt`` as the user's message,
    then :func:`prompt_chat`. The common agent, spelled once; a handler of your own does the same
    with the hooks (and anything else they offer)."""
    if instructions is not None and not isinstance(instructions, str):
        raise UsageError(f"create_agent(instructions=...) must be a str, got "
                         f"{type(instructions).__name__}")
    equipped = tuple(tools)

    async def chat(prompt: str) -> ChatResult:
        if not isinstance(prompt, str):
            raise UsageError(f"an agent made without a handler is called with the user's message "
                             f"(a str), got {type(prompt).__name__}")
        if instructions is not None:
            equip_system(instructions)
        for tool in equipped:
            equip_tool(tool)
        equip_instruction(prompt)
        return await prompt_chat()

    return chat
