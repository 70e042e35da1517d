// The browser demo in real headless Chromium (Debian `chromium` + npm playwright-core), offline:
//   node --test harness/wasm/browser.test.mjs        (make test-browser installs what it needs first)
// Loads harness/wasm/demo/ from serve.py, waits for the agent run (the agent API over a routed model),
// asserts the rendered transcript (the 503 fallback, the tool calls from the agent stream with their
// results, the mid-stream drop shown as a reset whose wiped text is gone from the answer, the agent
// stream's events per turn, the run stats, the structured-output panel's streamed partials), that nothing was requested off the server's origin, and saves a
// screenshot (SCREENSHOT=path, default .reports/browser-demo.png; docs/browser-demo.png is one).

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { REPO_ROOT, launchChromium, openPage, runDemo, startDemoServer } from "./browser_harness.mjs";

const ANSWER = [
  "Here is what I found:",
  "  (17 * 23) + 4 = 395",
  "  2 ** 10 / 8 = 128",
  "You have 2 note(s) (5 tool calls made):",
  "  - result 1: (17 * 23) + 4 = 395",
  "  - result 2: 2 ** 10 / 8 = 128",
].join("\n");
// What the browser itself logs for the two failures the primary provider is scripted to make.
const EXPECTED_CONSOLE = [
  "console: Failed to load resource: the server responded with a status of 503 (Service Unavailable)",
  "console: Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING",
];

let server;
let browser;
before(async () => {
  server = await startDemoServer();
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

// The page's wheel sets: ?wheels=NAME, the first the default (no parameter); each one's directory.
const WHEEL_SETS = { bytecode: "wheels-bytecode", pyc: "wheels-pyc", plain: "wheels" };
for (const dir of ["wheels-pyc", "wheels-bytecode"]) {
  assert.ok(fs.existsSync(path.join(REPO_ROOT, "harness", "wasm", dir)), `no harness/wasm/${dir}: run make wasm-${dir}`);
}
for (const [variant, dir] of Object.entries(WHEEL_SETS)) {
  test(`the agent page renders the run (${variant} wheels)`, async () => {
    const { context, page, refused, errors, requested } = await openPage(browser, server.origin);
    try {
      // The plain set runs without the standard-library bytecode table (?stdlib=source), the others with it.
      const withTable = variant !== "plain";
      const url = variant === "bytecode" ? server.url : `${server.url}?wheels=${variant}${withTable ? "" : "&stdlib=source"}`;
      const demo = await runDemo(page, url);
      assert.deepEqual(refused, [], "the page asked for something off its origin");
      assert.deepEqual(errors, EXPECTED_CONSOLE);
      // Exactly the runtime, the wheel set, the page's own files and the demo module; then 3 turns: 5 model calls,
      // and the structured report: 1.
      const wheelDir = `/${dir}/`;
      const fetched = new Set(requested);
      for (const f of ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"]) {
        assert.ok(fetched.has(`GET /pyodide/${f}`), `${f} not loaded from the server: ${requested}`);
      }
      for (const w of demo.wheels) assert.ok(fetched.has(`GET ${wheelDir}${w}`), w);
      // The demo's tools come from the page's server (examples/demos/), not from the wheel.
      assert.ok(fetched.has("GET /examples/demos/demo.py"), `the demo module not loaded: ${requested}`);
      const other = requested.filter((r) => !/^GET \/(demo|pyodide|examples|stdlib-bytecode)\//.test(r) && !r.startsWith(`GET ${wheelDir}`));
      assert.deepEqual(other, ["POST /primary/v1/chat/completions", "POST /backup/v1/chat/completions",
        "POST /primary/v1/chat/completions", "POST /primary/v1/chat/completions", "POST /backup/v1/chat/completions",
        "POST /structured/v1/chat/completions"]);
      assert.equal(demo.result.stop_reason, "done");
      assert.ok(demo.wheels.some((w) => w.startsWith("bindloop-")), demo.wheels);
      // The pyc and bytecode sets ship bytecode (the plain one does not): checked before anything is imported.
      assert.equal(demo.precompiled, variant !== "plain");
      // The page's own Python (the demo modules and the agent), each asked for once and before the
      // runtime's standard library: it downloads while the runtime boots.
      const stdlib = requested.indexOf("GET /pyodide/python_stdlib.zip");
      const table = "GET /stdlib-bytecode/stdlib-bytecode.bin";
      for (const f of ["GET /demo/page_agent.py", "GET /examples/demos/demo.py", "GET /examples/__init__.py",
        ...(withTable ? [table] : [])]) {
        assert.equal(requested.filter((r) => r === f).length, 1, `${f}: ${requested}`);
        assert.ok(requested.indexOf(f) < stdlib, `${f} after the standard library: ${requested}`);
      }
      // The standard-library modules imported after the boot ran from the table (anyio's asyncio
      // backend imports ipaddress), none fell back to its source; without the table it is not asked for.
      if (withTable) {
        assert.equal(demo.stdlib.installed, true);
        assert.ok(demo.stdlib.used.includes("ipaddress"), JSON.stringify(demo.stdlib));
        assert.deepEqual(demo.stdlib.refused, []);
      } else {
        assert.equal(demo.stdlib, null);
        assert.ok(!requested.includes(table), `${table} requested with ?stdlib=source`);
      }

      const status = await page.textContent("#status");
      assert.equal(status, `done: done — 1 reset(s) rendered, wheels: ${dir}`);
      const turns = await page.$$eval(".turn", (nodes) => nodes.map((n) => ({
        id: n.dataset.turnId,
        routes: [...n.querySelectorAll(".route")].map((r) => r.textContent),
        resets: [...n.querySelectorAll(".discarded")].map((r) => ({ line: r.textContent, wiped: r.querySelector("s").textContent })),
        text: n.querySelector(".text").textContent,
        tools: [...n.querySelectorAll(".tools li")].map((li) => li.textContent),
      })));
      assert.deepEqual(turns.map((t) => t.id), ["turn-1", "turn-2", "turn-3"]);
      const [t1, t2, t3] = turns;

      // Turn 1: the primary answers 503 before any text: a fallback, and nothing to reset.
      assert.deepEqual(t1.routes, ["primary → failed: server_error (HTTP 503) → traverse", "backup → succeeded"]);
      assert.deepEqual(t1.resets, []);
      assert.equal(t1.text, "I'll evaluate 2 expression(s) first.");
      assert.deepEqual(t1.tools, ['⚙ calculator({"expression":"(17 * 23) + 4"}) → 395',
        '⚙ calculator({"expression":"2 ** 10 / 8"}) → 128']);

      // Turn 2: tool calls only, served by the primary.
      assert.deepEqual(t2.routes, ["primary → succeeded"]);
      assert.equal(t2.text, "");
      assert.deepEqual(t2.tools, [
        `⚙ notes_write({"title":"result 1","body":"(17 * 23) + 4 = 395"}) → saved note 'result 1'`,
        `⚙ notes_write({"title":"result 2","body":"2 ** 10 / 8 = 128"}) → saved note 'result 2'`,
        '⚙ notes_list({}) → [{"title":"result 1","body":"(17 * 23) + 4 = 395"},{"title":"result 2","body":"2 ** 10 / 8 = 128"}]',
      ]);

      // Turn 3: the primary's answer is cut mid-stream; the backup's replaces it, never glued on.
      assert.deepEqual(t3.routes, ["primary → failed: connection → traverse", "backup → succeeded"]);
      assert.equal(t3.resets.length, 1);
      const { line, wiped } = t3.resets[0];
      assert.match(line, /^⟲ reset \(attempt_failed, epoch 1\) — wiped: /);
      assert.ok(wiped.length > 10 && ANSWER.startsWith(wiped) && wiped !== ANSWER, JSON.stringify(wiped));
      assert.equal(t3.text, ANSWER);

      // The events the reducer was given: one stream per turn, seq gap-free, the reset between epochs.
      const byTurn = {};
      for (const e of demo.events) (byTurn[e.turn_id] ??= []).push(e);
      assert.deepEqual(Object.keys(byTurn), ["turn-1", "turn-3"]);
      for (const evs of Object.values(byTurn)) assert.deepEqual(evs.map((e) => e.seq), evs.map((_, i) => i));
      const kinds = byTurn["turn-3"].map((e) => `${e.kind}@${e.epoch}`);
      const cut = kinds.indexOf("reset@1");
      assert.ok(cut > 0 && kinds.slice(0, cut).every((k) => k === "text@0") && kinds.slice(cut + 1).every((k) => k === "text@1"), kinds.join(" "));
      assert.equal(byTurn["turn-3"].slice(0, cut).map((e) => e.text).join(""), wiped);

      // The agent stream (bindloop.agent on_stream) the page was given: per turn its start, the
      // assembled tool calls in the model's order, usage and its end; no error events.
      const agentKinds = {};
      for (const e of demo.agentEvents) (agentKinds[e.turn_id] ??= []).push(e.type === "tool_call_done" ? `tool_call:${e.tool_call.id}` : e.type);
      assert.deepEqual(Object.keys(agentKinds), ["turn-1", "turn-2", "turn-3"]);
      const calls = { "turn-1": ["calc_0", "calc_1"], "turn-2": ["note_0", "note_1", "list_0"], "turn-3": [] };
      // The run's tool events carry the turn whose calls they run, after that turn's turn_done.
      const RUN_ONLY = ["tool_started", "tool_finished", "approval_requested", "approval_decided",
                        "checkpoint_saved"];
      for (const [turnId, all] of Object.entries(agentKinds)) {
        const kinds = all.filter((k) => !RUN_ONLY.includes(k));
        assert.equal(kinds[0], "turn_start", all.join(" "));
        assert.equal(kinds.at(-1), "turn_done", all.join(" "));
        assert.equal(all.filter((k) => k === "tool_started").length, calls[turnId].length, all.join(" "));
        assert.deepEqual(kinds.filter((k) => k.startsWith("tool_call:")), calls[turnId].map((id) => `tool_call:${id}`));
        assert.ok(kinds.includes("usage"), kinds.join(" "));
        assert.ok(!kinds.includes("error"), kinds.join(" "));
      }
      // Every call's line got its result (none left pending).
      assert.equal(await page.$$eval(".tools li.pending", (n) => n.length), 0);

      const stats = Object.fromEntries(await page.$$eval("#stats tr", (rows) => rows.map((r) => [r.cells[0].textContent, r.cells[1].textContent])));
      assert.equal(stats["stop reason"], "done");
      assert.equal(stats.turns, "3");
      assert.equal(stats["tool calls"], "5");
      assert.equal(stats.messages, "10");
      assert.ok(Number(stats["output tokens"]) > 0 && Number(stats["input tokens"]) > 0, JSON.stringify(stats));
      // The structured-output panel: prompt_agent(NotesReport) from a provider streaming JSON in
      // 6-character chunks; every partial rendered as it came, then the complete, valid value.
      const REPORT = { count: 2, notes: [{ title: "result 1", body: "(17 * 23) + 4 = 395" },
        { title: "result 2", body: "2 ** 10 / 8 = 128" }], summary: "2 note(s) saved in a run of 5 tool calls" };
      assert.deepEqual(demo.report, REPORT);
      const sd = demo.structuredEvents;
      const partials = sd.slice(0, -1);
      assert.deepEqual(sd.at(-1), { status: "complete", data: REPORT, is_valid: true });
      assert.ok(partials.length > 10, `only ${partials.length} partials`);
      assert.ok(partials.every((e) => e.status === "partial" && e.is_valid === false), JSON.stringify(partials.slice(0, 3)));
      const noteCounts = partials.filter((e) => e.data && typeof e.data === "object").map((e) => (e.data.notes ?? []).length);
      assert.deepEqual(noteCounts, [...noteCounts].sort((a, b) => a - b));
      assert.equal(noteCounts[0], 0);
      assert.equal(noteCounts.at(-1), 2);
      assert.equal(await page.textContent("#structured-status"), `complete · ${partials.length} partial(s) · valid: true`);
      assert.deepEqual(JSON.parse(await page.textContent("#structured-data")), REPORT);

      // Load progress (D10): the bytes of the runtime and the wheels as they arrived, shown in the
      // status line while the ~13 MB load runs, not a frozen "pyodide…".
      const { progress, statusLog } = demo;
      assert.ok(progress.length > 5, `only ${progress.length} progress samples`);
      for (let i = 1; i < progress.length; i++) assert.ok(progress[i].loaded >= progress[i - 1].loaded);
      const last = progress.at(-1);
      assert.equal(last.loaded, last.total);
      assert.ok(last.total > 10e6, `${last.total} bytes downloaded`);
      const shown = statusLog.filter((l) => /downloading the Python runtime: \d+\.\d of \d+\.\d MB \(\d+ %\)$/.test(l));
      assert.ok(shown.length >= 2, statusLog.join(" | "));
      assert.ok(statusLog.some((l) => l.startsWith("pyodide… downloading")), statusLog.join(" | "));
      assert.deepEqual(demo.failures, []);
      assert.equal(await page.isHidden("#retry"), true);
      for (const key of ["pyodide_ready", "bindloop_imported", "agent_imported", "first_token", "done", "first_partial", "report_done"]) {
        assert.ok(demo.timings[key] > 0, `timing ${key} missing: ${JSON.stringify(demo.timings)}`);
      }
      process.stderr.write(`[browser] ${variant}: first token at ${demo.timings.first_token.toFixed(0)} ms, ` +
        `done at ${demo.timings.done.toFixed(0)} ms, structured report at ${demo.timings.report_done.toFixed(0)} ms after navigation\n`);
      if (variant === "bytecode") {  // the default page
        const shot = path.resolve(REPO_ROOT, process.env.SCREENSHOT || ".reports/browser-demo.png");
        fs.mkdirSync(path.dirname(shot), { recursive: true });
        await page.screenshot({ path: shot, fullPage: true });
      }
    } finally {
      await context.close();
    }
  });
}

test("every provider down: one readable line and a retry button that runs the agent again", async () => {
  const { context, page, refused } = await openPage(browser, server.origin);
  try {
    await page.goto(`${server.url}?providers=down`);
    await page.waitForSelector("#retry:not([hidden])", { timeout: 180_000 });
    const line = await page.textContent("#status");
    // Not the Python traceback: one line naming the failure, no file paths, no URL.
    assert.match(line, /^failed: AttemptError: server_error \(HTTP 503\) from backup\//);
    assert.ok(!line.includes("\n") && !line.includes("Traceback") && !line.includes("File \"") && !line.includes("http"), line);
    assert.ok(line.length <= 210, line);
    assert.equal(await page.getAttribute("#status", "class"), "failed");
    await page.click("#retry");
    await page.evaluate(() => window.bindloopDemo.done, null);
    const demo = await page.evaluate(() => ({ result: window.bindloopDemo.result, failures: window.bindloopDemo.failures }));
    assert.equal(demo.result.stop_reason, "done");
    assert.deepEqual(demo.failures, [line.replace(/^failed: /, "")]);
    assert.match(await page.textContent("#status"), /^done: done — 1 reset\(s\) rendered/);
    assert.equal(await page.isHidden("#retry"), true);
    // The retry's transcript only: three turns, as in an uninterrupted run.
    assert.deepEqual(await page.$$eval(".turn", (nodes) => nodes.map((n) => n.dataset.turnId)), ["turn-1", "turn-2", "turn-3"]);
    assert.deepEqual(refused, []);
  } finally {
    await context.close();
  }
});
