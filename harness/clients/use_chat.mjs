// @ai-sdk/react's useChat in headless Chromium against bindloop's protocol host:
// `node use_chat.mjs BASE_URL [demo|worker] [MODULE_ROOT]`. The page (use_chat/app.jsx) is bundled
// offline by esbuild with `ai`, `@ai-sdk/react` and React taken from MODULE_ROOT (harness/clients/ for AI
// SDK 6, the default; harness/clients/v7 for AI SDK 7 and its @ai-sdk/react major; see sdk.mjs), and
// served by this script on 127.0.0.1, which forwards /api/* to the host (one origin, no CORS).
// Against the demo host (ui_demo): a message with a tool round streams into the page; "delete
// groceries" asks for an approval, which is clicked through, and the page ends with the tool's
// result and the model's answer. `worker`: against the Worker template in workerd with
// APPROVAL_TOOLS=word_count -- the count waits for an approval, clicked through, and the page's
// message equals the one DefaultChatTransport gets for the same request and answer.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { loadAi, moduleRoot, packageAt } from './sdk.mjs';

const base = process.argv[2];
const scenario = process.argv[3] ?? 'demo';
const root = moduleRoot(process.argv[4]);
const { ai, version } = await loadAi(root);
const { DefaultChatTransport, readUIMessageStream } = ai;
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// The page's bare imports resolve in MODULE_ROOT (one copy of React, the major under test).
const fromRoot = {
  name: 'module-root',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.pluginData?.fromRoot ? undefined
      : b.resolve(args.path, { resolveDir: root, kind: args.kind,
                               pluginData: { fromRoot: true } })));
  },
};
const bundled = await build({
  entryPoints: [new URL('./use_chat/app.jsx', import.meta.url).pathname], bundle: true,
  write: false, format: 'esm', minify: true, jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' }, logLevel: 'silent', plugins: [fromRoot],
  metafile: true });
const js = bundled.outputFiles[0].contents;
// Every package on the page came from MODULE_ROOT: the page runs the major under test.
const packages = Object.keys(bundled.metafile.inputs).filter((i) => i.includes('node_modules/'))
  .map((i) => path.resolve(i));
assert.ok(packages.some((i) => i.startsWith(path.join(root, 'node_modules', '@ai-sdk', 'react'))));
assert.deepEqual(packages.filter((i) => !i.startsWith(path.join(root, 'node_modules') + path.sep)),
                 []);
const page = '<!doctype html><meta charset="utf-8"><title>bindloop chat</title>' +
  '<div id="root"></div><script type="module" src="/app.js"></script>';

const server = http.createServer(async (req, res) => {
  if (req.url === '/') { res.writeHead(200, { 'content-type': 'text/html' }); res.end(page); return; }
  if (req.url === '/app.js') {
    res.writeHead(200, { 'content-type': 'text/javascript' }); res.end(js); return;
  }
  if (req.url.startsWith('/api/')) {
    const body = [];
    for await (const chunk of req) body.push(chunk);
    const upstream = await fetch(base + req.url, { method: req.method,
      headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
      body: req.method === 'POST' ? Buffer.concat(body) : undefined });
    res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
    if (upstream.body) for await (const chunk of upstream.body) res.write(chunk);
    res.end();
    return;
  }
  res.writeHead(404); res.end();
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const origin = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
const errors = [];
try {
  const context = await browser.newContext();
  await context.route('**/*', (route) => (route.request().url().startsWith(origin)
    ? route.continue() : route.abort()));
  const tab = await context.newPage();
  tab.on('pageerror', (e) => errors.push(String(e)));
  await tab.goto(origin + '/');
  const ask = async (text) => {
    await tab.fill('#input', text);
    await tab.click('#send');
  };
  const idle = () => tab.waitForFunction(
    () => document.querySelector('#status')?.textContent === 'ready', null, { timeout: 30_000 });
  await (scenario === 'worker' ? workerScenario : demoScenario)(tab, ask, idle);
  assert.deepEqual(errors, []);
} finally {
  await browser.close();
  server.close();
}

async function demoScenario(tab, ask, idle) {
  await ask('count the words of this sentence please');
  await tab.waitForSelector('.tool[data-state="output-available"]', { timeout: 30_000 });
  await idle();
  let texts = await tab.$$eval('.message.assistant .text', (ps) => ps.map((p) => p.textContent));
  assert.deepEqual(texts, ['Counting.', 'The tool answered: 6.']);

  await ask('delete groceries');
  await tab.waitForSelector('#approve', { timeout: 30_000 });
  await tab.click('#approve');
  await tab.waitForFunction(() => [...document.querySelectorAll('.message.assistant .text')]
    .some((p) => p.textContent.includes('deleted')), null, { timeout: 30_000 });
  await idle();
  texts = await tab.$$eval('.message.assistant .text', (ps) => ps.map((p) => p.textContent));
  assert.equal(texts.at(-1), "The tool answered: deleted 'groceries'.");
  const messages = JSON.parse(await tab.textContent('#messages'));
  assert.equal(messages.length, 4);  // two questions, two answers: the approval continued one
  const tool = messages[3].parts.find((p) => p.type === 'tool-delete_note');
  assert.equal(tool.state, 'output-available');
  assert.equal(await tab.$('#error'), null);
  console.log(JSON.stringify({ ai: version, react: packageAt(root, '@ai-sdk/react').version,
                               messages }));
}

async function workerScenario(tab, ask, idle) {
  const said = 'count these four words please';
  await ask(said);
  await tab.waitForSelector('.tool[data-state="approval-requested"] #approve', { timeout: 60_000 });
  await tab.click('#approve');
  await tab.waitForSelector('.tool[data-state="output-available"]', { timeout: 60_000 });
  await tab.waitForFunction(() => [...document.querySelectorAll('.message.assistant .text')]
    .some((p) => p.textContent === 'Counted 4 words.'), null, { timeout: 60_000 });
  await idle();
  const messages = JSON.parse(await tab.textContent('#messages'));
  assert.equal(messages.length, 2);  // the approval continued the assistant message
  assert.equal(await tab.$('#error'), null);
  // The same exchange through the transport: the request, then the approval answered.
  const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
  const fold = async (stream, message) => {
    let m;
    for await (const s of readUIMessageStream({ stream, message, terminateOnError: true })) m = s;
    return m;
  };
  const send = (messages) => transport.sendMessages({ chatId: 'use-chat-ref', messages,
    trigger: 'submit-message', messageId: undefined });
  const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: said }] };
  const asked = await fold(await send([user]));
  const answered = { ...asked, parts: asked.parts.map((p) => p.state === 'approval-requested'
    ? { ...p, state: 'approval-responded', approval: { ...p.approval, approved: true } } : p) };
  const whole = await fold(await send([user, answered]), structuredClone(answered));
  const norm = (m) => JSON.parse(JSON.stringify(m).replaceAll(m.id, 'MSG'));
  assert.deepEqual(norm(messages[1]), norm(whole));
  const tool = whole.parts.find((p) => p.type === 'tool-word_count');
  assert.equal(tool.state, 'output-available');
  assert.equal(tool.approval.approved, true);
  console.log(JSON.stringify({ ai: version, react: packageAt(root, '@ai-sdk/react').version,
                               messages }));
}
