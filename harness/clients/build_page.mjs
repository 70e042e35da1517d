// Bundle the useChat page (use_chat/app.jsx) offline with esbuild into DIR (index.html + app.js),
// for `make demo-ui` to serve beside the API: `node build_page.mjs DIR`.
import fs from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const out = process.argv[2];
if (!out) { process.stderr.write('usage: node build_page.mjs DIR\n'); process.exit(2); }
fs.mkdirSync(out, { recursive: true });
await build({
  entryPoints: [new URL('./use_chat/app.jsx', import.meta.url).pathname], bundle: true,
  outfile: path.join(out, 'app.js'), format: 'esm', minify: true, jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' }, logLevel: 'warning' });
fs.writeFileSync(path.join(out, 'index.html'), PAGE());

function PAGE() {
  return '<!doctype html><meta charset="utf-8"><title>bindloop chat</title>' +
    '<style>body{font:15px system-ui;max-width:42rem;margin:2rem auto}.user{color:#555}' +
    '.tool{font:13px monospace;background:#f3f3f3;padding:.3rem;margin:.3rem 0}</style>' +
    '<div id="root"></div><script type="module" src="/app.js"></script>';
}
