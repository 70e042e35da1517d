"""An approval across processes through SqliteStore: one process suspends and saves, a fresh one
loads and approves (the effect runs once, there), a third deciding again is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = r'''
import sys
import anyio, msgspec
from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_chat,
    resume_chat,
)
from bindloop.agent.approvals import (
    ApprovalAlreadyDecidedError,
    approve,
    pending_approvals,
)
from bindloop.contracts import ToolResult
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.tools import define_tool
from bindloop.checkpoints import parse_loop_checkpoint, serialize_loop_checkpoint
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

db, effects, step = sys.argv[1], sys.argv[2], sys.argv[3]
SECRET = b"s3cret"

class Target(msgspec.Struct):
    path: str

async def delete(args: Target, ctx: object) -> ToolResult:
    with open(effects, "a") as f:   # the side effect, visible to the test
        f.write(args.path + "\n")
    return ToolResult(content="deleted")

tool = define_tool(name="delete", description="Delete", args=Target, execute=delete)
store = SqliteStore(db)

async def start(_: None) -> ChatResult:
    equip_instruction("clean up")
    equip_tool(tool, needs_approval=True)
    return await prompt_chat(on_checkpoint=store.save_checkpoint, approval_secret=SECRET)

async def decide(_: None) -> ChatResult:
    equip_tool(tool, needs_approval=True)
    if step == "decide":
        (ident,) = store.checkpoint_ids()
        cp = store.load_checkpoint(ident)
        with open(effects + ".seen", "wb") as f:  # what this decider saw, for a second one
            f.write(serialize_loop_checkpoint(cp))
    else:  # a second decision on the very checkpoint the first decider approved
        with open(effects + ".seen", "rb") as f:
            cp = parse_loop_checkpoint(f.read())
    pending = pending_approvals(cp, secret=SECRET)
    return await resume_chat(cp, decisions=[approve(pending[0])],
                             on_checkpoint=store.save_checkpoint, approval_secret=SECRET)

if step == "start":
    model = scripted_stream_model([tool_call_turn([tool_call("delete", {"path": "/tmp/x"})])])
    out = anyio.run(create_agent(id="files", handler=start, model=model), None)
    print(out.stop_reason, len(out.approvals))
else:
    model = scripted_stream_model([final_answer("gone")])
    try:
        out = anyio.run(create_agent(id="files", handler=decide, model=model), None)
    except ApprovalAlreadyDecidedError as exc:
        print("refused", type(exc).__name__)
    else:
        print(out.stop_reason, out.checkpoint.status)
'''


def _run(script: Path, db: Path, effects: Path, step: str) -> str:
    done = subprocess.run([sys.executable, str(script), str(db), str(effects), step],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_suspend_in_one_process_approve_in_another_runs_once(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    db, effects = tmp_path / "store.db", tmp_path / "effects.txt"
    assert _run(script, db, effects, "start") == "waiting_for_reply 1"
    assert not effects.exists()  # nothing ran before the decision
    assert _run(script, db, effects, "decide") == "done finished"
    assert _run(script, db, effects, "again") == "refused ApprovalAlreadyDecidedError"
    assert effects.read_text() == "/tmp/x\n"  # the effect ran once, in the deciding process
