// The real clients across a workerd killed with SIGKILL mid-run: `node worker_kill.mjs BASE_URL
// [MODULE_ROOT]` (the AI SDK major from MODULE_ROOT, see sdk.mjs).
// Both clients send a message whose run makes a word_count round and then waits on the (held)
// provider, and the AI SDK one more whose run waits on its first model call (nothing saved yet);
// once both rounds streamed in this prints "ready" and waits for a line on stdin: the
// base URL of the Worker restarted on the same storage. Then each client reconnects --
// DefaultChatTransport.reconnectToStream + readUIMessageStream, HttpAgent.connectAgent on
// GET /ag-ui/{thread}/stream with its event verifier -- to the run the Session object's alarm
// continued, and must end with the message an uninterrupted run of the same request gives.
import assert from 'node:assert/strict';
import readline from 'node:readline';
import { HttpAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import { loadAi, moduleRoot } from './sdk.mjs';

const { ai: { DefaultChatTransport, readUIMessageStream }, version } =
  await loadAi(moduleRoot(process.argv[3]));

process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';
const SAID = 'hold count these four words';
const EARLY = 'hold first count two words';
const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });
const norm = (m) => JSON.parse(JSON.stringify(m).replaceAll(m.id, 'MSG'));
const agUi = (ms) => ms.map(({ role, content, toolCalls, toolCallId }) => ({
  role, content, toolCallId, toolCalls: toolCalls?.map((c) => [c.function.name, c.function.arguments]) }));

async function last(stream) {
  let m;
  for await (const s of readUIMessageStream({ stream, terminateOnError: true })) m = s;
  return m;
}

class Reconnecting extends HttpAgent {
  connect(input) {
    return transformHttpEventStream(runHttpRequest(() => fetch(
      `${this.base}/ag-ui/${input.threadId}/stream`, { headers: { Accept: 'text/event-stream' } })));
  }
}

// 1. Both runs up to their round; their streams end when workerd dies (the clients' own
// pipelines then reject with undici's "terminated": expected here, anything else is not).
process.on('unhandledRejection', (error) => {
  if (error?.message === 'terminated' || error?.cause?.code === 'UND_ERR_SOCKET') return;
  throw error;
});
const base = process.argv[2];
const first = new DefaultChatTransport({ api: `${base}/api/chat` });
const rounds = [];
rounds.push((async () => {
  const reader = (await first.sendMessages({ chatId: 'k1', messages: [user('u1', SAID)],
    trigger: 'submit-message', messageId: undefined })).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    assert.ok(!done, 'the AI SDK stream ended before its round');
    if (value.type === 'tool-output-available') break;
  }
  reader.read().then(() => {}, () => {});  // the rest dies with workerd
})());
rounds.push(new Promise((resolve, reject) => {
  const agent = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'k2',
                                initialMessages: [{ id: 'u2', role: 'user', content: SAID }] });
  agent.runAgent({ runId: 'run-k2' }, {
    onEvent: ({ event }) => { if (event.type === 'TOOL_CALL_RESULT') resolve(); } })
    .then(() => reject(new Error('the AG-UI run ended before workerd was killed')), () => {});
}));
rounds.push((async () => {
  const reader = (await first.sendMessages({ chatId: 'k3', messages: [user('u3', EARLY)],
    trigger: 'submit-message', messageId: undefined })).getReader();
  assert.equal((await reader.read()).value.type, 'start');
  reader.read().then(() => {}, () => {});
})());
await Promise.all(rounds);
console.log('ready');

// 2. The restarted Worker: reconnect, then the same requests uninterrupted, compared.
const lines = readline.createInterface({ input: process.stdin });
const again = (await lines[Symbol.asyncIterator]().next()).value.trim();
lines.close();
const transport = new DefaultChatTransport({ api: `${again}/api/chat` });
const reconnecting = new Reconnecting({ url: `${again}/ag-ui`, threadId: 'k2',
                                        initialMessages: [{ id: 'u2', role: 'user', content: SAID }] });
reconnecting.base = again;
// All at once, as browser tabs would: each run is lost until the alarm continues it.
const reconnect = async (chatId) => {
  const resumed = await transport.reconnectToStream({ chatId });
  assert.notEqual(resumed, null, `${chatId}: the lost run was not being continued (a 204)`);
  return last(resumed);
};
const [aiMessage, earlyMessage] = await Promise.all([
  reconnect('k1'), reconnect('k3'), reconnecting.connectAgent({ runId: 'run-k2' })]);

const whole = await last(await transport.sendMessages({ chatId: 'k1-whole',
  messages: [user('u1', SAID)], trigger: 'submit-message', messageId: undefined }));
assert.deepEqual(norm(aiMessage), norm(whole));
// Lost before its first save: the continuation ran the request again from its start.
const early = await last(await transport.sendMessages({ chatId: 'k3-whole',
  messages: [user('u3', EARLY)], trigger: 'submit-message', messageId: undefined }));
assert.deepEqual(norm(earlyMessage), norm(early));
assert.equal(early.parts.at(-1).text, 'Counted 2 words.');
assert.deepEqual(whole.parts.map((p) => p.type), ['step-start', 'tool-word_count', 'step-start', 'text']);
const reference = new HttpAgent({ url: `${again}/ag-ui`, threadId: 'k2-whole',
                                  initialMessages: [{ id: 'u2', role: 'user', content: SAID }] });
await reference.runAgent({ runId: 'run-k2-whole' });
assert.deepEqual(agUi(reconnecting.messages), agUi(reference.messages));
assert.deepEqual(reference.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
console.log(JSON.stringify({ version, ai: aiMessage, agUi: reconnecting.messages }));
