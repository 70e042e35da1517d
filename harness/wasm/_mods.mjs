import { startPyodide, installWheels } from "./pyodide_host.mjs";
const { pyodide } = await startPyodide();
installWheels(pyodide);
pyodide.runPython(`
import sys, types
w = types.ModuleType("workers")
class WorkerEntrypoint: pass
class DurableObject: pass
class Response: pass
w.WorkerEntrypoint = WorkerEntrypoint; w.Response = Response; w.DurableObject = DurableObject
sys.modules["workers"] = w
import bindloop.hosts.workers.app, bindloop.hosts
import bindloop.wire._openai_chat
from bindloop.hosts import create_model
from bindloop.wire import ModelAdapter
create_model("openai:gpt-4.1-mini", env={"OPENAI_API_KEY": "k"})
files = sorted({m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None) and "site-packages" in m.__file__})
open("/tmp/imported.txt", "w").write("\\n".join(f.split("site-packages/")[1] for f in files))
`);
console.log(pyodide.FS.readFile("/tmp/imported.txt", {encoding: "utf8"}));
