#!/usr/bin/env node
// Run a Python snippet under Pyodide in Node and then let Node exit by itself (no process.exit on
// success), printing the snippet's result and the time it finished (performance.now(), ms) so the
// caller can measure how long the event loop stayed alive after the Python work ended.
//
//   node tests/run/run_pyodide_exit.mjs SNIPPET.py

import fs from "node:fs";
import path from "node:path";
import { installWheels, pythonErrorText, startPyodide } from "../../harness/wasm/pyodide_host.mjs";

const [snippetPath] = process.argv.slice(2);
const code = fs.readFileSync(snippetPath, "utf8");
const { pyodide } = await startPyodide();
installWheels(pyodide);
try {
  const result = await pyodide.runPythonAsync(code, { filename: path.resolve(snippetPath) });
  process.stdout.write(JSON.stringify({ result: String(result), done_at_ms: performance.now() }) + "\n");
} catch (err) {
  process.stderr.write(`Python raised:\n${pythonErrorText(err)}\n`);
  process.exit(1);
}
process.on("exit", () => process.stdout.write(JSON.stringify({ exit_at_ms: performance.now() }) + "\n"));
