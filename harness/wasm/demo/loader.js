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
// - stdlibBytecodeURL (optional): the standard-library bytecode table (`make wasm-stdlib-bytecode` →
//   harness/wasm/stdlib-bytecode/stdlib-bytecode.bin), downloaded while the runtime boots and installed
//   right after it, before anything else is imported: the standard-library modules the page imports
//   then run precompiled instead of compiling from source (harness/wasm/stdlib_bytecode.py). The
//   runtime's own files stay as npm ships them; a table from another interpreter (magic number) or
//   another standard library (source hashes) is not used, and the modules compile from source.
// Every step's duration (ms) is in `timings`; `stdlibBytecode` is installStdlibBytecode's answer (or null); `precompiled` says whether bindloop came with bytecode; `onStage(name)` is told when each step starts.
// - onProgress({ loaded, total }): bytes downloaded so far, of the bytes announced (Content-Length)
//   by every download started so far — the runtime's wasm and standard library (~12 MB) and the
//   wheels — told as each chunk arrives, so a page on a slow link can show more than a frozen
//   "loading". While the load runs (and only then) `fetch` is wrapped to count response bodies.

export async function loadBindloop({ pyodideURL, wheelsURL, wheels, files = [], stdlibBytecodeURL, onStage = () => {}, onProgress } = {}) {
  if (!pyodideURL || !wheelsURL) throw new TypeError("loadBindloop needs pyodideURL and wheelsURL");
  const options = { pyodideURL, wheelsURL, wheels, files, stdlibBytecodeURL, onStage };
  if (onProgress === undefined) return load(options);
  const original = globalThis.fetch;
  globalThis.fetch = countingFetch(original, onProgress);
  try {
    return await load(options);
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

async function load({ pyodideURL, wheelsURL, wheels, files, stdlibBytecodeURL, onStage }) {
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
  const table = stdlibBytecodeURL === undefined ? Promise.resolve(null)
    : fetchOk(stdlibBytecodeURL).then((r) => r.arrayBuffer());
  // Settled later, after the boot: a failed download is not left unhandled meanwhile.
  for (const pending of [bytes, sources, table]) pending.catch(() => {});
  const pyodide = await timed("pyodide", async () => {
    const { loadPyodide } = await import(base + "pyodide.mjs");
    return loadPyodide({ indexURL: base });
  });
  const [buffers, texts, tableBytes] = await timed("wheels_download", () => Promise.all([bytes, sources, table]));
  const stdlibBytecode = tableBytes === null ? null
    : await timed("stdlib_bytecode", async () => installStdlibBytecode(pyodide, new Uint8Array(tableBytes)));
  await timed("wheels_install", async () => installPage(pyodide, buffers, files, texts));
  // Whether the installed bindloop brings its own bytecode (the .pyc or the bytecode wheel set: a
  // cached pyc, or a sourceless module whose origin is its pyc): nothing imported yet.
  const precompiled = pyodide.runPython(
    "import importlib.util as u, os; s = u.find_spec('bindloop'); s.cached is not None and os.path.exists(s.cached)");
  // The modules an agent run needs, not only the package root (which imports its names lazily).
  await timed("import_bindloop", () => pyodide.runPython(
    "import bindloop, bindloop.loop, bindloop.wire, bindloop.routing, bindloop.hosts.transports.js_fetch"));
  return { pyodide, timings, wheels: await listed, precompiled, stdlibBytecode };
}

/** Unpack the wheels (their bytes) into site-packages and write the page's Python files there
 * (`files[i].path` holding `texts[i]`), then make the import system look again: the install step
 * of the page, which the Node tools that stand in for it (the stdlib table's builder, the startup
 * bench) call as well. */
export function installPage(pyodide, buffers, files, texts) {
  const site = sitePackages(pyodide);
  buffers.forEach((buf) => pyodide.unpackArchive(new Uint8Array(buf), "wheel", { extractDir: site }));
  writeFiles(pyodide, site, files, texts);
}

/** The runtime's site-packages directory. (`sysconfig.get_path("purelib")` says the same but
 * imports sysconfig and its data module: about 20 ms of compiling under Pyodide.) */
export function sitePackages(pyodide) {
  return pyodide.runPython("import site; site.getsitepackages()[0]");
}

/**
 * Install the standard-library bytecode table (the bytes of harness/wasm/stdlib-bytecode/stdlib-bytecode.bin,
 * built by harness/wasm/stdlib_bytecode.py): when the file starts with this interpreter's magic
 * number, its installer puts the table's finder first on sys.meta_path. Returns
 * `{ installed, used(), refused() }`: whether it did (not when the file is another interpreter's),
 * and, so far, the names of the modules run from the table and of those that fell back to
 * compiling their source (a source that differs from the one the table was built from).
 */
export function installStdlibBytecode(pyodide, bytes) {
  const ns = pyodide.globals.get("dict")();
  try {
    ns.set("data", bytes);
    pyodide.runPython(`
import importlib.util, marshal
data = data.to_bytes()
if data[:4] == importlib.util.MAGIC_NUMBER:
    table = marshal.loads(memoryview(data)[4:])
    installer = {"__name__": "stdlib_bytecode"}
    exec(table["install"], installer)
    finder = installer["install"](table["modules"])
else:
    finder = None
del data
`, { globals: ns });
    const finder = ns.get("finder");
    if (finder === undefined || finder === null) return { installed: false, used: () => [], refused: () => [] };
    const names = (attr) => {
      const list = finder[attr];
      try { return list.toJs(); } finally { list.destroy(); }
    };
    return { installed: true, used: () => names("used"), refused: () => names("refused") };
  } finally {
    ns.destroy();
  }
}

/** Fetch Python source files and write them under site-packages, each at its `path` (e.g.
 * "examples/demos/demo.py"), so the page's code imports them as modules that are not in a wheel. */
export async function installPythonFiles(pyodide, files) {
  writeFiles(pyodide, sitePackages(pyodide), files, await fetchTexts(files));
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
  invalidateFinders(pyodide, site);
}

/** Make the import system see files written under `dir`: the cached path finders of `dir` and its
 * subdirectories forget their listings. (`importlib.invalidate_caches()` does this for every path
 * finder, but also imports importlib.metadata, about 30 ms of compiling under Pyodide, and makes
 * the standard library's zip importers read the zip's directory again.) */
export function invalidateFinders(pyodide, dir) {
  const ns = pyodide.globals.get("dict")();
  try {
    ns.set("root", dir);
    pyodide.runPython(`
import sys
for path, finder in list(sys.path_importer_cache.items()):
    if finder is not None and (path == root or path.startswith(root + "/")):
        finder.invalidate_caches()
`, { globals: ns });
  } finally {
    ns.destroy();
  }
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
