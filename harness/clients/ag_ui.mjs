// The real AG-UI client (npm @ag-ui/client: HttpAgent, whose pipeline verifies the event sequence)
// against bindloop's protocol host: `node ag_ui.mjs BASE_URL`. The messages the agent ends with are
// compared with an uninterrupted run's; ids carrying the client's random run id are normalised.
import assert from 'node:assert/strict';
import { HttpAgent, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';

const base = process.argv[2];
process.env.SUPPRESS_TRANSFORMATION_WARNINGS = 'true';

// HttpAgent has no reconnect of its own; connect() is AbstractAgent's hook for one, so this reads
// the host's GET /ag-ui/{threadId}/stream through the client's own HTTP event pipeline.
class ResumingAgent extends HttpAgent {
  connect(input) {
    const url = `${base}/ag-ui/${encodeURIComponent(input.threadId)}/stream`;
    return transformHttpEventStream(runHttpRequest(() => fetch(url, {
      headers: { Accept: 'text/event-stream' } })));
  }
}

const userMsg = (id, content) => ({ id, role: 'user', content });
const agentFor = (threadId, messages, Cls = HttpAgent) =>
  new Cls({ url: `${base}/ag-ui`, threadId, initialMessages: structuredClone(messages) });
const norm = (messages, runId) => JSON.parse(JSON.stringify(messages).replaceAll(runId, 'RUN'));

const results = {};
const prompt = [userMsg('u1', 'count the words of this sentence please')];

// 1. an uninterrupted run: a tool round, then the answer.
{
  const agent = agentFor('t-whole', prompt);
  let finished;
  await agent.runAgent({ runId: 'run-whole' }, {
    onRunFinishedEvent: ({ event }) => { finished = event; } });
  const roles = agent.messages.map((m) => m.role);
  assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant']);
  assert.equal(agent.messages[1].toolCalls[0].function.name, 'word_count');
  assert.equal(agent.messages[2].content, '6');
  assert.equal(agent.messages[3].content, 'The tool answered: 6.');
  assert.ok(finished.usage[0].totalTokens > 0);
  results.whole = norm(agent.messages, 'run-whole');
  // the conversation goes back with the next message: the pytest side checks that the server
  // decodes it into the transcript the model saw.
  agent.addMessage(userMsg('u9', 'thanks'));
  await agent.runAgent({ runId: 'run-follow' });
  assert.equal(agent.messages.at(-1).content,
               'You said: thanks. That is 1 words, and I have nothing to add.');
}

// 2. the connection cut mid-run (abortRun after a few events), then a new client connects to the
//    thread's running stream (replayed from the start) and ends with the same messages.
{
  const agent = agentFor('t-cut', prompt);
  let seen = 0;
  let finishedBeforeCut = false;
  await agent.runAgent({ runId: 'run-cut' }, {
    onEvent: () => { seen += 1; if (seen === 4) agent.abortRun(); },
    onRunFinishedEvent: () => { finishedBeforeCut = true; } }).catch(() => {});
  assert.equal(finishedBeforeCut, false, 'the cut client never saw the run finish');
  const again = agentFor('t-cut', prompt, ResumingAgent);
  await again.connectAgent({ runId: 'run-cut' });
  assert.deepEqual(norm(again.messages, 'run-cut'), results.whole);
  results.cutSeen = seen;
}

// 3. approval as an interrupt: RUN_FINISHED carries outcome "interrupt"; the next run resumes it.
{
  const agent = agentFor('t-approve', [userMsg('u2', 'delete groceries')]);
  let outcome;
  await agent.runAgent({ runId: 'run-ask' }, {
    onRunFinishedEvent: ({ event }) => { outcome = event.outcome; } });
  assert.equal(outcome.type, 'interrupt');
  const [interrupt] = outcome.interrupts;
  assert.equal(interrupt.reason, 'approval');
  await agent.runAgent({ runId: 'run-resume', resume: [
    { interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
  const last = agent.messages.at(-1);
  assert.equal(last.role, 'assistant');
  assert.equal(last.content, "The tool answered: deleted 'groceries'.");
  const result = agent.messages.find((m) => m.role === 'tool');
  assert.equal(result.content, "deleted 'groceries'");
}

// 4. a client-declared tool: the model calls it, the run finishes with it pending, the client
//    answers with a tool message and the next run reads it; the state the client holds comes back
//    as the run's STATE_SNAPSHOT.
{
  const tools = [{ name: 'pick_option', description: 'Let the user pick one option.',
                   parameters: { type: 'object', properties: { options: { type: 'array' } } } }];
  const agent = agentFor('t-client-tool', [userMsg('u3', 'pick red blue')]);
  agent.setState({ theme: 'dark' });
  let outcome;
  let snapshot;
  await agent.runAgent({ runId: 'run-pick', tools }, {
    onStateSnapshotEvent: ({ event }) => { snapshot = event.snapshot; },
    onRunFinishedEvent: ({ event }) => { outcome = event.outcome; } });
  assert.deepEqual(snapshot, { theme: 'dark' });
  const call = agent.messages.at(-1).toolCalls[0];
  assert.equal(call.function.name, 'pick_option');
  assert.deepEqual(outcome, { type: 'success', pendingToolCallIds: [call.id] });
  agent.addMessage({ id: 'answer-1', role: 'tool', toolCallId: call.id, content: 'blue' });
  await agent.runAgent({ runId: 'run-picked', tools });
  assert.equal(agent.messages.at(-1).content, 'The tool answered: blue.');
}

// 5. stop: the stop endpoint ends the run with the cancelled outcome.
{
  const agent = agentFor('t-stop', prompt);
  let outcome;
  let stopped = false;
  await agent.runAgent({ runId: 'run-stop' }, {
    onEvent: async () => {
      if (!stopped) {
        stopped = true;
        const r = await fetch(`${base}/ag-ui/t-stop/stop`, { method: 'POST' });
        assert.equal(r.status, 200);
      }
    },
    onRunFinishedEvent: ({ event }) => { outcome = event.outcome; } });
  assert.equal(outcome.type, 'cancelled');
}

console.log(JSON.stringify(results));
