// The official A2A JavaScript SDK's client against an A2A agent at argv[2]: a streamed message,
// the task read back, a blocking message in the same context, an approval answered, and the
// typed errors. Prints one JSON object (what the test reads).
import { ClientFactory } from "@a2a-js/sdk/client";
import { Role } from "@a2a-js/sdk";

const base = process.argv[2];
const client = await new ClientFactory().createFromUrl(base);
let n = 0;
const message = (text, extra = {}) => ({
  message: { messageId: `js-${++n}`, role: Role.ROLE_USER, parts: [{ content: { $case: "text", value: text } }],
             contextId: "", taskId: "", metadata: undefined, extensions: [], referenceTaskIds: [], ...extra },
});
const stateOf = (e) => e.payload.$case === "task" ? e.payload.value.status.state
  : e.payload.$case === "statusUpdate" ? e.payload.value.status.state : null;
const textOf = (task) => task.artifacts.flatMap((a) => a.parts).map((p) => p.content?.value ?? "").join("");
const out = {};

const events = [];
for await (const e of client.sendMessageStream(message("hi"))) events.push(e);
out.streamCases = events.map((e) => e.payload.$case);
out.streamStates = events.map(stateOf).filter((s) => s !== null);
const taskId = events[0].payload.value.id;
const task = await client.getTask({ id: taskId, tenant: "" });
out.task = { state: task.status.state, text: textOf(task) };

const second = await client.sendMessage(message("again", { contextId: task.contextId }));
out.second = { kind: second.payload?.$case ?? "task", state: (second.payload?.value ?? second).status.state,
               sameContext: (second.payload?.value ?? second).contextId === task.contextId,
               text: textOf(second.payload?.value ?? second) };

const asked = await client.sendMessage(message("delete groceries"));
const askedTask = asked.payload?.value ?? asked;
out.asked = { state: askedTask.status.state,
              data: askedTask.status.message.parts.filter((p) => p.content?.$case === "data").map((p) => p.content.value) };
const done = await client.sendMessage(message("yes", { taskId: askedTask.id }));
out.approved = { state: (done.payload?.value ?? done).status.state, text: textOf(done.payload?.value ?? done) };

for (const [name, call] of [["missing", () => client.getTask({ id: "nope", tenant: "" })],
                            ["ended", () => client.cancelTask({ id: taskId, tenant: "", metadata: undefined })]]) {
  try { await call(); out[name] = "no error"; } catch (err) { out[name] = err.constructor.name; }
}
console.log(JSON.stringify(out));
