#!/usr/bin/env node
// Run the bindloop conformance suite under Pyodide 314 in Node, fully offline.
//
//   node harness/wasm/run_conformance.mjs REPO_ROOT OUT_REPORT_PATH
//
// 1. loads Pyodide from harness/wasm/node_modules/pyodide (network fetches are refused),
// 2. installs every wheel in harness/wasm/wheels/ (bindloop, msgspec wasm wheel, anyio, ...),
// 3. copies REPO_ROOT/harness/conformance/ to /conformance_root/conformance/ in the Pyodide FS,
// 4. awaits conformance.runner.report_for('/conformance_root/conformance/scenarios')
//    (anyio.run()/asyncio.run() cannot be used: Pyodide's loop is already running),
// 5. writes the returned str to OUT_REPORT_PATH as UTF-8, byte for byte.
//
// Exit status: 0 on success, 1 if Python raised (traceback on stderr) or the
// result was not a str, 2 on a usage/setup error. Timings go to stderr.

import fs from "node:fs";
import path from "node:path";
import { copyTree, installWheels, pythonErrorText, refusedNetworkFetches, startPyodide } from "./pyodide_host.mjs";

const FS_ROOT = "/conformance_root";
const RUN = `
import sys
sys.path.insert(0, ${JSON.stringify(FS_ROOT)})
from conformance.runner import report_for
await report_for(${JSON.stringify(FS_ROOT + "/conformance/scenarios")})
`;

function fail(msg, code) {
  process.stderr.write(`[conformance-pyodide] ${msg}\n`);
  process.exit(code);
}

const args = process.argv.slice(2);
if (args.length !== 2) fail("usage: node harness/wasm/run_conformance.mjs REPO_ROOT OUT_REPORT_PATH", 2);
const [repoRoot, outPath] = args;
const confDir = path.join(repoRoot, "harness", "conformance");
if (!fs.existsSync(path.join(confDir, "runner.py"))) fail(`${confDir}/runner.py not found`, 2);

const t0 = performance.now();
const { pyodide, ms: loadMs } = await startPyodide();
const pyVersion = pyodide.runPython("import sys; sys.version.split()[0]");
const wheels = installWheels(pyodide);
const nFiles = copyTree(pyodide, confDir, `${FS_ROOT}/conformance`);
const readyMs = performance.now() - t0;
process.stderr.write(
  `[conformance-pyodide] Pyodide ${pyodide.version}, Python ${pyVersion}; ` +
    `cold start ${loadMs.toFixed(0)} ms (+ ${wheels.length} wheels, ${nFiles} conformance files: ready in ${readyMs.toFixed(0)} ms)\n` +
    `[conformance-pyodide] wheels: ${wheels.join(" ")}\n`,
);

let report;
const t1 = performance.now();
try {
  report = await pyodide.runPythonAsync(RUN, { filename: "<run_conformance>" });
} catch (err) {
  fail(`Python raised while running the conformance suite:\n${pythonErrorText(err)}`, 1);
}
const runMs = performance.now() - t1;

const refused = refusedNetworkFetches();
if (refused.length) fail(`refused ${refused.length} network fetch(es): ${refused.join(", ")}`, 1);

if (typeof report !== "string") {
  const kind = report && typeof report.type === "string" ? report.type : typeof report;
  if (report && typeof report.destroy === "function") report.destroy();
  fail(`report_for() must return str, got ${kind}`, 1);
}

fs.mkdirSync(path.dirname(path.resolve(outPath)), { recursive: true });
fs.writeFileSync(outPath, report, { encoding: "utf8" });
process.stderr.write(
  `[conformance-pyodide] suite ran in ${runMs.toFixed(0)} ms; wrote ${Buffer.byteLength(report, "utf8")} bytes to ${outPath}\n`,
);
