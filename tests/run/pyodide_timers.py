# Run under Pyodide in Node by tests/run/test_pyodide_exit.py: a stream watchdog with the default
# budgets (a 120 s wait for the first token) and a ten-minute run deadline, each watched and then
# finished early. Node must exit soon after: no timer of theirs may be left far ahead.
import json

import anyio

from bindloop.wire import create_stream_watchdog
from bindloop.run import create_run_deadline, watch_deadline

watchdog = create_stream_watchdog()
deadline = create_run_deadline(timeout_ms=600_000)


async def main() -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.supervise)
        tg.start_soon(watch_deadline, deadline)
        watchdog.open()
        await anyio.sleep(0.05)
        watchdog.dispose()
        deadline.dispose()


await main()  # noqa: F704 - top-level await: the runner uses runPythonAsync
json.dumps({"ok": True, "stall": watchdog.stall() is not None, "deadline_fired": deadline.signal.aborted})
