// The real AI SDK client (npm `ai`, 6 or 7) against bindloop's protocol host:
// `node ai_sdk.mjs BASE_URL [MODULE_ROOT]` (MODULE_ROOT: harness/clients/ for ai@6, the default, or
// harness/clients/v7 for ai@7 on Node 22; see sdk.mjs). Each scenario's final UI message (folded by the
// SDK's own readUIMessageStream) is compared with the one an uninterrupted run gives; ids minted
// per response are normalised first.
import assert from 'node:assert/strict';
import { loadAi, moduleRoot } from './sdk.mjs';

const base = process.argv[2];
const { ai, version, major } = await loadAi(moduleRoot(process.argv[3]));
const { DefaultChatTransport, readUIMessageStream } = ai;
const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
const user = (id, text) => ({ id, role: 'user', parts: [{ type: 'text', text }] });

async function lastMessage(stream, message) {
  let last;
  for await (const m of readUIMessageStream({ stream, message, terminateOnError: true })) last = m;
  return last;
}

// Message ids are per response: compare shapes with each response's own id replaced.
const norm = (m) => JSON.parse(JSON.stringify(m).replaceAll(m.id, 'MSG'));

async function send(chatId, messages, abortSignal) {
  return transport.sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined,
                                  abortSignal });
}

const results = { ai: version };

// 1. an uninterrupted run: text, reasoning, a tool round, usage in the metadata.
const prompt = [user('u1', 'count the words of this sentence please')];
const whole = await lastMessage(await send('chat-whole', prompt));
assert.equal(whole.role, 'assistant');
const kinds = whole.parts.map((p) => p.type);
assert.deepEqual(kinds, ['step-start', 'text', 'tool-word_count', 'step-start', 'text']);
assert.equal(whole.parts[2].state, 'output-available');
assert.equal(whole.parts[2].output, '6');
assert.equal(whole.parts[4].text, 'The tool answered: 6.');
assert.ok(whole.metadata.usage.totalTokens > 0);
results.whole = norm(whole);

// 1b. the message goes back with the next user message: the server decodes it into the very
//     transcript the model saw (the pytest side compares them), and the answer follows.
{
  const next = [...prompt, whole, user('u9', 'thanks')];
  const reply = await lastMessage(await send('chat-follow', next));
  assert.equal(reply.parts.at(-1).text, 'You said: thanks. That is 1 words, and I have nothing to add.');
}

// 2. the connection cut mid-stream, then reconnectToStream (the SDK's GET .../stream).
{
  const abort = new AbortController();
  const stream = await send('chat-cut', prompt, abort.signal);
  const reader = stream.getReader();
  let seen = 0;
  while (seen < 6) { const { done } = await reader.read(); if (done) break; seen += 1; }
  abort.abort();
  await reader.cancel().catch(() => {});
  const again = await transport.reconnectToStream({ chatId: 'chat-cut' });
  assert.notEqual(again, null, 'the run was still going: the reconnect must get a stream');
  const resumed = await lastMessage(again);
  assert.deepEqual(norm(resumed), results.whole);
  results.cutSeen = seen;
}

// 3. nothing running: reconnectToStream gets 204, which the SDK reads as null.
assert.equal(await transport.reconnectToStream({ chatId: 'chat-whole' }), null);
assert.equal(await transport.reconnectToStream({ chatId: 'never-seen' }), null);

// 4. a tool that needs approval: the request ends at approval-requested; the approval is sent back
//    as the SDK's addToolApprovalResponse would, and the same message goes on to the answer.
{
  const ask = [user('u2', 'delete groceries')];
  const pending = await lastMessage(await send('chat-approve', ask));
  const part = pending.parts.find((p) => p.type === 'tool-delete_note');
  assert.equal(part.state, 'approval-requested');
  // why it waits (the chunk's reason): AI SDK 7 shows it as requestReason, 6 ignores it.
  assert.equal(part.approval.requestReason, major >= 7 ? 'approve delete_note?' : undefined);
  assert.equal(pending.metadata.usage.totalTokens > 0, true);
  const answered = { ...pending, parts: pending.parts.map((p) => p === part
    ? { ...p, state: 'approval-responded', approval: { ...p.approval, approved: true } } : p) };
  const stream = await send('chat-approve', [...ask, answered]);
  const done = await lastMessage(stream, structuredClone(answered));
  assert.equal(done.id, pending.id, 'the response continues the same assistant message');
  const tool = done.parts.find((p) => p.type === 'tool-delete_note');
  assert.equal(tool.state, 'output-available');
  assert.equal(tool.output, "deleted 'groceries'");
  assert.equal(done.parts.at(-1).text, "The tool answered: deleted 'groceries'.");
  results.approved = norm(done);

  // denied: the call ends as output-denied and the model reads the refusal.
  const ask2 = [user('u3', 'delete taxes')];
  const pending2 = await lastMessage(await send('chat-deny', ask2));
  const part2 = pending2.parts.find((p) => p.type === 'tool-delete_note');
  const refused = { ...pending2, parts: pending2.parts.map((p) => p === part2
    ? { ...p, state: 'approval-responded', approval: { ...p.approval, approved: false,
                                                         reason: 'keep it' } } : p) };
  const denied = await lastMessage(await send('chat-deny', [...ask2, refused]),
                                   structuredClone(refused));
  assert.equal(denied.parts.find((p) => p.type === 'tool-delete_note').state, 'output-denied');
  assert.match(denied.parts.at(-1).text, /keep it/);
}

// 5. arguments that are not JSON: the call fails before it runs (tool-input-error, then the
//    tool's error). AI SDK 7 keeps the raw arguments as the part's input, 6 as its rawInput; the
//    message goes back with the next user message (the pytest side checks the model reads its
//    own arguments again).
{
  const ask = [user('u4', 'garble two words')];
  const failed = await lastMessage(await send('chat-garble', ask));
  const part = failed.parts.find((p) => p.type === 'tool-word_count');
  assert.equal(part.state, 'output-error');
  assert.match(part.errorText, /not valid JSON/);
  const raw = '{"text": "two words';
  assert.deepEqual([part.input, part.rawInput], major >= 7 ? [raw, undefined] : [undefined, raw]);
  const reply = await lastMessage(await send('chat-garble', [...ask, failed, user('u5', 'and now?')]));
  assert.match(reply.parts.at(-1).text, /^You said: and now\?/);
  results.garbled = norm(failed);
}

// 6. stop: the explicit stop endpoint ends a running response with `abort`.
{
  const stream = await send('chat-stop', prompt);
  const reader = stream.getReader();
  const chunks = [];
  const first = await reader.read();
  chunks.push(first.value);
  const stop = await fetch(`${base}/api/chat/chat-stop/stop`, { method: 'POST' });
  assert.equal(stop.status, 200);
  for (;;) { const { done, value } = await reader.read(); if (done) break; chunks.push(value); }
  assert.equal(chunks.at(-1).type, 'abort');
}

console.log(JSON.stringify(results));
