// Time to first byte as an AI SDK client sees it (bench/protocols.py --clients):
// `node ttfb.mjs BASE_URL MODULE_ROOT N`. N sequential requests through the major's
// DefaultChatTransport.sendMessages, each folded by readUIMessageStream; per request the time to
// the response (headers, when sendMessages resolves), to the first UI chunk, and to the end.
// Interleaved with them, the same requests by plain fetch on the same Node (the body read to its
// end), so what the SDK adds stands apart from the runtime's own HTTP. Prints one JSON object with
// the medians in ms.
import assert from 'node:assert/strict';
import { loadAi, moduleRoot } from './sdk.mjs';

const [base, rootArg, nArg] = process.argv.slice(2);
const { ai, version } = await loadAi(moduleRoot(rootArg));
const { DefaultChatTransport, readUIMessageStream } = ai;
const n = Number(nArg ?? 20);
const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function once(i) {
  const start = performance.now();
  const stream = await transport.sendMessages({
    chatId: `ttfb-${process.pid}-${i}`, trigger: 'submit-message', messageId: undefined,
    messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'count the words of this' }] }] });
  const headers = performance.now();
  const [mine, folded] = stream.tee();
  const reader = mine.getReader();
  await reader.read();
  const first = performance.now();
  let last;
  for await (const m of readUIMessageStream({ stream: folded, terminateOnError: true })) last = m;
  reader.releaseLock();
  await mine.cancel();
  assert.equal(last.parts.at(-1).text, 'The tool answered: 4.');
  return [headers - start, first - start, performance.now() - start];
}

async function plain(i) {
  const start = performance.now();
  const response = await fetch(`${base}/api/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: `plain-${process.pid}-${i}`, trigger: 'submit-message',
      messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'count the words of this' }] }] }) });
  const headers = performance.now();
  const reader = response.body.getReader();
  await reader.read();
  const first = performance.now();
  while (!(await reader.read()).done);
  return [headers - start, first - start, performance.now() - start];
}

await once(-1);  // warm up
await plain(-1);
const rows = [];
const bare = [];
for (let i = 0; i < n; i++) {  // in turns, so neither always follows the other
  if (i % 2) bare.push(await plain(i));
  rows.push(await once(i));
  if (!(i % 2)) bare.push(await plain(i));
}
const at = (xs, k) => Number(median(xs.map((r) => r[k])).toFixed(2));
console.log(JSON.stringify({ ai: version, node: process.version, n,
  headersMs: at(rows, 0), firstChunkMs: at(rows, 1), totalMs: at(rows, 2),
  fetch: { headersMs: at(bare, 0), firstByteMs: at(bare, 1), totalMs: at(bare, 2) } }));
