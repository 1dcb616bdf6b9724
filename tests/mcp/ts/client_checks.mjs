// Drive `modhost mcp` with the official TypeScript MCP SDK
// (@modelcontextprotocol/sdk, the version package-lock.json pins), as
// tests/it/mcp_clients.rs runs it: the same checks as ../client_checks.py
// (handshake, tools/list, a call, an error call, progress, cancellation,
// roots, an elicited approval, list_changed after `modhost disable` in
// another process). The SDK speaks the initialize handshake only
// (2025-11-25 and older); it has no server/discover.
//
// With `--http URL` it connects over streamable HTTP to a `modhost mcp
// --http` already serving the same home at URL (tests/it/mcp_http_clients.rs)
// instead of starting `modhost mcp` on stdio; the roots check is stdio's
// only (over HTTP the client's roots name the client's folders, never the
// server's workspace), and list_changed arrives on the session's GET stream.
//
// Environment: MODHOST_BIN, MODHOST_HOME, MODHOST_TEST_WORKSPACE,
// MODHOST_TEST_ROOT, HANG_INSTALLED, and optionally ASK_TOOL and
// ASK_EXECUTIONS (see ../client_checks.py).
// Exits 0 when every check passes, 1 otherwise.

import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { pathToFileURL } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ToolListChangedNotificationSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (tests/it/mcp_clients.rs sets it)`);
  return value;
};
const MODHOST = env('MODHOST_BIN');
const HOME = env('MODHOST_HOME');
const WORKSPACE = env('MODHOST_TEST_WORKSPACE');
const ROOT = env('MODHOST_TEST_ROOT');
const HANG = env('HANG_INSTALLED');
const ROOT_MARKER = 'rootonly-7f3a';
const ASK_TOOL = process.env.ASK_TOOL || 'net__net_fetch';
const ASK_EXECUTIONS = process.env.ASK_EXECUTIONS || null;
// `--http URL`: a `modhost mcp --http` serving the same home; else stdio.
const HTTP_URL = process.argv.includes('--http') ? process.argv[process.argv.indexOf('--http') + 1] : null;
const STEP_TIMEOUT_MS = 60_000;
const TOLD_WITHIN_MS = 20_000;
const SDK_VERSION = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url)),
).version;

const failures = [];
function check(condition, what) {
  console.log(`${condition ? 'ok    ' : 'FAIL  '}[ts sdk ${SDK_VERSION}, ${HTTP_URL ? 'http' : 'stdio'}] ${what}`);
  if (!condition) failures.push(what);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function waitUntil(predicate, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (predicate()) return true;
    await sleep(50);
  }
  return predicate();
}

function modhost(...args) {
  return spawnSync(MODHOST, ['--home', HOME, '--workspace', WORKSPACE, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: STEP_TIMEOUT_MS,
  });
}

/** Pids running the installed module `path` or its approved snapshot. */
function processesRunning(path) {
  const snapshots = join(dirname(dirname(dirname(path))), 'cache', 'snapshots') + '/';
  const name = '/' + basename(path);
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv0 = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0')[0];
      const status = readFileSync(`/proc/${entry}/status`, 'latin1');
      const matches = argv0 === path || (argv0.startsWith(snapshots) && argv0.endsWith(name));
      if (matches && !status.includes('State:\tZ')) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** How many times the ask module started, when the test counts them. */
function askExecutions() {
  if (!ASK_EXECUTIONS) return null;
  try {
    return readFileSync(ASK_EXECUTIONS, 'utf8').split('\n').filter((l) => l).length;
  } catch {
    return 0;
  }
}

const textOf = (result) => (result.content ?? []).map((c) => c.text ?? '').join('\n');

/** The approving answer a user gives to the form the server asks. */
function approvingContent(schema) {
  const content = {};
  for (const [key, prop] of Object.entries(schema?.properties ?? {})) {
    const choices = prop.enum ?? (prop.oneOf ?? []).map((o) => o.const).filter((c) => c !== undefined);
    if (choices.length) {
      const approving = choices.filter((c) => /once|approve|allow|yes/i.test(String(c)));
      content[key] = (approving.length ? approving : choices)[0];
    } else if (prop.type === 'boolean') content[key] = true;
    else if (prop.type === 'number' || prop.type === 'integer') content[key] = 1;
    else content[key] = 'yes';
  }
  return content;
}

async function main() {
  const transport = HTTP_URL
    ? new StreamableHTTPClientTransport(new URL(HTTP_URL))
    : new StdioClientTransport({
      command: MODHOST,
      args: ['--home', HOME, '--workspace', WORKSPACE, 'mcp'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stderr: 'ignore',
    });
  // Every message from the server, as the SDK receives it.
  const received = [];
  let deliver;
  Object.defineProperty(transport, 'onmessage', {
    get: () => deliver && ((message, extra) => { received.push(message); deliver(message, extra); }),
    set: (handler) => { deliver = handler; },
  });

  const client = new Client(
    { name: 'modhost-ts-check', version: '0' },
    { capabilities: { roots: { listChanged: true }, elicitation: { form: {} } } },
  );
  const elicitations = [];
  let answer = 'accept';
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitations.push(request.params);
    if (answer !== 'accept') return { action: answer };
    return { action: 'accept', content: approvingContent(request.params.requestedSchema) };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: pathToFileURL(ROOT).href, name: 'client root' }],
  }));
  let listChanged = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    listChanged += 1;
  });

  const options = { timeout: STEP_TIMEOUT_MS };
  const call = async (name, args, extra = {}) => {
    try {
      return await client.callTool({ name, arguments: args }, undefined, { ...options, ...extra });
    } catch (e) {
      return { isError: true, rpcError: true, content: [{ type: 'text', text: String(e?.message ?? e) }] };
    }
  };

  await client.connect(transport, options);
  const init = received.find((m) => m.result?.protocolVersion);
  const version = init?.result?.protocolVersion;
  check(SUPPORTED_PROTOCOL_VERSIONS.includes(version), `initialize negotiated ${version}`);
  check(client.getServerVersion()?.name === 'modhost', 'serverInfo names modhost');
  check(client.getServerCapabilities()?.tools?.listChanged === true, 'the server declares tools.listChanged');

  const names = (await client.listTools(undefined, options)).tools.map((t) => t.name);
  for (const name of ['files__files_search', 'files__files_list', 'hang__hang_run', 'slow__slow_count']) {
    check(names.includes(name), `tools/list offers ${name}`);
  }
  check(!names.includes('modhost__knowledge'), 'no module ships knowledge, so modhost__knowledge is not offered');
  check(names.includes(ASK_TOOL), `tools/list offers the ask tool ${ASK_TOOL} to a client that can be asked`);

  const listed = await call('files__files_list', {});
  check(!listed.isError, `a call succeeds: ${textOf(listed).slice(0, 200)}`);

  const bad = await call('files__files_list', { no_such_argument: 1 });
  check(bad.isError === true && textOf(bad).includes('no_such_argument'), 'a schema-violating call is an isError result naming the problem');

  const reports = [];
  const counted = await call('slow__slow_count', {}, { onprogress: (p) => reports.push([p.progress, p.total]) });
  check(!counted.isError, 'the progress-reporting call succeeds');
  await waitUntil(() => reports.length >= 2, 5000);
  // The SDK handles a response at once but a notification a microtask
  // later, and forgets the progress handler with the response: a report
  // that arrived in the same read as the response is dropped by the SDK
  // ("unknown token"); the module answers a little after its reports, and
  // what the server sent is checked on the transport.
  const sent = received.filter((m) => m.method === 'notifications/progress').map((m) => [m.params.progress, m.params.total]);
  check(JSON.stringify(sent) === '[[1,2],[2,2]]', `the server sent both progress reports with the request's token (${JSON.stringify(sent)})`);
  check(reports.length >= 1, `progress reached the SDK's onprogress (${JSON.stringify(reports)})`);

  if (!HTTP_URL) {
    let hits = '';
    const rootDeadline = Date.now() + 20_000;
    while (Date.now() < rootDeadline) {
      hits = textOf(await call('files__files_search', { pattern: ROOT_MARKER }));
      if (hits.includes('only-in-root.txt')) break;
      await sleep(200);
    }
    check(hits.includes('only-in-root.txt'), `the client's root is the workspace: files.search finds a file only there (${hits.slice(0, 200)})`);
  }

  answer = 'accept';
  const before = askExecutions();
  const approved = await call(ASK_TOOL, {});
  check(elicitations.length === 1, `calling an ask tool elicits the user once (${elicitations.length})`);
  check(!approved.isError && approved.structuredContent?.ran === true, `approved, the ask tool ran (${textOf(approved).slice(0, 200)})`);
  if (before !== null) {
    check(askExecutions() === before + 1, `approved, the ask module started exactly once (${before} -> ${askExecutions()})`);
  }
  answer = 'decline';
  const declined = await call(ASK_TOOL, {});
  check(elicitations.length === 2, 'each call asks again (approve once)');
  check(declined.isError === true && declined.structuredContent?.ran === undefined, `declined, the ask tool did not run (${textOf(declined).slice(0, 200)})`);
  if (before !== null) {
    await sleep(500); // a start the refusal raced would show by now
    check(askExecutions() === before + 1, `declined, the ask module never started (${before + 1} -> ${askExecutions()})`);
  }

  // Cancellation: the SDK sends notifications/cancelled when the signal aborts.
  const controller = new AbortController();
  const slow = call('hang__hang_run', {}, { signal: controller.signal });
  check(await waitUntil(() => processesRunning(HANG).length > 0, STEP_TIMEOUT_MS), "the slow call's module process is running");
  controller.abort('test cancel');
  await slow;
  check(await waitUntil(() => processesRunning(HANG).length === 0, STEP_TIMEOUT_MS), 'cancelling the call killed the module process');

  listChanged = 0;
  const disabled = modhost('disable', 'files');
  check(disabled.status === 0, `modhost disable files in another process (${disabled.stderr})`);
  check(await waitUntil(() => listChanged > 0, TOLD_WITHIN_MS), 'notifications/tools/list_changed after modhost disable');
  const after = (await client.listTools(undefined, options)).tools.map((t) => t.name);
  check(!after.some((n) => n.startsWith('files__')), `the next tools/list lacks the disabled module's tools (${after})`);
  const refused = await call('files__files_list', {});
  check(refused.isError === true && textOf(refused).includes('modhost enable files'), `a call of a disabled tool is refused with the reason (${textOf(refused).slice(0, 200)})`);
  modhost('enable', 'files');

  await client.close();
}

try {
  await main();
} catch (e) {
  console.error(e);
  check(false, `the session ended with ${e?.message ?? e}`);
} finally {
  for (const pid of processesRunning(HANG)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
}
if (failures.length) {
  console.log(`\n${failures.length} check(s) failed:`);
  for (const f of failures) console.log(`  - ${f}`);
  process.exit(1);
}
console.log('\nall MCP client checks passed');
process.exit(0);
