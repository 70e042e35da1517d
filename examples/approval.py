import sys

import anyio
from bindloop.agent import create_agent, equip_instruction, equip_tool, prompt_chat, resume_chat
from bindloop.agent.approvals import approve, pending_approvals
from bindloop.hosts import create_model
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.tools import define_tool

store = SqliteStore("chats.db")


@define_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    print(f"deleting {path}")  # the effect that must happen once
    return f"deleted {path}"


async def files(request: str):
    equip_tool(delete_file, needs_approval=True)
    if request.startswith("approve "):  # a later process: the person said yes
        stored = store.load_checkpoint(request.removeprefix("approve "))
        decisions = [approve(call) for call in pending_approvals(stored)]
        return await resume_chat(stored, decisions=decisions, on_checkpoint=store.save_checkpoint)
    equip_instruction(request)
    return await prompt_chat(on_checkpoint=store.save_checkpoint)


agent = create_agent(handler=files, model=create_model("openai:gpt-5.1"), execution_ids=store.new_execution_id)
result = anyio.run(agent, sys.argv[1])
print(result.data or f"approve {result.checkpoint.execution_id}")
