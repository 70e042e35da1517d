// The standard-library bytecode table (harness/wasm/stdlib_bytecode.py, installed by loader.js's
// installStdlibBytecode) under Pyodide 314 in Node, offline:
//   node --test harness/wasm/stdlib_bytecode.test.mjs     (make test-browser runs it)
// A module runs from the table only when the table was built from exactly the runtime's source by
// the runtime's interpreter; otherwise it compiles from the stock source, as without the table.
// The built table (make wasm-stdlib-bytecode) is checked against this runtime too.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { before, test } from "node:test";
import { installStdlibBytecode } from "./demo/loader.js";
import { WASM_DIR, startPyodide } from "./pyodide_host.mjs";

const BUILT = path.join(WASM_DIR, "stdlib-bytecode", "stdlib-bytecode.bin");
const SOURCE = fs.readFileSync(path.join(WASM_DIR, "stdlib_bytecode.py"), "utf8");

let pyodide;
let ns;
before(async () => {
  ({ pyodide } = await startPyodide());
  ns = pyodide.globals.get("dict")();
  ns.set("__name__", "stdlib_bytecode");
  pyodide.runPython(SOURCE, { globals: ns });
  ns.set("installer_source", SOURCE);
});

// A table file for `names`, its entries rewritten by the Python function `edit` (source text
// defining edit(name, pyc, source) -> pyc) when given; as bytes.
function tableFor(names, edit = "def edit(name, pyc, source):\n    return pyc\n") {
  ns.set("names", pyodide.toPy(names));
  pyodide.runPython(edit, { globals: ns });
  const table = pyodide.runPython(`
import importlib.util, marshal
_data = build_table(names, installer_source)
_table = marshal.loads(_data[4:])
for _name, _pyc in _table["modules"].items():
    _spec = importlib.util.find_spec(_name)
    _table["modules"][_name] = edit(_name, _pyc, _spec.loader.get_data(_spec.origin))
_data[:4] + marshal.dumps(_table)
`, { globals: ns });
  try { return table.toJs(); } finally { table.destroy(); }
}

// Where `name` was loaded from, once imported: its loader's class, __file__, and whether MARK is set.
function imported(name) {
  ns.set("target", name);
  const out = pyodide.runPython(`
import importlib, sys
_m = importlib.import_module(target)
[type(_m.__loader__).__name__, _m.__file__, hasattr(_m, "MARK"), _m in sys.modules.values()]
`, { globals: ns });
  try { return out.toJs(); } finally { out.destroy(); }
}

// An entry compiled from another source (the runtime's plus a MARK line): what a table built from
// another standard library holds.
const OTHER_SOURCE = `
import importlib.util, marshal
def edit(name, pyc, source):
    other = source + b"\\nMARK = 1\\n"
    code = compile(other, name, "exec", dont_inherit=True)
    return pyc[:8] + importlib.util.source_hash(other) + marshal.dumps(code)
`;

test("a module in the table runs its precompiled code, with the stock file and source lines", () => {
  const view = installStdlibBytecode(pyodide, tableFor(["ipaddress"]));
  assert.equal(view.installed, true);
  const [loader, file] = imported("ipaddress");
  assert.equal(loader, "_Loader");
  assert.equal(file, "/lib/python314.zip/ipaddress.py");
  assert.deepEqual(view.used(), ["ipaddress"]);
  assert.deepEqual(view.refused(), []);
  // It behaves as the module, and its source lines come from the stock loader (tracebacks, inspect).
  assert.equal(pyodide.runPython("import ipaddress, inspect; (ipaddress.ip_address('127.0.0.1').is_loopback, "
    + "inspect.getsource(ipaddress.ip_address).startswith('def ip_address('))").toJs().join(), "true,true");
});

test("a module whose source differs from the table's compiles from the stock source", () => {
  const view = installStdlibBytecode(pyodide, tableFor(["queue"], OTHER_SOURCE));
  assert.deepEqual(imported("queue"), ["zipimporter", "/lib/python314.zip/queue.py", false, true]);
  assert.deepEqual(view.used(), []);
  assert.deepEqual(view.refused(), ["queue"]);
});

test("an entry with another interpreter's magic number compiles from the stock source", () => {
  const otherMagic = `${OTHER_SOURCE}
_edit = edit
def edit(name, pyc, source):
    pyc = _edit(name, pyc, source)
    return bytes([pyc[0] ^ 1]) + pyc[1:]
`;
  const view = installStdlibBytecode(pyodide, tableFor(["hmac"], otherMagic));
  assert.deepEqual(imported("hmac"), ["zipimporter", "/lib/python314.zip/hmac.py", false, true]);
  assert.deepEqual(view.refused(), ["hmac"]);
});

test("a table file of another interpreter is not installed at all", () => {
  const bytes = tableFor(["uuid"]);
  bytes[0] ^= 1;
  const finders = () => pyodide.runPython("import sys; len(sys.meta_path)");
  const count = finders();
  const view = installStdlibBytecode(pyodide, bytes);
  assert.equal(view.installed, false);
  assert.equal(finders(), count);
  assert.deepEqual(imported("uuid").slice(0, 3), ["zipimporter", "/lib/python314.zip/uuid.py", false]);
});

test("the built table (make wasm-stdlib-bytecode) matches this runtime: every module runs from it", async () => {
  assert.ok(fs.existsSync(BUILT), `${BUILT} missing: run make wasm-stdlib-bytecode`);
  const bytes = new Uint8Array(fs.readFileSync(BUILT));
  const { pyodide: fresh } = await startPyodide();
  const view = installStdlibBytecode(fresh, bytes);
  assert.equal(view.installed, true);
  const scope = fresh.globals.get("dict")();
  scope.set("data", bytes);
  const names = fresh.runPython(`
import importlib, marshal
names = sorted(marshal.loads(data.to_bytes()[4:])["modules"])
for name in names:
    importlib.import_module(name)
names
`, { globals: scope }).toJs();
  scope.destroy();
  assert.ok(names.includes("ipaddress"), names);  // anyio's asyncio backend imports it
  assert.deepEqual(view.refused(), []);
  assert.deepEqual([...view.used()].sort(), names);
});
