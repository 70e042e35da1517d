#!/usr/bin/env node
// Run a Python snippet file under Pyodide 314 in Node with every wheel in
// harness/wasm/wheels/ installed, fully offline.
//
//   node harness/wasm/run_smoke.mjs SNIPPET.py [REPO_ROOT]
//
// The snippet runs through pyodide.runPythonAsync, so top-level `await` works
// (anyio.run()/asyncio.run() do not: a loop is already running). If the value of
// its last expression is not None it is printed. The Python test fixtures (harness/fixtures/)
// are importable as harness.fixtures; with REPO_ROOT, the repo's harness/conformance/ tree is
// copied to /conformance_root/conformance/ first.
// Exit status: 0 on success, 1 on a Python exception (traceback on stderr),
// 2 on a usage/setup error.

import fs from "node:fs";
import path from "node:path";
import { WASM_DIR, copyTree, installWheels, pythonErrorText, refusedNetworkFetches, startPyodide } from "./pyodide_host.mjs";

const HARNESS_DIR = path.dirname(WASM_DIR);

const [snippetPath, repoRoot] = process.argv.slice(2);
if (!snippetPath) {
  process.stderr.write("usage: node harness/wasm/run_smoke.mjs SNIPPET.py [REPO_ROOT]\n");
  process.exit(2);
}
const code = fs.readFileSync(snippetPath, "utf8");

const t0 = performance.now();
const { pyodide, ms } = await startPyodide();
const wheels = installWheels(pyodide);
copyTree(pyodide, path.join(HARNESS_DIR, "fixtures"), "/harness_root/harness/fixtures");
pyodide.FS.writeFile("/harness_root/harness/__init__.py", fs.readFileSync(path.join(HARNESS_DIR, "__init__.py")));
pyodide.runPython("import sys; sys.path.append('/harness_root')");
if (repoRoot) copyTree(pyodide, path.join(repoRoot, "harness", "conformance"), "/conformance_root/conformance");
process.stderr.write(
  `[smoke] pyodide ${pyodide.version}, ${pyodide.runPython("import sys; sys.version.split()[0]")}; ` +
    `loaded in ${ms.toFixed(0)} ms, ready with ${wheels.length} wheels in ${(performance.now() - t0).toFixed(0)} ms\n`,
);

let status = 0;
try {
  const result = await pyodide.runPythonAsync(code, { filename: path.resolve(snippetPath) });
  if (result !== undefined) {
    process.stdout.write(String(result) + "\n");
    if (result && typeof result.destroy === "function") result.destroy();
  }
} catch (err) {
  process.stderr.write(`[smoke] Python raised:\n${pythonErrorText(err)}\n`);
  status = 1;
}
const refused = refusedNetworkFetches();
if (refused.length) {
  process.stderr.write(`[smoke] refused ${refused.length} network fetch(es): ${refused.join(", ")}\n`);
  status = status || 1;
}
process.exit(status);
