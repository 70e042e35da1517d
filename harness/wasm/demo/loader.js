// bindloop's browser loader: Pyodide and a set of wheels from your own origin, nothing else.
//
//   import { loadBindloop, runPythonFile } from "./loader.js";
//   const { pyodide, timings } = await loadBindloop({ pyodideURL: "/pyodide/", wheelsURL: "/wheels-bytecode/",
//     files: [{ url: "/examples/demos/demo.py", path: "examples/demos/demo.py" }] });
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
// - files: Python files that are not in a wheel ([{ url, path }]), downloaded with the wheels while the
//   runtime boots and written under site-packages at `path` with them (installPythonFiles does the
//   same later, for files a page picks after loading).
// Every step's duration (ms) is in `timings`; `precompiled` says whether bindloop came with bytecode; `onStage(name)` is told when each step starts.
// - onProgress({ loaded, total }): bytes downloaded so far, of the bytes announced (Content-Length)
//   by every download started so far — the runtime's wasm and standard library (~12 MB) and the
//   wheels — told as each chunk arrives, so a page on a slow link can show more than a frozen
//   "loading". While the load runs (and only then) `fetch` is wrapped to count response bodies.

export async function loadBindloop({ pyodideURL, wheelsURL, wheels, files = [], onStage = () => {}, onProgress } = {}) {
  if (!pyodideURL || !wheelsURL) throw new TypeError("loadBindloop needs pyodideURL and wheelsURL");
  if (onProgress === undefined) return load({ pyodideURL, wheelsURL, wheels, files, onStage });
  const original = globalThis.fetch;
  globalThis.fetch = countingFetch(original, onProgress);
  try {
    return await load({ pyodideURL, wheelsURL, wheels, files, onStage });
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

async function load({ pyodideURL, wheelsURL, wheels, files, onStage }) {
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

  // The wheel list, the wheels and the files download while Pyodide boots.
  const listed = wheels !== undefined ? Promise.resolve(wheels)
    : fetchOk(wheelBase + "index.json").then((r) => r.json());
  const bytes = listed.then((names) => {
    if (!Array.isArray(names) || names.length === 0) throw new Error(`no wheels listed under ${wheelBase}`);
    return Promise.all(names.map((n) => fetchOk(wheelBase + n).then((r) => r.arrayBuffer())));
  });
  const sources = fetchTexts(files);
  // Settled later, after the boot: a failed download is not left unhandled meanwhile.
  bytes.catch(() => {});
  sources.catch(() => {});
  const pyodide = await timed("pyodide", async () => {
    const { loadPyodide } = await import(base + "pyodide.mjs");
    return loadPyodide({ indexURL: base });
  });
  const [buffers, texts] = await timed("wheels_download", () => Promise.all([bytes, sources]));
  await timed("wheels_install", async () => {
    const site = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
    buffers.forEach((buf) => pyodide.unpackArchive(new Uint8Array(buf), "wheel", { extractDir: site }));
    writeFiles(pyodide, site, files, texts);
  });
  // Whether the installed bindloop brings its own bytecode (the .pyc or the bytecode wheel set: a
  // cached pyc, or a sourceless module whose origin is its pyc): nothing imported yet.
  const precompiled = pyodide.runPython(
    "import importlib.util as u, os; s = u.find_spec('bindloop'); s.cached is not None and os.path.exists(s.cached)");
  // The modules an agent run needs, not only the package root (which imports its names lazily).
  await timed("import_bindloop", () => pyodide.runPython(
    "import bindloop, bindloop.loop, bindloop.wire, bindloop.routing, bindloop.hosts.transports.js_fetch"));
  return { pyodide, timings, wheels: await listed, precompiled };
}

/** Fetch Python source files and write them under site-packages, each at its `path` (e.g.
 * "examples/demos/demo.py"), so the page's code imports them as modules that are not in a wheel. */
export async function installPythonFiles(pyodide, files) {
  const site = pyodide.runPython("import sysconfig; sysconfig.get_path('purelib')");
  writeFiles(pyodide, site, files, await fetchTexts(files));
}

function fetchTexts(files) {
  return Promise.all(files.map(({ url }) => fetchText(url)));
}

/** A file's text; rejects on an HTTP error status (a page starting a download early: see runPythonFile). */
export async function fetchText(url) {
  return (await fetchOk(url)).text();
}

// Write each file's text under site-packages at its path, then make the import system look again.
function writeFiles(pyodide, site, files, texts) {
  files.forEach(({ path }, i) => {
    const target = `${site}/${path}`;
    pyodide.FS.mkdirTree(target.slice(0, target.lastIndexOf("/")));
    pyodide.FS.writeFile(target, texts[i]);
  });
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
}

/** Fetch a Python file and run it in a fresh namespace (a dict proxy: ns.get("name")). `source`:
 * the file's text (or a promise of it) when the page started the download itself, earlier. */
export async function runPythonFile(pyodide, url, { source: given } = {}) {
  const source = given === undefined ? await fetchText(url) : await given;
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
