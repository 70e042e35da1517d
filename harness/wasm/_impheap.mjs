import { startPyodide, installWheels } from "./pyodide_host.mjs";
const { pyodide } = await startPyodide();
installWheels(pyodide);
const M = pyodide._module;
const heap = () => (M.HEAPU8.length / 2**20).toFixed(2);
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
// mallinfo via Python? use sbrk(0)-ish: emscripten exposes _emscripten_get_heap_size; use Python's sys._debugmallocstats not available. We'll use a marker malloc.
const used = () => {
  const h0 = M.HEAPU8.length; const ptrs = [];
  while (M.HEAPU8.length === h0) { const p = M._malloc(16384); if (!p) break; ptrs.push(p); }
  const n = ptrs.length - 1; for (const p of ptrs) M._free(p);
  return "inuse~" + ((h0 - n * 16384) / 2**20).toFixed(2);
};
console.log("heap", heap(), "probe", used());
for (const step of (process.env.STEPS || "msgspec;bindloop.hosts.workers.app, bindloop.hosts").split(";")) {
  const before = new Set(pyodide.runPython("list(sys.modules)").toJs());
  pyodide.runPython(`import ${step}\ngc.collect()`);
  const after = pyodide.runPython("list(sys.modules)").toJs();
  const added = after.filter(m => !before.has(m));
  console.log(`after ${step}: heap ${heap()} probe ${used()} +${added.length} modules`, added.filter(m=>!m.startsWith("bindloop")).join(" "));
}
