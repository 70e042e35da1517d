// The browser half of bindloop's turn text stream: renders the events that
// `bindloop.textstream.create_turn_text_stream` emits, on a transport that may
// reorder or duplicate them. The same reducer exists in Python
// (`bindloop.textstream.TurnStreamReducer`); both run the JSON vectors in
// tests/textstream/vectors/turn_stream_vectors.json.
//
// Events on the wire (field names as bindloop encodes them):
//   { kind: "text",  turn_id, epoch, seq, text }
//   { kind: "reset", turn_id, epoch, seq, reason }
//
// Rules, in this order (each key does a job the others cannot):
//   1. scope everything to turn_id — epoch and seq restart every turn;
//   2. apply in seq order — drop seq <= last applied, hold early ones (bounded);
//   3. drop an event whose epoch is older than the newest applied; a reset
//      clears the rendering.
// Without (2) a retry's text that overtakes its own reset is applied and then
// wiped by it; without (3) a wiped attempt's tail is glued onto the retry.

/**
 * Outcomes of `apply`:
 *  "applied"       in order, rendering changed (unblocked held events applied too)
 *  "held"          arrived ahead of a gap; waits for it to fill
 *  "duplicate"     seq already applied or already held
 *  "stale"         in order but from an older attempt; dropped
 *  "resync_needed" hold buffer overflowed (now or earlier): resync this turn
 *                  from the persisted message instead of waiting forever
 *  "ended"         the turn already got its final signal (endTurn)
 */

const KINDS = new Set(["text", "reset"]);
const REASONS = new Set(["attempt_failed", "structured_output_retry"]);

function checkEvent(event) {
  const ok =
    event !== null &&
    typeof event === "object" &&
    KINDS.has(event.kind) &&
    typeof event.turn_id === "string" &&
    Number.isInteger(event.epoch) &&
    Number.isInteger(event.seq) &&
    (event.kind === "text" ? typeof event.text === "string" : REASONS.has(event.reason));
  if (!ok) {
    throw new TypeError(`not a turn stream event: ${JSON.stringify(event)}`);
  }
}

function positiveInteger(name, value) {
  if (!Number.isInteger(value) || value < 1) {
    throw new TypeError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

export class TurnStreamReducer {
  #maxHeld;
  #rememberEnded;
  #turns = new Map();
  // Insertion-ordered, bounded: a late event must not resurrect an ended turn.
  #ended = new Map();

  constructor({ maxHeld = 256, rememberEnded = 1024 } = {}) {
    this.#maxHeld = positiveInteger("maxHeld", maxHeld);
    this.#rememberEnded = positiveInteger("rememberEnded", rememberEnded);
  }

  /** Apply one event (an object, e.g. from JSON.parse). Returns an outcome string. */
  apply(event) {
    checkEvent(event);
    const turnId = event.turn_id;
    if (this.#ended.has(turnId)) return "ended";
    let turn = this.#turns.get(turnId);
    if (turn === undefined) {
      // lastSeq starts at -1: seq starts at 0, so seeding 0 would drop the
      // first delta of every turn.
      turn = { lastSeq: -1, newestEpoch: -1, text: "", held: new Map(), resyncNeeded: false };
      this.#turns.set(turnId, turn);
    }
    if (turn.resyncNeeded) return "resync_needed";
    if (event.seq <= turn.lastSeq) return "duplicate";
    if (event.seq > turn.lastSeq + 1) {
      if (turn.held.has(event.seq)) return "duplicate";
      if (turn.held.size >= this.#maxHeld) {
        turn.resyncNeeded = true;
        turn.held.clear();
        return "resync_needed";
      }
      turn.held.set(event.seq, event);
      return "held";
    }
    const applied = applyInOrder(turn, event);
    for (let next = turn.held.get(turn.lastSeq + 1); next !== undefined; next = turn.held.get(turn.lastSeq + 1)) {
      turn.held.delete(next.seq);
      applyInOrder(turn, next);
    }
    return applied ? "applied" : "stale";
  }

  /** The turn's final signal (persisted message landed): drop its state. */
  endTurn(turnId) {
    this.#turns.delete(turnId);
    this.#ended.delete(turnId);
    this.#ended.set(turnId, true);
    while (this.#ended.size > this.#rememberEnded) {
      this.#ended.delete(this.#ended.keys().next().value);
    }
  }

  /** What the turn renders now, or null for a turn with no state. */
  text(turnId) {
    const turn = this.#turns.get(turnId);
    return turn === undefined ? null : turn.text;
  }

  /**
   * A fresh frozen snapshot per call (a store comparing by identity re-renders).
   * Key the element by turnId, never by epoch: keying by epoch turns every
   * reset into an unmount that loses focus, selection and scroll.
   */
  view(turnId) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) return null;
    return Object.freeze({
      turn_id: turnId,
      text: turn.text,
      epoch: turn.newestEpoch,
      last_seq: turn.lastSeq,
      held: turn.held.size,
      resync_needed: turn.resyncNeeded,
    });
  }

  needsResync(turnId) {
    const turn = this.#turns.get(turnId);
    return turn !== undefined && turn.resyncNeeded;
  }

  /** Turn ids with live state, in first-seen order. */
  get turns() {
    return [...this.#turns.keys()];
  }
}

function applyInOrder(turn, event) {
  turn.lastSeq = event.seq;
  if (event.epoch < turn.newestEpoch) return false;
  turn.newestEpoch = event.epoch;
  turn.text = event.kind === "reset" ? "" : turn.text + event.text;
  return true;
}

export function createTurnStreamReducer(options) {
  return new TurnStreamReducer(options);
}
