// The AI SDK major a client script runs against: the same scripts serve AI SDK 6 (the packages in
// harness/clients/node_modules, the default) and AI SDK 7 (harness/clients/v7/node_modules), chosen by the module
// root a script is given. A bare `import 'ai'` would always resolve next to the script, so the
// packages that differ by major are imported from the root's node_modules by path.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** The module root given on the command line (a directory holding node_modules), else harness/clients/. */
export function moduleRoot(arg) {
  return path.resolve(arg ?? HERE);
}

/** The installed package `name` under `root`: its directory, version and ESM entry point. */
export function packageAt(root, name) {
  const dir = path.join(root, 'node_modules', name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  let entry = pkg.exports?.['.'] ?? pkg.exports;
  while (entry !== null && typeof entry === 'object') {
    entry = entry.import ?? entry.node ?? entry.default;
  }
  entry ??= pkg.module ?? pkg.main ?? 'index.js';
  return { dir, version: pkg.version, url: pathToFileURL(path.join(dir, entry)).href };
}

/** npm `ai` from `root`, with its version: `{ ai, version, major }`. */
export async function loadAi(root) {
  const { url, version } = packageAt(root, 'ai');
  return { ai: await import(url), version, major: Number(version.split('.')[0]) };
}
