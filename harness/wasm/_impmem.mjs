import { startPyodide, installWheels } from "./pyodide_host.mjs";
const { pyodide } = await startPyodide();
installWheels(pyodide);
const heap = () => pyodide._module.HEAPU8.length / 2**20;
console.log("heap after boot", heap());
pyodide.runPython(`
import sys, types
w = types.ModuleType("workers")
class WorkerEntrypoint: pass
class DurableObject: pass
class Response: pass
w.WorkerEntrypoint = WorkerEntrypoint; w.Response = Response; w.DurableObject = DurableObject
sys.modules["workers"] = w
import asyncio, json, re, gc
gc.collect()
`);
console.log("heap before", heap());
pyodide.runPython(process.env.PRE || "");
pyodide.runPython(`
import tracemalloc, gc
tracemalloc.start(1)
s0 = tracemalloc.take_snapshot()
before = set(sys.modules)
import ${process.env.MODS || "bindloop.hosts.workers.app, bindloop.hosts"}
gc.collect()
s1 = tracemalloc.take_snapshot()
new = sorted(set(sys.modules) - before)
print("new modules", len(new), [m for m in new if not m.startswith("bindloop")])
stats = s1.compare_to(s0, "filename")
print("total KiB", sum(s.size_diff for s in stats)/1024)
for s in stats[:int("${process.env.TOP || 25}")]:
    print(f"{s.size_diff/1024:8.1f} KiB {s.count_diff:7d} {s.traceback[0].filename}")
cur, peak = tracemalloc.get_traced_memory()
print("traced cur/peak KiB", cur/1024, peak/1024)
`);
console.log("heap after", heap());
