// Shared Node-side helpers for the offline Pyodide runners in harness/wasm/.
//
// - loads Pyodide from harness/wasm/node_modules/pyodide (never the CDN),
// - refuses any network fetch (http:, https:, ws:, ...) so an accidental CDN
//   access fails loudly instead of hanging or silently succeeding elsewhere,
// - installs every wheel in harness/wasm/wheels/ (or $BINDLOOP_WHEELS_DIR) with pyodide.unpackArchive (no
//   dependency resolution against pyodide-lock.json, hence no CDN look-ups),
// - copies a host directory tree into the Pyodide file system.

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const WASM_DIR = path.dirname(fileURLToPath(import.meta.url));
export const PYODIDE_DIR = path.join(WASM_DIR, "node_modules", "pyodide");
// BINDLOOP_WHEELS_DIR picks another wheel set (e.g. harness/wasm/wheels-pyc, the .pyc variant).
export const WHEELS_DIR = process.env.BINDLOOP_WHEELS_DIR
  ? path.resolve(process.env.BINDLOOP_WHEELS_DIR)
  : path.join(WASM_DIR, "wheels");

const refusedFetches = [];

/** Replace globalThis.fetch by a guard that only allows file: URLs and plain paths. */
export function installNetworkGuard() {
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input?.url ?? String(input);
    if (/^[a-z][a-z0-9+.-]*:/i.test(url) && !/^file:/i.test(url)) {
      refusedFetches.push(url);
      throw new Error(`offline runner: refused network fetch of ${url}`);
    }
    return realFetch(input, init);
  };
}

export function refusedNetworkFetches() {
  return [...refusedFetches];
}

function die(msg) {
  process.stderr.write(`error: ${msg}\n`);
  process.exit(2);
}

/** Load Pyodide from the local npm package; returns {pyodide, ms}. */
export async function startPyodide() {
  const entry = path.join(PYODIDE_DIR, "pyodide.mjs");
  if (!fs.existsSync(entry)) {
    die(`${entry} not found: run \`cd wasm && npm ci\` (or \`make harness/wasm/node_modules/.package-lock.json\`)`);
  }
  installNetworkGuard();
  const t0 = performance.now();
  const { loadPyodide } = await import(entry);
  const pyodide = await loadPyodide({
    indexURL: PYODIDE_DIR + path.sep,
    // Where Pyodide would cache lock-file packages in Node; we never load any
    // by name, but keep it inside node_modules rather than anywhere else.
    packageCacheDir: PYODIDE_DIR + path.sep,
    stdout: (line) => process.stdout.write(line + "\n"),
    stderr: (line) => process.stderr.write(line + "\n"),
  });
  return { pyodide, ms: performance.now() - t0 };
}

/** unpackArchive every wheel in harness/wasm/wheels/ into site-packages; returns the file names. */
export function installWheels(pyodide, wheelsDir = WHEELS_DIR) {
  if (!fs.existsSync(wheelsDir)) {
    die(`${wheelsDir} not found: run \`.venv/bin/python harness/wasm/fetch_wheels.py\` (or \`make wasm-wheels\`)`);
  }
  const wheels = fs.readdirSync(wheelsDir).filter((f) => f.endsWith(".whl")).sort();
  if (wheels.length === 0) die(`no wheels in ${wheelsDir}: run \`make wasm-wheels\``);
  // unpackArchive extracts into the *working directory* unless told otherwise;
  // install into site-packages like a real installer would.
  const sitePackages = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
  for (const name of wheels) {
    const bytes = fs.readFileSync(path.join(wheelsDir, name));
    pyodide.unpackArchive(new Uint8Array(bytes), "wheel", { extractDir: sitePackages });
  }
  // Wheels were unpacked after start-up: make the import system notice them.
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
  return wheels;
}

/** Recursively copy hostDir into the Pyodide FS at fsDir (skips __pycache__). */
export function copyTree(pyodide, hostDir, fsDir) {
  const FS = pyodide.FS;
  let count = 0;
  const walk = (src, dst) => {
    FS.mkdirTree(dst);
    for (const ent of fs.readdirSync(src, { withFileTypes: true })) {
      if (ent.name === "__pycache__") continue;
      const s = path.join(src, ent.name);
      const d = `${dst}/${ent.name}`;
      const st = fs.statSync(s); // follows symlinks
      if (st.isDirectory()) walk(s, d);
      else if (st.isFile()) {
        FS.writeFile(d, fs.readFileSync(s));
        count += 1;
      }
    }
  };
  walk(hostDir, fsDir);
  return count;
}

/** Text of a Python exception raised through runPython(Async), traceback included. */
export function pythonErrorText(err) {
  if (err && err.constructor && err.constructor.name === "PythonError") return err.message;
  return err && err.stack ? err.stack : String(err);
}
