#!/usr/bin/env node
// Build a compiled wheel set: every wheel in SRC_DIR with its modules compiled by Pyodide's own
// CPython 3.14 (inside Pyodide, in Node, offline), written to OUT_DIR.
//
//   node harness/wasm/build_pyc_wheels.mjs harness/wasm/wheels harness/wasm/wheels-pyc
//   node harness/wasm/build_pyc_wheels.mjs --bytecode-only harness/wasm/wheels harness/wasm/wheels-bytecode
//
// The first keeps each module's source beside its bytecode (the .pyc set); --bytecode-only replaces
// the source by the bytecode (the bytecode set, the browser page's default; pyc_wheel.py says which
// modules keep their source).
// The compiling is harness/wasm/pyc_wheel.py's; this file only moves bytes in and out. OUT_DIR is emptied
// of wheels first, so it holds exactly the compiled counterparts of SRC_DIR's wheels.

import fs from "node:fs";
import path from "node:path";
import { WASM_DIR, pythonErrorText, startPyodide } from "./pyodide_host.mjs";

const args = process.argv.slice(2);
const bytecodeOnly = args[0] === "--bytecode-only";
const [srcDir, outDir] = bytecodeOnly ? args.slice(1) : args;
if (!srcDir || !outDir) {
  process.stderr.write("usage: node harness/wasm/build_pyc_wheels.mjs [--bytecode-only] SRC_DIR OUT_DIR\n");
  process.exit(2);
}
const wheels = fs.existsSync(srcDir) ? fs.readdirSync(srcDir).filter((f) => f.endsWith(".whl")).sort() : [];
if (wheels.length === 0) {
  process.stderr.write(`error: no wheels in ${srcDir}: run \`make wasm-wheels\`\n`);
  process.exit(2);
}

const { pyodide } = await startPyodide();
const ns = pyodide.globals.get("dict")();
ns.set("__name__", "pyc_wheel");
pyodide.runPython(fs.readFileSync(path.join(WASM_DIR, "pyc_wheel.py"), "utf8"), { globals: ns });
const compileWheel = ns.get("compile_wheel");

fs.mkdirSync(outDir, { recursive: true });
for (const old of fs.readdirSync(outDir).filter((f) => f.endsWith(".whl"))) fs.rmSync(path.join(outDir, old));
let status = 0;
for (const name of wheels) {
  const input = fs.readFileSync(path.join(srcDir, name));
  try {
    const result = compileWheel(name, new Uint8Array(input), bytecodeOnly);
    const [outName, bytes, count] = result.toJs();
    result.destroy();
    fs.writeFileSync(path.join(outDir, outName), bytes);
    process.stderr.write(`[pyc] ${name} -> ${outName}: ${count} modules compiled, ` +
      `${(input.length / 1024).toFixed(0)} KiB -> ${(bytes.length / 1024).toFixed(0)} KiB\n`);
  } catch (err) {
    process.stderr.write(`[pyc] ${name}: ${pythonErrorText(err)}\n`);
    status = 1;
  }
}
process.exit(status);
