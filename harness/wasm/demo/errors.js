// What the page shows when a run fails: one readable line, not the ~60-line Python traceback a
// PythonError carries as its message (the whole traceback still goes to the console).
//
//   readableError(err) -> "AttemptError: server_error (HTTP 503) from backup/scripted-model"
//
// A Python exception's message ends with "package.module.Type: what happened": that line is kept,
// without the module path; URLs are replaced by <url> (a provider's address is not the user's
// business and can carry a key); at most 200 characters.

const URL_RE = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;
const MODULE_PATH = /^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*:)/;

export function readableError(err) {
  const text = String(err && typeof err === "object" && "message" in err ? err.message : err);
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  let line = lines.length ? lines[lines.length - 1] : "unknown error";
  line = line.replace(MODULE_PATH, "").replace(URL_RE, "<url>");
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

export function megabytes(bytes) {
  return (bytes / 1e6).toFixed(1);
}
