// node --test harness/wasm/demo/turn-stream.test.mjs
// Runs the vectors shared with the Python reducer, plus the JS-only checks.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { TurnStreamReducer, createTurnStreamReducer } from "./turn-stream.js";

const vectors = JSON.parse(
  readFileSync(new URL("../../../tests/textstream/vectors/turn_stream_vectors.json", import.meta.url), "utf8"),
);

function reducerFor(c) {
  const options = {};
  if (c.max_held !== undefined) options.maxHeld = c.max_held;
  if (c.remember_ended !== undefined) options.rememberEnded = c.remember_ended;
  return createTurnStreamReducer(options);
}

test("the vector file has cases", () => {
  assert.ok(vectors.cases.length >= 10);
});

for (const c of vectors.cases) {
  test(`vector: ${c.name}`, () => {
    const reducer = reducerFor(c);
    c.steps.forEach((step, i) => {
      if ("end_turn" in step) {
        reducer.endTurn(step.end_turn);
        return;
      }
      const outcome = reducer.apply(step.apply);
      assert.equal(outcome, step.outcome, `step ${i}: outcome`);
      assert.equal(reducer.text(step.apply.turn_id), step.text, `step ${i}: text`);
    });
    for (const [turnId, expected] of Object.entries(c.final)) {
      const view = reducer.view(turnId);
      if (expected === null) {
        assert.equal(view, null, `${turnId} should have no state`);
      } else {
        assert.deepEqual({ ...view }, { turn_id: turnId, ...expected });
      }
    }
  });
}

test("view is a fresh frozen snapshot per call", () => {
  const reducer = new TurnStreamReducer();
  reducer.apply({ kind: "text", turn_id: "t", epoch: 0, seq: 0, text: "a" });
  const first = reducer.view("t");
  assert.ok(Object.isFrozen(first));
  reducer.apply({ kind: "text", turn_id: "t", epoch: 0, seq: 1, text: "b" });
  const second = reducer.view("t");
  assert.notEqual(first, second);
  assert.equal(first.text, "a");
  assert.equal(second.text, "ab");
});

test("malformed events and options are refused", () => {
  const reducer = new TurnStreamReducer();
  assert.throws(() => reducer.apply({ kind: "text", turn_id: "t", epoch: 0, seq: 0 }), TypeError);
  assert.throws(() => reducer.apply({ kind: "reset", turn_id: "t", epoch: 0, seq: 0, reason: "nope" }), TypeError);
  assert.throws(() => reducer.apply({ kind: "text", turn_id: "t", epoch: 0.5, seq: 0, text: "x" }), TypeError);
  assert.throws(() => reducer.apply(null), TypeError);
  assert.throws(() => new TurnStreamReducer({ maxHeld: 0 }), TypeError);
  assert.throws(() => new TurnStreamReducer({ rememberEnded: Number.NaN }), TypeError);
});

test("turns lists live turns and needsResync reports overflow", () => {
  const reducer = new TurnStreamReducer({ maxHeld: 1 });
  reducer.apply({ kind: "text", turn_id: "a", epoch: 0, seq: 2, text: "x" });
  assert.equal(reducer.apply({ kind: "text", turn_id: "a", epoch: 0, seq: 3, text: "y" }), "resync_needed");
  reducer.apply({ kind: "text", turn_id: "b", epoch: 0, seq: 0, text: "z" });
  assert.deepEqual(reducer.turns, ["a", "b"]);
  assert.equal(reducer.needsResync("a"), true);
  assert.equal(reducer.needsResync("b"), false);
  reducer.endTurn("a");
  assert.deepEqual(reducer.turns, ["b"]);
});
