// bindloop's browser loader: Pyodide and a set of wheels from your own origin, nothing else.
//
//   import { loadBindloop, runPythonFile } from "./loader.js";
//   const { pyodide, timings } = await loadBindloop({ pyodideURL: "/pyodide/", wheelsURL: "/wheels/" });
//   await installPythonFiles(pyodide, [{ url: "/examples/demos/demo.py", path: "examples/demos/demo.py" }]);
//   const ns = await runPythonFile(pyodide, "/demo/page_agent.py");   // a module-like namespace
//   await ns.get("run_page_agent")(bridge, location.origin);
//
// - pyodideURL: a directory holding the npm `pyodide` package's files (pyodide.mjs, pyodide.asm.mjs,
//   pyodide.asm.wasm, python_stdlib.zip, pyodide-lock.json); it becomes Pyodide's indexURL, so the
//   runtime never reaches for a CDN.
// - wheelsURL + wheels: the wheel files to install (bindloop, msgspec's pyemscripten wasm32 wheel,
//   anyio, idna, typing_extensions); without `wheels` the list is read from `${wheelsURL}index.json`.
//   Each is fetched and unpacked into site-packages with pyodide.unpackArchive: no package is loaded
//   by name, so pyodide-lock.json (which names other msgspec/anyio versions) is never consulted,
//   and micropip is not needed.
// Every step's duration (ms) is in `timings`; `precompiled` says whether bindloop came with bytecode; `onStage(name)` is told when each step starts.
// - onProgress({ loaded, total }): bytes downloaded so far, of the bytes announced (Content-Length)
//   by every download started so far — the runtime's wasm and standard library (~12 MB) and the
//   wheels — told as each chunk arrives, so a page on a slow link can show more than a frozen
//   "loading". While the load runs (and only then) `fetch` is wrapped to count response bodies.

export async function loadBindloop({ pyodideURL, wheelsURL, wheels, onStage = () => {}, onProgress } = {}) {
  if (!pyodideURL || !wheelsURL) throw new TypeError("loadBindloop needs pyodideURL and wheelsURL");
  if (onProgress === undefined) return load({ pyodideURL, wheelsURL, wheels, onStage });
  const original = globalThis.fetch;
  globalThis.fetch = countingFetch(original, onProgress);
  try {
    return await load({ pyodideURL, wheelsURL, wheels, onStage });
  } finally {
    globalThis.fetch = original;
  }
}

// A fetch whose response bodies are counted as they are read; headers and status are kept, so
// WebAssembly.instantiateStreaming still sees application/wasm.
function countingFetch(original, onProgress) {
  const totals = { loaded: 0, total: 0 };
  return async (...args) => {
    const resp = await original(...args);
    if (!resp.body) return resp;
    totals.total += Number(resp.headers.get("content-length")) || 0;
    onProgress({ ...totals });
    const counter = new TransformStream({
      transform(chunk, controller) {
        totals.loaded += chunk.byteLength;
        onProgress({ ...totals });
        controller.enqueue(chunk);
      },
    });
    return new Response(resp.body.pipeThrough(counter),
      { status: resp.status, statusText: resp.statusText, headers: resp.headers });
  };
}

async function load({ pyodideURL, wheelsURL, wheels, onStage }) {
  const dir = (url) => new URL(url.endsWith("/") ? url : url + "/", document.baseURI).href;
  const base = dir(pyodideURL);
  const wheelBase = dir(wheelsURL);
  const timings = {};
  const timed = async (name, step) => {
    onStage(name);
    const t0 = performance.now();
    const value = await step();
    timings[name] = performance.now() - t0;
    return value;
  };

  const names = wheels ?? (await timed("wheel_list", () => fetchOk(wheelBase + "index.json").then((r) => r.json())));
  if (!Array.isArray(names) || names.length === 0) throw new Error(`no wheels listed under ${wheelBase}`);
  // Wheels download while Pyodide boots.
  const bytes = Promise.all(names.map((n) => fetchOk(wheelBase + n).then((r) => r.arrayBuffer())));
  const pyodide = await timed("pyodide", async () => {
    const { loadPyodide } = await import(base + "pyodide.mjs");
    return loadPyodide({ indexURL: base });
  });
  const buffers = await timed("wheels_download", () => bytes);
  await timed("wheels_install", async () => {
    const site = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
    buffers.forEach((buf) => pyodide.unpackArchive(new Uint8Array(buf), "wheel", { extractDir: site }));
    pyodide.runPython("import importlib; importlib.invalidate_caches()");
  });
  // Whether the installed bindloop brings its own bytecode (the .pyc wheel set): nothing imported yet.
  const precompiled = pyodide.runPython(
    "import importlib.util as u, os; s = u.find_spec('bindloop'); os.path.exists(u.cache_from_source(s.origin))");
  // The modules an agent run needs, not only the package root (which imports its names lazily).
  await timed("import_bindloop", () => pyodide.runPython(
    "import bindloop, bindloop.loop, bindloop.wire, bindloop.routing, bindloop.hosts.transports.js_fetch"));
  return { pyodide, timings, wheels: names, precompiled };
}

/** Fetch Python source files and write them under site-packages, each at its `path` (e.g.
 * "examples/demos/demo.py"), so the page's code imports them as modules that are not in a wheel. */
export async function installPythonFiles(pyodide, files) {
  const site = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
  const sources = await Promise.all(files.map(({ url }) => fetchOk(url).then((r) => r.text())));
  files.forEach(({ path }, i) => {
    const target = `${site}/${path}`;
    pyodide.FS.mkdirTree(target.slice(0, target.lastIndexOf("/")));
    pyodide.FS.writeFile(target, sources[i]);
  });
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
}

/** Fetch a Python file and run it in a fresh namespace (a dict proxy: ns.get("name")). */
export async function runPythonFile(pyodide, url) {
  const source = await (await fetchOk(url)).text();
  const ns = pyodide.globals.get("dict")();
  ns.set("__name__", new URL(url, document.baseURI).pathname.split("/").pop().replace(/\.py$/, ""));
  await pyodide.runPythonAsync(source, { globals: ns, filename: new URL(url, document.baseURI).pathname });
  return ns;
}

async function fetchOk(url) {
  const resp = await fetch(url);
  if (!resp.ok) throw new Error(`GET ${url}: HTTP ${resp.status}`);
  return resp;
}
