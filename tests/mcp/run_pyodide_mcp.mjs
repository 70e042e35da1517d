#!/usr/bin/env node
// Run an MCP snippet under Pyodide 314 in Node against a live MCP server on 127.0.0.1.
//
//   node tests/mcp/run_pyodide_mcp.mjs SNIPPET.py MCP_URL
//
// Like harness/wasm/run_smoke.mjs (offline, every wheel in harness/wasm/wheels/ installed), except that the
// snippet gets one network path: `from mcp_host import fetch, url` is the real fetch, restricted
// to http://127.0.0.1, for bindloop.hosts.transports.js_fetch.FetchTransport. Everything else stays refused.
// The value of the snippet's last expression is printed on stdout.

import fs from "node:fs";
import path from "node:path";
import { installWheels, pythonErrorText, refusedNetworkFetches, startPyodide } from "../../harness/wasm/pyodide_host.mjs";

const [snippetPath, url] = process.argv.slice(2);
if (!snippetPath || !url || !url.startsWith("http://127.0.0.1:")) {
  process.stderr.write("usage: node tests/mcp/run_pyodide_mcp.mjs SNIPPET.py http://127.0.0.1:PORT/mcp\n");
  process.exit(2);
}
const realFetch = globalThis.fetch; // taken before startPyodide() installs the offline guard
const { pyodide, ms } = await startPyodide();
const wheels = installWheels(pyodide);
process.stderr.write(`[mcp] pyodide ${pyodide.version} loaded in ${ms.toFixed(0)} ms with ${wheels.length} wheels\n`);

function loopbackFetch(input, init) {
  const target = typeof input === "string" ? input : input.url;
  if (!target.startsWith("http://127.0.0.1:")) {
    return Promise.reject(new Error(`mcp runner: only loopback fetches are allowed, not ${target}`));
  }
  return realFetch(input, init);
}

pyodide.registerJsModule("mcp_host", { fetch: loopbackFetch, url });
let status = 0;
try {
  const code = fs.readFileSync(snippetPath, "utf8");
  const result = await pyodide.runPythonAsync(code, { filename: path.resolve(snippetPath) });
  if (result !== undefined) process.stdout.write(String(result) + "\n");
} catch (err) {
  process.stderr.write(`[mcp] Python raised:\n${pythonErrorText(err)}\n`);
  status = 1;
}
const refused = refusedNetworkFetches();
if (refused.length) {
  process.stderr.write(`[mcp] refused ${refused.length} network fetch(es): ${refused.join(", ")}\n`);
  status = status || 1;
}
process.exit(status);
