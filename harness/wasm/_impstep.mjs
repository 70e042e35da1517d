import { startPyodide, installWheels } from "./pyodide_host.mjs";
const { pyodide } = await startPyodide();
installWheels(pyodide);
pyodide.runPython(`
import sys, types, gc, tracemalloc
w = types.ModuleType("workers")
class WorkerEntrypoint: pass
class DurableObject: pass
class Response: pass
w.WorkerEntrypoint = WorkerEntrypoint; w.Response = Response; w.DurableObject = DurableObject
sys.modules["workers"] = w
import asyncio, json, re, gc
gc.collect()
tracemalloc.start(1)
def step(stmt):
    gc.collect(); a = tracemalloc.get_traced_memory()[0]
    n0 = len(sys.modules)
    exec(stmt, {})
    gc.collect(); b = tracemalloc.get_traced_memory()[0]
    print(f"{(b - a) / 1024:8.0f} KiB  +{len(sys.modules) - n0:3d} modules  {stmt}")
for s in """${process.env.STEPS}""".split(";"):
    step(s.strip())
`);
