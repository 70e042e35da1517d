// The real clients against the Worker template's POST /api/chat and POST /ag-ui in workerd:
// `node worker.mjs BASE_URL [MODULE_ROOT]` (the AI SDK major from MODULE_ROOT, see sdk.mjs). The
// provider behind it is scripted: "count ..." makes one word_count round, "ask ..." calls ask_user
// (a question the client answers), anything else is echoed as "You said: ...".
import assert from 'node:assert/strict';
import { HttpAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import { loadAi, moduleRoot } from './sdk.mjs';

const { ai: { DefaultChatTransport, readUIMessageStream }, version } =
  await loadAi(moduleRoot(process.argv[3]));

const base = process.argv[2];
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';
const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

async function last(stream, message) {
  let m;
  for await (const s of readUIMessageStream({ stream, message, terminateOnError: true })) m = s;
  return m;
}
const send = (chatId, messages) => transport.sendMessages({
  chatId, messages, trigger: 'submit-message', messageId: undefined });

// AI SDK: a tool round, then the answer, with usage in the metadata.
const counted = await last(await send('w1', [user('u1', 'count these four words please')]));
assert.deepEqual(counted.parts.map((p) => p.type),
                 ['step-start', 'tool-word_count', 'step-start', 'text']);
assert.equal(counted.parts[1].output, '4');
assert.equal(counted.parts[3].text, 'Counted 4 words.');
assert.ok(counted.metadata.usage.totalTokens > 0);

// AI SDK: ask_user leaves the call for the client; its answer (addToolResult) continues the message.
const ask = [user('u2', 'ask my name')];
const asked = await last(await send('w2', ask));
const question = asked.parts.find((p) => p.type === 'tool-ask_user');
assert.equal(question.state, 'input-available');
assert.equal(asked.parts.find((p) => p.type === 'data-bindloop-suspend').data.detail,
             'What is your name?');
const answered = { ...asked, parts: asked.parts.map((p) => p === question
  ? { ...p, state: 'output-available', output: 'Ada' } : p) };
const done = await last(await send('w2', [...ask, answered]), structuredClone(answered));
assert.equal(done.id, asked.id);
assert.equal(done.parts.at(-1).text, 'Nice to meet you, Ada.');

// AG-UI: the same round; the verifier in HttpAgent's pipeline checks the event sequence.
const agent = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'w3',
                              initialMessages: [{ id: 'u3', role: 'user', content: 'count a b' }] });
await agent.runAgent({ runId: 'run-w3' });
assert.deepEqual(agent.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
assert.equal(agent.messages.at(-1).content, 'Counted 2 words.');

// AG-UI: ask_user is an interrupt; resuming it with the answer finishes the run.
const asking = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'w4',
                               initialMessages: [{ id: 'u4', role: 'user', content: 'ask me' }] });
let outcome;
await asking.runAgent({ runId: 'run-w4' }, {
  onRunFinishedEvent: ({ event }) => { outcome = event.outcome; } });
assert.equal(outcome.type, 'interrupt');
assert.equal(outcome.interrupts[0].reason, 'waiting_for_reply');
await asking.runAgent({ runId: 'run-w4b', resume: [
  { interruptId: outcome.interrupts[0].id, status: 'resolved', payload: 'Ada' }] });
assert.equal(asking.messages.at(-1).content, 'Nice to meet you, Ada.');

// AI SDK: the connection cut mid-stream; reconnectToStream replays the running response from the
// chat's event log (its Session object), and the message ends as an uninterrupted run's does.
const norm = (m) => JSON.parse(JSON.stringify(m).replaceAll(m.id, 'MSG'));
const slow = [user('u5', 'slow count these four words please')];
const whole = await last(await send('w5', slow));
{
  const abort = new AbortController();
  const stream = await transport.sendMessages({ chatId: 'w6', messages: slow,
    trigger: 'submit-message', messageId: undefined, abortSignal: abort.signal });
  const reader = stream.getReader();
  for (let i = 0; i < 3; i++) await reader.read();
  abort.abort();
  await reader.cancel().catch(() => {});
  const again = await transport.reconnectToStream({ chatId: 'w6' });
  assert.notEqual(again, null, 'the run was still going: the reconnect must get a stream');
  assert.deepEqual(norm(await last(again)), norm(whole));
  // the run is over: nothing to reconnect to
  assert.equal(await transport.reconnectToStream({ chatId: 'w6' }), null);
}

// AI SDK: the stop endpoint ends a running response with abort.
{
  const stream = await send('w7', slow);
  const reader = stream.getReader();
  await reader.read();
  const stop = await fetch(`${base}/api/chat/w7/stop`, { method: 'POST' });
  assert.equal(stop.status, 202);
  let lastChunk;
  for (;;) { const { done, value } = await reader.read(); if (done) break; lastChunk = value; }
  assert.equal(lastChunk.type, 'abort');
}

// AG-UI: a run cut mid-way, then a second client connects to the thread's running stream.
{
  class ResumingAgent extends HttpAgent {
    connect(input) {
      return transformHttpEventStream(runHttpRequest(() => fetch(
        `${base}/ag-ui/${input.threadId}/stream`, { headers: { Accept: 'text/event-stream' } })));
    }
  }
  const start = [{ id: 'u8', role: 'user', content: 'slow count a b c' }];
  const cut = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'w8', initialMessages: start });
  let seen = 0;
  await cut.runAgent({ runId: 'run-w8' }, {
    onEvent: () => { seen += 1; if (seen === 3) cut.abortRun(); } }).catch(() => {});
  const again = new ResumingAgent({ url: `${base}/ag-ui`, threadId: 'w8', initialMessages: start });
  await again.connectAgent({ runId: 'run-w8' });
  assert.equal(again.messages.at(-1).content, 'Counted 3 words.');
  assert.deepEqual(again.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
}

console.log(JSON.stringify({ version, ai: counted, agUi: agent.messages }));
