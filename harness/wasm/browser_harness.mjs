// Shared by the Chromium test and the start-up benchmark: the demo server (harness/wasm/demo/serve.py) and
// headless Debian Chromium driven by playwright-core, with every request off the server's origin
// refused and recorded (the page must need nothing from anywhere else).

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const WASM_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.dirname(path.dirname(WASM_DIR));
export const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
// The flags headless Debian Chromium needs here (DESIGN.md §1); playwright adds --headless and its
// own fresh --user-data-dir for every launch.
export const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** Start serve.py on an ephemeral port; resolves {url, origin, stop()} once it prints its URL. */
export async function startDemoServer(extraArgs = []) {
  const python = path.join(REPO_ROOT, ".venv", "bin", "python");
  if (!fs.existsSync(python)) throw new Error(`${python} not found: run \`make venv\``);
  const child = spawn(python, [path.join(WASM_DIR, "demo", "serve.py"), ...extraArgs],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: child.stdout });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("serve.py printed no URL within 30 s")), 30_000);
    child.once("exit", (code) => reject(new Error(`serve.py exited with status ${code}`)));
    lines.once("line", (line) => {
      clearTimeout(timer);
      const m = /^serving (http:\/\/127\.0\.0\.1:\d+\/demo\/)$/.exec(line.trim());
      if (m) resolve(m[1]); else reject(new Error(`unexpected first line from serve.py: ${line}`));
    });
  });
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGTERM");  // the PID we started; serve.py stops on SIGTERM
  });
  return { url, origin: new URL(url).origin, stop };
}

export async function launchChromium() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: \`apt-get install -y chromium\` (make test-browser does it)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/**
 * A fresh context (empty cache) and page on `origin`; requests elsewhere are aborted and listed in
 * `refused`, those to `origin` listed in `requested` ("GET /path"), page and console errors in `errors`.
 */
export async function openPage(browser, origin) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  const refused = [];
  const errors = [];
  const requested = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) {
      requested.push(`${route.request().method()} ${new URL(url).pathname}`);
      return route.continue();
    }
    refused.push(url);
    return route.abort();
  });
  const page = await context.newPage();
  page.on("pageerror", (err) => errors.push(`pageerror: ${err.message}`));
  page.on("console", (msg) => { if (msg.type() === "error") errors.push(`console: ${msg.text()}`); });
  return { context, page, refused, errors, requested };
}

/** Load the demo and wait for its run; returns window.bindloopDemo's plain data. */
export async function runDemo(page, url, { timeoutMs = 180_000 } = {}) {
  await page.goto(url);
  await page.waitForFunction(() => window.bindloopDemo && window.bindloopDemo.done, null, { timeout: 30_000 });
  await page.evaluate(() => window.bindloopDemo.done, null);
  await page.waitForFunction(() => window.bindloopDemo.result !== undefined, null, { timeout: timeoutMs });
  return page.evaluate(() => {
    const d = window.bindloopDemo;
    return { result: d.result, timings: d.timings, steps: d.steps, events: d.events, agentEvents: d.agentEvents, structuredEvents: d.structuredEvents, report: d.report, wheels: d.wheels, variant: d.variant, precompiled: d.precompiled, stdlib: d.stdlib, progress: d.progress, statusLog: d.statusLog, failures: d.failures };
  });
}

export function tmpDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}
