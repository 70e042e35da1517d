# Run under Pyodide in Node by tests/run/test_pyodide_exit.py: stream watchdogs with the default
# budgets (a 120 s wait for the first token) — one supervised by a task, one by timer callbacks of
# the loop (supervise_on, what a call on asyncio uses) — and a ten-minute run deadline, each
# watched and then finished early. Node must exit soon after: no timer of theirs may be left far
# ahead. `ok` also says that a short budget fires through supervise_on's sliced timers here.
import asyncio
import json

import anyio

from bindloop.wire import create_stream_watchdog
from bindloop.run import create_run_deadline, watch_deadline

watchdog = create_stream_watchdog()
timed = create_stream_watchdog()
quick = create_stream_watchdog(first_token_ms=1500, inter_chunk_ms=None, total_ms=None)
deadline = create_run_deadline(timeout_ms=600_000)


async def main() -> None:
    loop = asyncio.get_running_loop()
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.supervise)
        tg.start_soon(watch_deadline, deadline)
        timed.supervise_on(loop)
        quick.supervise_on(loop)
        watchdog.open()
        timed.open()
        quick.open()
        await anyio.sleep(0.05)
        watchdog.dispose()
        timed.dispose()
        deadline.dispose()
        for _ in range(600):  # 30 s at most (not fail_after: its own timer would linger)
            if quick.signal.aborted:
                break
            await anyio.sleep(0.05)
        quick.dispose()


await main()  # noqa: F704 - top-level await: the runner uses runPythonAsync
stall = quick.stall()
json.dumps({"ok": stall is not None and stall.kind == "first_token",
            "stall": watchdog.stall() is not None or timed.stall() is not None,
            "deadline_fired": deadline.signal.aborted})
