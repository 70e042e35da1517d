// node --test harness/wasm/demo/  (make js-test)
import assert from "node:assert/strict";
import { test } from "node:test";
import { megabytes, readableError } from "./errors.js";

const TRACEBACK = [
  "Traceback (most recent call last):",
  '  File "/lib/python3.14/site-packages/bindloop/agent/_prompt.py", line 612, in prompt_chat',
  "    return await self._drive(...)",
  ...Array.from({ length: 50 }, (_, i) => `  File "/x/${i}.py", line ${i}, in f${i}`),
  "bindloop.routing.AttemptError: server_error (HTTP 503) from backup/scripted-model: " +
    "HTTP 503 from http://127.0.0.1:5555/down/backup/v1/chat/completions?key=sk-1: overloaded",
].join("\n");

test("a Python traceback becomes its last line, without the module path or a URL", () => {
  const line = readableError(new Error(TRACEBACK));
  assert.equal(line, "AttemptError: server_error (HTTP 503) from backup/scripted-model: HTTP 503 from <url> overloaded");
  assert.ok(!line.includes("\n") && !line.includes("sk-1") && !line.includes("127.0.0.1"));
});

test("plain errors, strings and long messages", () => {
  assert.equal(readableError(new TypeError("x is not a function")), "x is not a function");
  assert.equal(readableError("boom"), "boom");
  assert.equal(readableError(new Error("")), "unknown error");
  const long = readableError(new Error("E".repeat(500)));
  assert.equal(long.length, 200);
  assert.ok(long.endsWith("…"));
});

test("megabytes", () => {
  assert.equal(megabytes(12_345_678), "12.3");
  assert.equal(megabytes(0), "0.0");
});
