// The demo page: load bindloop into Pyodide, run harness/wasm/demo/page_agent.py (an agent of the agent API),
// render what its bridge reports. State for tests and benchmarks is on window.bindloopDemo
// ({ done, timings, events (turn text stream), agentEvents (agent stream), structuredEvents and report
// (the report agent's structured_data events and answer), wheels, stdlib (the standard-library
// modules run from the table, set with result), result, progress (download
// samples while the runtime loads), statusLog (every status line shown), failures (the one-line
// error of each failed run) }).
//
// ?providers=down sends the model calls under /down/, where serve.py's providers fail the first
// two calls: the run fails with every provider down, the page shows one line and a retry button,
// and the retry (the runtime already loaded) runs through.
import { megabytes, readableError } from "./errors.js";
import { fetchText, loadBindloop, runPythonFile } from "./loader.js";

const DEMO_MODULES = ["examples/__init__.py", "examples/demos/__init__.py", "examples/demos/demo.py"];
import { TurnStreamReducer } from "./turn-stream.js";

const params = new URLSearchParams(location.search);
// The bytecode wheel set is the default (it starts fastest: docs/browser.md); ?wheels=pyc or
// ?wheels=plain for the others.
const WHEEL_SETS = { bytecode: "wheels-bytecode", pyc: "wheels-pyc", plain: "wheels" };
const variant = WHEEL_SETS[params.get("wheels")] ?? WHEEL_SETS.bytecode;
// The standard-library modules the page imports run from their precompiled table (docs/browser.md);
// ?stdlib=source compiles them from the runtime's source instead, as without the table.
const stdlibBytecodeURL = params.get("stdlib") === "source" ? undefined : "/stdlib-bytecode/stdlib-bytecode.bin";
const providersBase = params.get("providers") === "down" ? `${location.origin}/down` : location.origin;
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

const marks = {};
let stdlibView = null;  // loadBindloop's stdlibBytecode
const mark = (name) => { marks[name] ??= performance.now(); renderTimings(); };
const events = [];
let reducer = new TurnStreamReducer();
const turns = new Map();
const agentEvents = [];
const structuredEvents = [];
const toolItems = new Map();    // call id -> { item, call }
const toolResults = new Map();  // call id -> { ok, result }

// A call's line: "⚙ name(args)" from the agent stream, "→ result" once the tool answered.
function renderTool(id) {
  const shown = toolItems.get(id);
  if (shown === undefined) return;  // the result came first: rendered when the call's event comes
  const result = toolResults.get(id);
  shown.item.className = result === undefined ? "pending" : result.ok ? "" : "err";
  shown.item.textContent = result === undefined ? `${shown.call} …` : `${shown.call} → ${result.result}`;
}

function turnNode(turnId) {
  let node = turns.get(turnId);
  if (node === undefined) {
    node = el("section", "turn");
    node.dataset.turnId = turnId;
    node.append(el("h2", "", turnId.replace("turn-", "turn ")), el("div", "routes"), el("div", "resets"),
      el("div", "text"), el("ul", "tools"));
    $("transcript").append(node);
    turns.set(turnId, node);
  }
  return node;
}

const bridge = {
  turn_event(json) {
    const event = JSON.parse(json);
    events.push(event);
    const node = turnNode(event.turn_id);
    const before = reducer.text(event.turn_id);
    const outcome = reducer.apply(event);
    if (event.kind === "text") mark("first_token");
    if (event.kind === "reset" && outcome === "applied") {
      const line = el("div", "discarded", `⟲ reset (${event.reason}, epoch ${event.epoch}) — wiped: `);
      line.append(el("s", "", before ?? ""));
      node.querySelector(".resets").append(line);
    }
    const view = reducer.view(event.turn_id);
    if (view !== null) node.querySelector(".text").textContent = view.text;
  },
  // An agent stream event (bindloop.agent, on_stream): tool calls as the model made them, and the
  // end of each turn. Their results come separately (tool_result), possibly before the call's event.
  agent_event(json) {
    const event = JSON.parse(json);
    agentEvents.push(event);
    if (event.type === "turn_done") reducer.endTurn(event.turn_id);
    if (event.type === "tool_call_done") {
      const { id, name, arguments: args } = event.tool_call;
      const item = el("li");
      item.dataset.callId = id;
      toolItems.set(id, { item, call: `⚙ ${name}(${args})` });
      turnNode(event.turn_id).querySelector(".tools").append(item);
      renderTool(id);
    }
  },
  tool_result(json) {
    const result = JSON.parse(json);
    toolResults.set(result.id, result);
    renderTool(result.id);
  },
  route(json) {
    const { turn_id: turnId, attempts } = JSON.parse(json);
    const routes = turnNode(turnId).querySelector(".routes");
    for (const a of attempts) {
      const line = el("div", "route", `${a.provider_id} → `);
      const detail = a.outcome === "failed"
        ? `failed: ${a.category}${a.status_code ? ` (HTTP ${a.status_code})` : ""} → ${a.action}`
        : a.outcome;
      line.append(el("span", a.outcome, detail));
      routes.append(line);
    }
  },
  // The report agent's structured_data events: the partial value as it streams, then complete.
  structured(json) {
    const event = JSON.parse(json);
    structuredEvents.push(event);
    if (event.status === "partial") mark("first_partial");
    const partials = structuredEvents.filter((e) => e.status === "partial").length;
    $("structured").classList.add("started");
    $("structured-status").textContent = `${event.status} · ${partials} partial(s) · valid: ${event.is_valid}`;
    $("structured-status").className = event.status;
    $("structured-data").textContent = JSON.stringify(event.data, null, 2);
  },
  report(json) {
    window.bindloopDemo.report = JSON.parse(json);
  },
  done(json) {
    const { stop_reason: stop, stats, messages, transcript } = JSON.parse(json);
    window.bindloopDemo.transcript = JSON.stringify(transcript);
    const rows = [["stop reason", stop], ["turns", stats.turns], ["tool calls", stats.tool_calls],
      ["input tokens", stats.input_tokens], ["cached input tokens", stats.cached_input_tokens],
      ["output tokens", stats.output_tokens], ["model time (ms)", stats.model_ms.toFixed(1)],
      ["tool time (ms)", stats.tool_ms.toFixed(1)], ["messages", messages]];
    $("stats").replaceChildren(...rows.map(([k, v]) => row(k, v)));
    // Which standard-library modules ran from the table so far, and which fell back to their source.
    window.bindloopDemo.stdlib = stdlibView === null ? null
      : { installed: stdlibView.installed, used: stdlibView.used(), refused: stdlibView.refused() };
    window.bindloopDemo.result = { stop_reason: stop, stats, messages };
  },
};

function row(key, value) {
  const tr = el("tr");
  tr.append(el("th", "", key), el("td", "n", String(value)));
  return tr;
}

function renderTimings() {
  $("timings").replaceChildren(...Object.entries(marks).map(([k, v]) => row(k, v.toFixed(0))));
}

function status(text, cls = "") {
  $("status").textContent = text;
  $("status").className = cls;
  const log = window.bindloopDemo.statusLog;
  if (log.at(-1) !== text) log.push(text);
}

// While the runtime loads: the step, and the bytes downloaded of those announced so far.
let stageName = "starting";
let lastShown = 0;
function onProgress({ loaded, total }) {
  window.bindloopDemo.progress.push({ loaded, total });
  const now = performance.now();
  if (now - lastShown < 100 && loaded < total) return;  // a status line ten times a second at most
  lastShown = now;
  const pct = total ? ` (${Math.min(100, Math.round((100 * loaded) / total))} %)` : "";
  status(`${stageName}… downloading the Python runtime: ${megabytes(loaded)} of ${megabytes(total)} MB${pct}`);
}

// Forget a failed run's rendering before the retry: its turns reuse the same turn ids.
function clearRun() {
  for (const list of [events, agentEvents, structuredEvents]) list.length = 0;
  turns.clear();
  toolItems.clear();
  toolResults.clear();
  reducer = new TurnStreamReducer();
  $("transcript").replaceChildren();
  $("retry").hidden = true;
}

async function runOnce(ns) {
  const prompt = ns.get("DEFAULT_PROMPT");
  $("prompt").textContent = `user: ${prompt}`;
  status(`running (Pyodide ${ns.get("PYODIDE_VERSION")}, ${variant})…`);
  const stop = await ns.get("run_page_agent")(bridge, providersBase, prompt);
  mark("done");
  const resets = events.filter((e) => e.kind === "reset").length;
  status(`asking for the structured report… (${resets} reset(s) rendered)`);
  await ns.get("run_report_agent")(bridge, providersBase, window.bindloopDemo.transcript);
  mark("report_done");
  status(`done: ${stop} — ${resets} reset(s) rendered, wheels: ${variant}`, "done");
  return stop;
}

// A failed run (every provider down, a dropped network): one readable line and a retry button
// that runs the agent again in the runtime already loaded. Resolves with the run that succeeds.
async function runWithRetry(ns) {
  for (;;) {
    try {
      return await runOnce(ns);
    } catch (err) {
      console.error(err);  // the whole traceback, for whoever opens the console
      const line = readableError(err);
      window.bindloopDemo.failures.push(line);
      status(`failed: ${line}`, "failed");
      $("retry").hidden = false;
      await new Promise((resolve) => $("retry").addEventListener("click", resolve, { once: true }));
      clearRun();
    }
  }
}

async function main() {
  // The page's own Python downloads while the runtime boots, as the wheels do: the make-demo tools
  // and prompt the agent uses (examples/demos/demo.py, served by the page's own server, not shipped
  // in the wheel) and the agent itself.
  const agentSource = fetchText("/demo/page_agent.py");
  agentSource.catch(() => {});  // awaited below, after the runtime's boot
  const { pyodide, timings, wheels, precompiled, stdlibBytecode } = await loadBindloop({
    pyodideURL: "/pyodide/",
    wheelsURL: `/${variant}/`,
    stdlibBytecodeURL,
    files: DEMO_MODULES.map((path) => ({ url: `/${path}`, path })),
    onStage: (stage) => {
      if (stage === "wheels_download") mark("pyodide_ready");  // the step after the runtime's boot
      stageName = stage.replace("_", " ");
      status(`${stageName}…`);
    },
    onProgress,
  });
  window.bindloopDemo.wheels = wheels;
  window.bindloopDemo.precompiled = precompiled;
  window.bindloopDemo.steps = timings;
  mark("bindloop_imported");
  status("importing the agent…");
  const ns = await runPythonFile(pyodide, "/demo/page_agent.py", { source: agentSource });
  mark("agent_imported");
  ns.set("PYODIDE_VERSION", pyodide.version);
  stdlibView = stdlibBytecode;
  return runWithRetry(ns);
}

window.bindloopDemo = { timings: marks, events, agentEvents, structuredEvents, variant,
  progress: [], statusLog: [], failures: [] };
window.bindloopDemo.done = main().catch((err) => {
  status(`failed: ${err && err.message ? err.message : err}`, "failed");
  console.error(err);
  throw err;
});
