// The official TypeScript SDK's MCP client (npm @modelcontextprotocol/sdk, from the conformance
// suite's install) against an MCP endpoint: lists the tools, calls word_count and a tool with bad
// arguments, and prints one JSON line of what it saw.
//   node mcp_ts_client.mjs <url> <bearer token> <node_modules root>
import path from "node:path";
import { pathToFileURL } from "node:url";

const [url, token, root] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(root, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "ts-sdk-probe", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name).sort();
const counted = await client.callTool({ name: "word_count", arguments: { text: "one two three" } });
const bad = await client.callTool({ name: "word_count", arguments: { text: 7 } });
console.log(JSON.stringify({
  version: transport.protocolVersion ?? null,
  session: transport.sessionId ?? null,
  tools,
  counted: counted.content[0].text,
  bad: { isError: bad.isError === true, text: bad.content[0].text },
}));
await client.close();
