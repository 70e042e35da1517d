#!/usr/bin/env node
// Run tests/mcp/mcp_server_core_snippet.py under Pyodide 314 in Node, offline, with bindloop
// from this working tree (src/bindloop copied over the wheel's) and the other wheels of
// harness/wasm/wheels/. Prints the snippet's last expression on stdout.
//
//   node tests/mcp/run_pyodide_server.mjs SNIPPET.py

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { copyTree, installWheels, pythonErrorText, refusedNetworkFetches, startPyodide } from "../../harness/wasm/pyodide_host.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const [snippetPath] = process.argv.slice(2);
const { pyodide } = await startPyodide();
installWheels(pyodide);
const site = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
pyodide.runPython(`import shutil; shutil.rmtree(${JSON.stringify(site + "/bindloop")}, ignore_errors=True)`);
copyTree(pyodide, path.join(ROOT, "src", "bindloop"), `${site}/bindloop`);
pyodide.runPython("import importlib; importlib.invalidate_caches()");
let status = 0;
try {
  const code = fs.readFileSync(snippetPath, "utf8");
  const result = await pyodide.runPythonAsync(code, { filename: path.resolve(snippetPath) });
  if (result !== undefined) process.stdout.write(String(result) + "\n");
} catch (err) {
  process.stderr.write(`[mcp-server] Python raised:\n${pythonErrorText(err)}\n`);
  status = 1;
}
if (refusedNetworkFetches().length) status = status || 1;
process.exit(status);
