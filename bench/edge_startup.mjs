#!/usr/bin/env node
// Cold start of bindloop under Pyodide 314, the plain wheels vs the .pyc wheels vs the bytecode wheels,
// in Node and Chromium.
//
//   node bench/edge_startup.mjs [--runs N] [--only node|chromium] [--stdlib source]     (make bench-edge)
//
// Every run is cold: Node runs each in a fresh process, Chromium each in a fresh browser context
// (empty cache). Variants alternate run by run, in a rotated order each round (a run right after
// another context closed boots slower), so machine load and order hit all alike. A run measures
//   pyodide      loadPyodide() (the runtime itself; the same for every variant)
//   stdlib       installing the standard-library bytecode table (harness/wasm/stdlib-bytecode, the
//                page's default; --stdlib source runs without it: the modules compile from source)
//   install      fetch/read + unpackArchive of the 5 wheels (and, in Chromium, writing the page's
//                own Python files, downloaded during the boot)
//   import       `import bindloop` and the modules an agent run needs: bindloop.agent,
//                bindloop.loop, bindloop.wire (a wire adapter), bindloop.routing, bindloop.hosts.transports.js_fetch
//   run          the demo agent (harness/wasm/demo/page_agent.py, the agent API): 3 turns over streaming fetch with a 503
//                fallback and a mid-stream drop, against serve.py on 127.0.0.1 (no chunk delay); "run start→1st
//                token" is its part up to the first streamed text (turn 1: a 503, then the backup)
//   first token  from process start (Node) / navigation start (Chromium) to the first streamed text,
//                and from "Pyodide ready" to it (what the wheel set can change: the runtime's boot
//                is the same for all and, on a loaded machine, the noisiest step)
//   ratio        first token over "Pyodide ready" (a bare Pyodide load: process start or navigation
//                to a runtime that can run Python), per run, then the median (issue 31: <= 1.15)
// and prints medians side by side with the bytecode/plain ratio, and (Node) the standard-library
// modules imported from source between the boot and the first token. Needs make wasm-node wasm-wheels
// wasm-wheels-pyc wasm-wheels-bytecode wasm-stdlib-bytecode (and Debian chromium for the Chromium half).

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.dirname(HERE);
const WASM = path.join(REPO, "harness", "wasm");
const VARIANTS = { plain: path.join(WASM, "wheels"), pyc: path.join(WASM, "wheels-pyc"),
  bytecode: path.join(WASM, "wheels-bytecode") };
const NAMES = Object.keys(VARIANTS);
const DEMO_MODULES = ["examples/__init__.py", "examples/demos/__init__.py", "examples/demos/demo.py"];
const IMPORTS = "import bindloop, bindloop.agent, bindloop.loop, bindloop.wire, bindloop.routing, bindloop.hosts.transports.js_fetch";
const STDLIB_TABLE = path.join(WASM, "stdlib-bytecode", "stdlib-bytecode.bin");
const { installPage, installStdlibBytecode } = await import("../harness/wasm/demo/loader.js");

const args = process.argv.slice(2);
if (args[0] === "--child") await child(args[1], args[2], args[3] === "table");
else await parent();

// One cold Node run: prints a JSON line of timings (ms).
async function child(wheelsDir, origin, withTable) {
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    if (!url.startsWith(origin + "/") && !url.startsWith("file:")) throw new Error(`refused fetch of ${url}`);
    return realFetch(input, init);
  };
  const t = {};
  let t0 = performance.now();
  const { loadPyodide } = await import(path.join(WASM, "node_modules", "pyodide", "pyodide.mjs"));
  const pyodide = await loadPyodide({ indexURL: path.join(WASM, "node_modules", "pyodide") + path.sep });
  t.pyodide = performance.now() - t0;
  t.ready = performance.now();
  pyodide.runPython("import sys; _booted = set(sys.modules)");
  t0 = performance.now();
  const table = withTable ? installStdlibBytecode(pyodide, new Uint8Array(fs.readFileSync(STDLIB_TABLE))) : null;
  t.stdlib = performance.now() - t0;
  t0 = performance.now();
  // The wheels and the demo's own modules (examples/demos/demo.py: its tools and prompt), as the
  // page installs them.
  installPage(pyodide,
    fs.readdirSync(wheelsDir).filter((f) => f.endsWith(".whl")).sort().map((name) => fs.readFileSync(path.join(wheelsDir, name))),
    DEMO_MODULES.map((rel) => ({ path: rel })),
    DEMO_MODULES.map((rel) => fs.readFileSync(path.join(REPO, rel), "utf8")));
  t.install = performance.now() - t0;
  t.precompiled = pyodide.runPython(
    "import importlib.util as u, os; s = u.find_spec('bindloop'); s.cached is not None and os.path.exists(s.cached)");
  t0 = performance.now();
  pyodide.runPython(IMPORTS);
  t.import = performance.now() - t0;
  const ns = pyodide.globals.get("dict")();
  ns.set("__name__", "agent");
  pyodide.runPython(fs.readFileSync(path.join(WASM, "demo", "page_agent.py"), "utf8"), { globals: ns });
  let done = null;
  const bridge = {
    turn_event(json) {
      if (t.first_token !== undefined || JSON.parse(json).kind !== "text") return;
      t.first_token = performance.now();
      // The standard-library modules imported since the boot that did not run from the table.
      const used = table === null ? [] : table.used();
      const ns = pyodide.globals.get("dict")();
      ns.set("used", used);
      t.stdlib_source = pyodide.runPython(`
import sys, __main__
stdlib = next(p for p in sys.path if p.endswith(".zip"))
sorted(n for n, m in list(sys.modules.items()) if n not in __main__._booted and n not in used
       and str(getattr(getattr(m, "__spec__", None), "origin", None)).startswith(stdlib + "/"))
`, { globals: ns }).toJs();
      t.stdlib_table = used.length;
      ns.destroy();
    },
    route() {}, agent_event() {}, tool_result() {},
    done(json) { done = JSON.parse(json); },
  };
  t0 = performance.now();
  const stop = await ns.get("run_page_agent")(bridge, origin);
  t.run = performance.now() - t0;
  t.run_first_token = t.first_token - t0;
  t.after_boot = t.first_token - t.ready;
  t.ratio = t.first_token / t.ready;
  if (stop !== "done" || !done) throw new Error(`agent ended ${stop}`);
  process.stdout.write(JSON.stringify(t) + "\n");
  process.exit(0);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function table(title, rows, keys, runs) {
  console.log(`\n${title} — median of ${runs} cold runs per variant (ms)`);
  console.log(`  ${"".padEnd(30)}${NAMES.map((n) => n.padStart(10)).join("")}${"bytecode/plain".padStart(16)}`);
  for (const [key, label] of keys) {
    const m = NAMES.map((n) => median(rows[n].map((r) => r[key])));
    const digits = key === "ratio" ? 2 : 0;
    console.log(`  ${label.padEnd(30)}${m.map((x) => x.toFixed(digits).padStart(10)).join("")}` +
      `${(m[NAMES.indexOf("bytecode")] / m[NAMES.indexOf("plain")]).toFixed(2).padStart(16)}`);
  }
}

// Round i runs the variants rotated by i: each variant comes first, second, ... equally often.
function roundOrder(i) {
  return NAMES.map((_, k) => NAMES[(k + i) % NAMES.length]);
}

function wheelSizes() {
  console.log("\nwheel set size (KiB, as installed from)");
  for (const [name, dir] of Object.entries(VARIANTS)) {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith(".whl"));
    const total = files.reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
    const bl = files.find((f) => f.startsWith("bindloop-"));
    console.log(`  ${name.padEnd(6)} ${(total / 1024).toFixed(0).padStart(6)} total, bindloop ${(fs.statSync(path.join(dir, bl)).size / 1024).toFixed(0)}`);
  }
}

async function parent() {
  const runs = Number(args[args.indexOf("--runs") + 1] || 0) || 5;
  const only = args.includes("--only") ? args[args.indexOf("--only") + 1] : null;
  const withTable = !(args.includes("--stdlib") && args[args.indexOf("--stdlib") + 1] === "source");
  if (withTable && !fs.existsSync(STDLIB_TABLE)) throw new Error(`${STDLIB_TABLE} missing: run make wasm-stdlib-bytecode`);
  console.log(`standard library: ${withTable ? "the bytecode table (" + STDLIB_TABLE + ")" : "compiled from source (--stdlib source)"}`);
  for (const [name, dir] of Object.entries(VARIANTS)) {
    if (!fs.existsSync(dir)) throw new Error(`${dir} missing (${name}): run make wasm-wheels wasm-wheels-pyc wasm-wheels-bytecode`);
  }
  const { startDemoServer, launchChromium, openPage, runDemo } = await import("../harness/wasm/browser_harness.mjs");
  const server = await startDemoServer(["--delay-ms", "0"]);
  try {
    wheelSizes();
    if (only !== "chromium") {
      const rows = Object.fromEntries(NAMES.map((n) => [n, []]));
      for (let i = 0; i < runs; i++) {
        for (const name of roundOrder(i)) {
          const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", VARIANTS[name], server.origin,
            withTable ? "table" : "source"],
            { encoding: "utf8", timeout: 180_000 });
          if (out.status !== 0) throw new Error(`node run (${name}) failed:\n${out.stderr}`);
          const r = JSON.parse(out.stdout.trim().split("\n").pop());
          if (r.precompiled !== (name !== "plain")) throw new Error(`${name}: precompiled=${r.precompiled}`);
          rows[name].push(r);
        }
      }
      table("Node " + process.version + ", Pyodide 314.0.7", rows, [["pyodide", "loadPyodide"], ["stdlib", "stdlib bytecode table"],
        ["install", "install 5 wheels"],
        ["import", "import (bindloop+agent+wire)"], ["run_first_token", "run start→1st token"], ["run", "agent run (3 turns)"],
        ["first_token", "process start→1st token"],
        ["after_boot", "Pyodide ready→1st token"], ["ready", "process start→Pyodide ready"],
        ["ratio", "1st token / Pyodide ready"]], runs);
      const last = rows.bytecode.at(-1);
      console.log(`  stdlib modules from the table before the 1st token: ${last.stdlib_table}; compiled from source: ` +
        `${last.stdlib_source.length}${last.stdlib_source.length ? " (" + last.stdlib_source.join(", ") + ")" : ""}`);
    }
    if (only !== "node") {
      const browser = await launchChromium();
      try {
        const rows = Object.fromEntries(NAMES.map((n) => [n, []]));
        for (let i = 0; i < runs; i++) {
          for (const name of roundOrder(i)) {
            const { context, page, refused } = await openPage(browser, server.origin);
            const d = await runDemo(page, `${server.url}?wheels=${name}${withTable ? "" : "&stdlib=source"}`);
            await context.close();
            if (refused.length) throw new Error(`refused: ${refused}`);
            if (d.precompiled !== (name !== "plain")) throw new Error(`${name}: precompiled=${d.precompiled}`);
            if (withTable && !(d.stdlib?.installed && d.stdlib.refused.length === 0)) throw new Error(`${name}: stdlib table ${JSON.stringify(d.stdlib)}`);
            rows[name].push({ pyodide: d.steps.pyodide, stdlib: d.steps.stdlib_bytecode ?? 0, install: d.steps.wheels_install, import: d.steps.import_bindloop,
              agent: d.timings.agent_imported - d.timings.bindloop_imported, first_token: d.timings.first_token,
              run: d.timings.done - d.timings.agent_imported, run_first_token: d.timings.first_token - d.timings.agent_imported,
              after_boot: d.timings.first_token - d.timings.pyodide_ready, ready: d.timings.pyodide_ready,
              ratio: d.timings.first_token / d.timings.pyodide_ready });
          }
        }
        table(`Chromium ${browser.version()} (headless)`, rows, [["pyodide", "loadPyodide"], ["stdlib", "stdlib bytecode table"],
          ["install", "install 5 wheels"],
          ["import", "import (bindloop+agent+wire)"], ["agent", "page_agent.py import"], ["run_first_token", "run start→1st token"],
          ["run", "agent run (3 turns)"],
          ["first_token", "navigation→1st token"], ["after_boot", "Pyodide ready→1st token"],
          ["ready", "navigation→Pyodide ready"], ["ratio", "1st token / Pyodide ready"]], runs);
      } finally {
        await browser.close();
      }
    }
  } finally {
    await server.stop();
  }
}
