// The demo page: load bindloop into Pyodide, run wasm/demo/page_agent.py, render what its bridge reports.
// State for tests and benchmarks is on window.bindloopDemo ({ done, timings, events, wheels }).
import { loadBindloop, runPythonFile } from "./loader.js";
import { TurnStreamReducer } from "./turn-stream.js";

const params = new URLSearchParams(location.search);
// The .pyc wheel set is the default (it starts faster: docs/browser.md); ?wheels=plain for the other.
const variant = params.get("wheels") === "plain" ? "wheels" : "wheels-pyc";
const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

const marks = {};
const mark = (name) => { marks[name] ??= performance.now(); renderTimings(); };
const events = [];
const reducer = new TurnStreamReducer();
const turns = new Map();

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
  turn_end(turnId) {
    reducer.endTurn(turnId);
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
  tool(json) {
    const call = JSON.parse(json);
    const item = el("li", call.ok ? "" : "err", `⚙ ${call.name}(${call.arguments}) → ${call.result}`);
    turnNode(call.turn_id).querySelector(".tools").append(item);
  },
  done(json) {
    const { stop_reason: stop, stats, messages } = JSON.parse(json);
    const rows = [["stop reason", stop], ["turns", stats.turns], ["tool calls", stats.tool_calls],
      ["input tokens", stats.input_tokens], ["cached input tokens", stats.cached_input_tokens],
      ["output tokens", stats.output_tokens], ["model time (ms)", stats.model_ms.toFixed(1)],
      ["tool time (ms)", stats.tool_ms.toFixed(1)], ["messages", messages]];
    $("stats").replaceChildren(...rows.map(([k, v]) => row(k, v)));
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
}

async function main() {
  const { pyodide, timings, wheels, precompiled } = await loadBindloop({
    pyodideURL: "/pyodide/",
    wheelsURL: `/${variant}/`,
    onStage: (stage) => {
      if (stage === "wheels_download") mark("pyodide_ready");  // the step after the runtime's boot
      status(`${stage.replace("_", " ")}…`);
    },
  });
  window.bindloopDemo.wheels = wheels;
  window.bindloopDemo.precompiled = precompiled;
  window.bindloopDemo.steps = timings;
  mark("bindloop_imported");
  status("importing the agent…");
  const ns = await runPythonFile(pyodide, "/demo/page_agent.py");
  mark("agent_imported");
  const prompt = ns.get("DEFAULT_PROMPT");
  $("prompt").textContent = `user: ${prompt}`;
  status(`running (Pyodide ${pyodide.version}, ${variant})…`);
  const stop = await ns.get("run_page_agent")(bridge, location.origin, prompt);
  mark("done");
  status(`done: ${stop} — ${events.filter((e) => e.kind === "reset").length} reset(s) rendered, wheels: ${variant}`, "done");
  return stop;
}

window.bindloopDemo = { timings: marks, events, variant };
window.bindloopDemo.done = main().catch((err) => {
  status(`failed: ${err && err.message ? err.message : err}`, "failed");
  console.error(err);
  throw err;
});
