// A tiny MCP server written with the official TypeScript SDK
// (@modelcontextprotocol/sdk, as tests/mcp/ts/package-lock.json pins it), run
// by modhost as a module through its MCP bridge
// (tests/it/mcp_server_modules.rs): echo, structured output, progress, the
// client's roots, an error, a slow tool (cancellation) and one that reads a
// file by absolute path (the sandbox decides whether it can).
//
// Run as `node tiny_server.mjs` from a folder whose node_modules holds the SDK.

import { readFileSync } from 'node:fs';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'tiny-typescript', version: '1.0.0' });

server.registerTool(
  'echo',
  { description: 'Echo the text back.', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);

server.registerTool(
  'add',
  {
    description: 'Add two integers; the sum comes back as structured content.',
    inputSchema: { a: z.number().int(), b: z.number().int() },
    outputSchema: { sum: z.number().int() },
  },
  async ({ a, b }) => ({
    content: [{ type: 'text', text: JSON.stringify({ sum: a + b }) }],
    structuredContent: { sum: a + b },
  }),
);

server.registerTool(
  'count',
  { description: 'Count to n, reporting progress at each step.', inputSchema: { n: z.number().int() } },
  async ({ n }, extra) => {
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      if (token !== undefined) {
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: n, message: `step ${i}` },
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return { content: [{ type: 'text', text: `counted to ${n}` }] };
  },
);

server.registerTool(
  'roots',
  { description: 'The roots the client offered, one URI a line.' },
  async () => {
    const { roots } = await server.server.listRoots();
    const text = roots.map((root) => root.uri).join('\n') || '(no roots)';
    return { content: [{ type: 'text', text }] };
  },
);

server.registerTool(
  'fail',
  { description: 'Fail on purpose, with a message.', inputSchema: { message: z.string() } },
  async ({ message }) => ({ content: [{ type: 'text', text: message }], isError: true }),
);

server.registerTool(
  'slow',
  { description: 'Sleep for the given seconds, then answer.', inputSchema: { seconds: z.number() } },
  async ({ seconds }) => {
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return { content: [{ type: 'text', text: 'slept' }] };
  },
);

server.registerTool(
  'read_file',
  { description: 'Read a file by absolute path.', inputSchema: { path: z.string() } },
  async ({ path }) => {
    try {
      return { content: [{ type: 'text', text: readFileSync(path, 'utf8') }] };
    } catch (error) {
      return { content: [{ type: 'text', text: `${error.code}: ${error.message}` }], isError: true };
    }
  },
);

await server.connect(new StdioServerTransport());
