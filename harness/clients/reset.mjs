// What each real client ends with when a failed attempt's text is retracted (bindloop's turn text
// stream reset, e.g. a fallback to a second provider): `node reset.mjs BASE_URL data|step
// [MODULE_ROOT]` (the AI SDK major from MODULE_ROOT, see sdk.mjs), against a host whose run streams
// "Partial", a reset, then "Full answer.". `data`: the host announces the reset as a
// data-bindloop-reset part (any major); `step`: as AI SDK 7's reset-step (ChatApp(ai_sdk=7)).
import assert from 'node:assert/strict';
import { HttpAgent } from '@ag-ui/client';
import { loadAi, moduleRoot } from './sdk.mjs';

const [base, mode, rootArg] = process.argv.slice(2);
assert.ok(mode === 'data' || mode === 'step', 'usage: node reset.mjs BASE_URL data|step [ROOT]');
const { ai, version } = await loadAi(moduleRoot(rootArg));
const { DefaultChatTransport, readUIMessageStream } = ai;
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';

// The AI SDK has no retraction: the message keeps both texts, with a data-bindloop-reset part
// between them. A renderer that drops, within a step, the text parts before a reset shows the retry.
function visibleText(message) {
  const shown = [];
  for (const part of message.parts) {
    if (part.type === 'step-start') shown.push('|');
    else if (part.type === 'data-bindloop-reset') {
      let drop = part.data.retracted;
      for (let i = shown.length - 1; i >= 0 && drop > 0 && shown[i] !== '|'; i--) {
        if (typeof shown[i] === 'string') { shown.splice(i, 1); drop -= 1; }
      }
    } else if (part.type === 'text') shown.push(part.text);
  }
  return shown.filter((s) => s !== '|').join('');
}

const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const stream = await transport.sendMessages({
  chatId: 'reset', trigger: 'submit-message', messageId: undefined,
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
let message;
for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
if (mode === 'data') {
  assert.deepEqual(message.parts.filter((p) => p.type === 'text').map((p) => p.text),
                   ['Partial', 'Full answer.']);
} else {  // the client itself dropped the attempt: nothing for a renderer to hide
  assert.deepEqual(message.parts.map((p) => [p.type, p.text]),
                   [['step-start', undefined], ['text', 'Full answer.']]);
}
assert.equal(visibleText(message), 'Full answer.');

// AG-UI takes it back itself: MESSAGES_SNAPSHOT replaces what the client holds.
const agent = new HttpAgent({ url: `${base}/ag-ui`, threadId: 'reset',
                              initialMessages: [{ id: 'u1', role: 'user', content: 'hi' }] });
await agent.runAgent({ runId: 'run-reset' });
assert.deepEqual(agent.messages.map((m) => [m.role, m.content]),
                 [['user', 'hi'], ['assistant', 'Full answer.']]);
console.log(JSON.stringify({ version, ai: message.parts.map((p) => p.type), agUi: agent.messages }));
