#!/usr/bin/env node
// Build the browser page's standard-library bytecode table: the standard-library modules the page
// imports after the runtime's boot, compiled by Pyodide's own CPython 3.14 from Pyodide's own
// python_stdlib.zip (inside Pyodide, in Node, offline), written to OUT.
//
//   node harness/wasm/build_stdlib_bytecode.mjs harness/wasm/wheels-bytecode harness/wasm/stdlib-bytecode/stdlib-bytecode.bin
//
// Which modules: the page's own work before its first model call, done here as the page does it —
// install WHEELS_DIR's wheels and the demo's module files, import what loader.js imports, run
// page_agent.py's module code, and load anyio's asyncio backend (every run's first anyio call does)
// — and then every module in sys.modules that was not there after the boot and comes from the
// standard-library zip. The compiling and the file format are harness/wasm/stdlib_bytecode.py's.

import fs from "node:fs";
import path from "node:path";
import { WASM_DIR, pythonErrorText, startPyodide } from "./pyodide_host.mjs";
import { installPage } from "./demo/loader.js";

const REPO = path.dirname(path.dirname(WASM_DIR));
// What app.js installs and loader.js imports, and the backend a run loads.
const DEMO_MODULES = ["examples/__init__.py", "examples/demos/__init__.py", "examples/demos/demo.py"];
const PAGE_IMPORTS = "import bindloop, bindloop.loop, bindloop.wire, bindloop.routing, bindloop.hosts.transports.js_fetch";
const RUN_IMPORTS = "import anyio._backends._asyncio";

const [wheelsDir, out] = process.argv.slice(2);
if (!wheelsDir || !out) {
  process.stderr.write("usage: node harness/wasm/build_stdlib_bytecode.mjs WHEELS_DIR OUT\n");
  process.exit(2);
}
const wheels = fs.existsSync(wheelsDir) ? fs.readdirSync(wheelsDir).filter((f) => f.endsWith(".whl")).sort() : [];
if (wheels.length === 0) {
  process.stderr.write(`error: no wheels in ${wheelsDir}: run \`make wasm-wheels-bytecode\`\n`);
  process.exit(2);
}

const { pyodide } = await startPyodide();
try {
  pyodide.runPython("import sys; _booted = set(sys.modules)");
  installPage(pyodide, wheels.map((name) => fs.readFileSync(path.join(wheelsDir, name))),
    DEMO_MODULES.map((rel) => ({ path: rel })),
    DEMO_MODULES.map((rel) => fs.readFileSync(path.join(REPO, rel), "utf8")));
  pyodide.runPython(PAGE_IMPORTS);
  const page = pyodide.globals.get("dict")();
  page.set("__name__", "page_agent");
  pyodide.runPython(fs.readFileSync(path.join(WASM_DIR, "demo", "page_agent.py"), "utf8"), { globals: page });
  page.destroy();
  pyodide.runPython(RUN_IMPORTS);

  const ns = pyodide.globals.get("dict")();
  ns.set("__name__", "stdlib_bytecode");
  const source = fs.readFileSync(path.join(WASM_DIR, "stdlib_bytecode.py"), "utf8");
  pyodide.runPython(source, { globals: ns });
  ns.set("installer_source", source);
  const names = pyodide.runPython(`
import sys, zipimport
stdlib = _stdlib_zip()
sorted(n for n, m in list(sys.modules.items())
       if n not in sys.modules["__main__"]._booted
       and isinstance(getattr(getattr(m, "__spec__", None), "loader", None), zipimport.zipimporter)
       and str(m.__spec__.origin).startswith(stdlib + "/"))
`, { globals: ns });
  ns.set("names", names);
  const table = pyodide.runPython("build_table(names, installer_source)", { globals: ns });
  const bytes = table.toJs();
  table.destroy();
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, bytes);
  process.stderr.write(`[stdlib] ${names.length} modules -> ${out} (${(bytes.length / 1024).toFixed(0)} KiB): ${names.toJs().join(", ")}\n`);
} catch (err) {
  process.stderr.write(`[stdlib] ${pythonErrorText(err)}\n`);
  process.exit(1);
}
process.exit(0);
