// What each real client ends with when the host stops a run at its log's quota (ChatApp(max_log_bytes=)):
// `node log_full.mjs BASE_URL [MODULE_ROOT]` (the AI SDK major from MODULE_ROOT, see sdk.mjs), against a
// host whose run for "talk forever" streams words without end. The AI SDK folds the stream into a
// message holding the text that came, and reports exactly one error, the host's log_full with the run's
// id; AG-UI's HttpAgent (its event verifier on) ends the run with RUN_ERROR carrying the same text.
import assert from 'node:assert/strict';
import { HttpAgent } from '@ag-ui/client';
import { loadAi, moduleRoot } from './sdk.mjs';

const [base, rootArg] = process.argv.slice(2);
const { ai, version } = await loadAi(moduleRoot(rootArg));
const { DefaultChatTransport, readUIMessageStream } = ai;
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';
const FULL = /^the run was stopped: log_full \[ref [A-Za-z0-9._~-]+\]$/;

const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const stream = await transport.sendMessages({
  chatId: 'full', trigger: 'submit-message', messageId: undefined,
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'talk forever' }] }] });
const errors = [];
let message;
for await (const m of readUIMessageStream({ stream, onError: (e) => errors.push(String(e?.message ?? e)) })) {
  message = m;
}
assert.equal(errors.length, 1, `errors: ${JSON.stringify(errors)}`);
assert.match(errors[0], FULL);
const text = message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
assert.ok(text.length > 1000, `the text that came before the error: ${text.length} characters`);

const agent = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'full',
                              initialMessages: [{ id: 'u1', role: 'user', content: 'talk forever' }] });
let runError;
let failure;
try {
  await agent.runAgent({ runId: 'run-full' }, { onRunErrorEvent: ({ event }) => { runError = event.message; } });
} catch (e) {
  failure = e;
}
assert.match(String(runError), FULL);
assert.ok(failure === undefined || String(failure?.message ?? failure).includes('log_full'),
          `the run failed otherwise: ${failure}`);
console.log(JSON.stringify({ version, ui: errors[0], agUi: runError, chars: text.length }));
