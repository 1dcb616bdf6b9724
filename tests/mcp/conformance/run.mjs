// Run the official MCP conformance suite (@modelcontextprotocol/conformance,
// the version package-lock.json pins) in server mode against one streamable
// HTTP MCP endpoint, for each protocol revision asked for, and judge the
// result: every scenario that applies to modhost must pass, check by check.
//
//   node_modules/.bin/node run.mjs --url http://127.0.0.1:8750/mcp \
//        [--revision 2026-07-28] [--revision 2025-11-25] [--out DIR]
//
// tests/it/mcp_http_clients.rs runs it against `modhost mcp --http` on a test
// home with the bundled modules; run it by hand against any server the same
// way (the suite needs Node 22, which `npm ci` here installs as the `node`
// package: run this script with node_modules/.bin/node).
//
// What "applies" means. The suite's server scenarios mostly call its own
// fixture tools, prompts and resources by name (`test_simple_text`,
// `test_prompt_with_arguments`, `test://static-text`, ...). modhost names every
// tool `<module>__<capability>` (conformance/src/tool_name.rs), so a tool
// called `test_simple_text` cannot exist on it, and it offers no prompts,
// resources, completions or logging (it declares only `tools`). The tables
// below say, for each revision, which scenarios run, which do not and why,
// and which single checks of a running scenario cannot apply (they name a
// fixture tool) with the exact message the suite gives for that. Anything
// else that is not SUCCESS, INFO or SKIPPED fails the run, warnings (the
// suite's SHOULDs) included: a new failure, a check that newly needs a
// fixture, or a scenario a new suite version added that the tables do not
// place yet (every scenario the suite lists for a revision must be in
// exactly one table). SKIPPED is the suite's own verdict that a check does
// not apply (a capability the server does not declare, a DELETE answered
// 405); each is printed with its reason.
//
// Exit 0 when every applicable check passed, 1 otherwise; the last line says
// which. Per scenario the suite's own output and checks.json are kept under
// --out (default: a fresh temporary folder, printed).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const SUITE = join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const SUITE_VERSION = (() => {
  try {
    return JSON.parse(readFileSync(join(here, 'node_modules/@modelcontextprotocol/conformance/package.json'))).version;
  } catch {
    return null;
  }
})();

const HANDSHAKE = '2025-11-25';
const STATELESS = '2026-07-28';

// Why a fixture-only scenario cannot run against modhost.
const FIXTURE_TOOL = (name) =>
  `calls the suite's fixture tool \`${name}\`; modhost names every tool <module>__<capability>, so no tool can have that name`;
const NO_PROMPTS = 'needs the suite\'s fixture prompts; modhost offers no prompts (it declares only the tools capability)';
const NO_RESOURCES = 'needs resources; modhost offers no resources (it declares only the tools capability)';

/** Scenarios that run, per revision, and why each matters. */
const APPLICABLE = {
  [HANDSHAKE]: {
    'server-initialize': 'the initialize handshake over HTTP; a session id of visible ASCII',
    'server-session-lifecycle': 'Mcp-Session-Id: DELETE ends the session, a request naming it afterwards gets 404',
    ping: 'ping answers {}',
    'tools-list': 'every tool has a name of the allowed alphabet, a description and an inputSchema',
    'server-sse-multiple-streams': 'three concurrent POSTs of one session each get their own answer',
    'dns-rebinding-protection': 'a foreign Host/Origin is refused with 4xx, the loopback one served',
  },
  [STATELESS]: {
    'server-stateless': 'per-request _meta checked (-32602, HTTP 400), server/discover, unsupported versions, header mismatch (-32020), removed methods 404/-32601, subscriptions/listen acknowledgement, subscription ids and filters, error ids',
    'tools-list': 'every tool has a name of the allowed alphabet, a description and an inputSchema',
    'server-sse-multiple-streams': 'three concurrent POSTs each get their own answer',
    'dns-rebinding-protection': 'a foreign Host/Origin is refused with 4xx, the loopback one served',
    caching: 'tools/list carries ttlMs and cacheScope',
    'input-required-result-unsupported-methods': 'tools/list never answers with input_required',
    'http-header-validation': 'Mcp-Method / Mcp-Name checked against the body: 400 and -32020 on a mismatch, header names case-insensitive, values trimmed (the suite marks it pending only because its own fixture server fails it)',
  },
};

/** Scenarios the suite has for a revision that do not apply, and why. */
const NOT_APPLICABLE = {
  [HANDSHAKE]: {
    'logging-set-level': 'modhost declares no logging capability (logging/setLevel is -32601, as for any server without it)',
    'completion-complete': 'completes an argument of the fixture prompt `test_prompt_with_arguments`; modhost offers no prompts or completions',
    'tools-call-simple-text': FIXTURE_TOOL('test_simple_text'),
    'tools-call-image': FIXTURE_TOOL('test_image_content'),
    'tools-call-audio': FIXTURE_TOOL('test_audio_content'),
    'tools-call-embedded-resource': FIXTURE_TOOL('test_embedded_resource'),
    'tools-call-mixed-content': FIXTURE_TOOL('test_multiple_content_types'),
    'tools-call-with-logging': FIXTURE_TOOL('test_tool_with_logging'),
    'tools-call-error': FIXTURE_TOOL('test_error_handling'),
    'tools-call-with-progress': FIXTURE_TOOL('test_tool_with_progress') + ' (progress over HTTP is checked by the SDK clients in tests/it/mcp_http_clients.rs)',
    'tools-call-sampling': FIXTURE_TOOL('test_sampling') + '; modhost never samples',
    'tools-call-elicitation': FIXTURE_TOOL('test_elicitation') + ' (modhost\'s own elicitation, the approval of an ask tool, is checked by the SDK clients)',
    'json-schema-2020-12': FIXTURE_TOOL('json_schema_2020_12_tool'),
    'elicitation-sep1034-defaults': FIXTURE_TOOL('test_elicitation_sep1034_defaults'),
    'elicitation-sep1330-enums': FIXTURE_TOOL('test_elicitation_sep1330_enums'),
    'server-sse-polling': FIXTURE_TOOL('test_reconnection') + ' (it closes the stream mid-call; modhost cancels a call whose stream closes)',
    'resources-list': NO_RESOURCES,
    'resources-read-text': NO_RESOURCES,
    'resources-read-binary': NO_RESOURCES,
    'resources-templates-read': NO_RESOURCES,
    'resources-subscribe': NO_RESOURCES,
    'resources-unsubscribe': NO_RESOURCES,
    'prompts-list': NO_PROMPTS,
    'prompts-get-simple': NO_PROMPTS,
    'prompts-get-with-args': NO_PROMPTS,
    'prompts-get-embedded-resource': NO_PROMPTS,
    'prompts-get-with-image': NO_PROMPTS,
  },
  [STATELESS]: {
    'completion-complete': 'completes an argument of the fixture prompt `test_prompt_with_arguments`; modhost offers no prompts or completions',
    'tools-call-simple-text': FIXTURE_TOOL('test_simple_text'),
    'tools-call-image': FIXTURE_TOOL('test_image_content'),
    'tools-call-audio': FIXTURE_TOOL('test_audio_content'),
    'tools-call-embedded-resource': FIXTURE_TOOL('test_embedded_resource'),
    'tools-call-mixed-content': FIXTURE_TOOL('test_multiple_content_types'),
    'tools-call-error': FIXTURE_TOOL('test_error_handling'),
    'tools-call-with-progress': FIXTURE_TOOL('test_tool_with_progress') + ' (progress over HTTP is checked by the SDK clients)',
    'json-schema-2020-12': FIXTURE_TOOL('json_schema_2020_12_tool'),
    'resources-list': NO_RESOURCES,
    'resources-read-text': NO_RESOURCES,
    'resources-read-binary': NO_RESOURCES,
    'resources-templates-read': NO_RESOURCES,
    'sep-2164-resource-not-found': NO_RESOURCES + '; resources/read is -32601',
    'prompts-list': NO_PROMPTS,
    'prompts-get-simple': NO_PROMPTS,
    'prompts-get-with-args': NO_PROMPTS,
    'prompts-get-embedded-resource': NO_PROMPTS,
    'prompts-get-with-image': NO_PROMPTS,
    'http-custom-header-server-validation': 'needs a tool whose input schema marks a parameter `x-mcp-header`; no modhost tool declares one',
    'input-required-result-basic-elicitation': FIXTURE_TOOL('test_input_required_result_elicitation') + ' (modhost\'s input_required approval is checked by the Python mcp 2.x client)',
    'input-required-result-basic-sampling': FIXTURE_TOOL('test_input_required_result_sampling'),
    'input-required-result-basic-list-roots': FIXTURE_TOOL('test_input_required_result_list_roots'),
    'input-required-result-request-state': FIXTURE_TOOL('test_input_required_result_request_state'),
    'input-required-result-multiple-input-requests': FIXTURE_TOOL('test_input_required_result_multiple_inputs'),
    'input-required-result-multi-round': FIXTURE_TOOL('test_input_required_result_multi_round'),
    'input-required-result-missing-input-response': FIXTURE_TOOL('test_input_required_result_elicitation'),
    'input-required-result-non-tool-request': 'gets the fixture prompt `test_input_required_result_prompt`; modhost offers no prompts',
    'input-required-result-result-type': FIXTURE_TOOL('test_input_required_result_elicitation'),
    'input-required-result-tampered-state': FIXTURE_TOOL('test_input_required_result_tampered_state') + ' (a forged requestState is refused: host/mcp/src/tests_attacks.rs)',
    'input-required-result-capability-check': FIXTURE_TOOL('test_input_required_result_capabilities'),
    'input-required-result-ignore-extra-params': FIXTURE_TOOL('test_input_required_result_elicitation'),
    'input-required-result-validate-input': FIXTURE_TOOL('test_input_required_result_elicitation'),
  },
};

/**
 * Single checks of a running scenario that cannot apply, per revision:
 * `scenario:check-id` -> the suite's message (a RegExp it must match, so
 * a check failing for any other reason still fails) and why.
 */
const NOT_APPLICABLE_CHECKS = {
  [HANDSHAKE]: {},
  [STATELESS]: {
    'caching:sep-2549-prompts-list-caching-hints': {
      message: /^prompts\/list returned JSON-RPC error -32601/,
      why: 'prompts/list: modhost offers no prompts, so the method is not found (-32601) and has no result to carry hints',
    },
    'caching:sep-2549-resources-list-caching-hints': {
      message: /^resources\/list returned JSON-RPC error -32601/,
      why: 'resources/list: modhost offers no resources (-32601)',
    },
    'caching:sep-2549-resources-templates-list-caching-hints': {
      message: /^resources\/templates\/list returned JSON-RPC error -32601/,
      why: 'resources/templates/list: modhost offers no resources (-32601)',
    },
    'server-stateless:sep-2575-server-rejects-undeclared-capability': {
      message: /^Not testable: server does not list the diagnostic tool 'test_missing_capability'/,
      why: FIXTURE_TOOL('test_missing_capability') + '; no modhost tool needs a client capability to run',
    },
    'server-stateless:sep-2575-missing-capability-http-400': {
      message: /^Not testable: server does not list the diagnostic tool 'test_missing_capability'/,
      why: FIXTURE_TOOL('test_missing_capability'),
    },
    'server-stateless:sep-2575-http-server-no-independent-requests-on-stream': {
      message: /^Not testable: server does not list the diagnostic tool 'test_streaming_elicitation'/,
      why: FIXTURE_TOOL('test_streaming_elicitation'),
    },
    'server-stateless:sep-2575-server-no-log-without-loglevel': {
      message: /^Not testable: server does not list the diagnostic tool 'test_logging_tool'/,
      why: FIXTURE_TOOL('test_logging_tool') + '; modhost sends no log notifications',
    },
    'server-stateless:sep-2575-server-sends-tools-list-changed-on-subscription': {
      message: /test_trigger_tool_change|^Mutated the tool list but no notifications\/tools\/list_changed arrived/,
      why: 'changes the tool list by calling the fixture hook `test_trigger_tool_change` while its stream is open; modhost\'s list changes when the operator changes the home, and the Python mcp 2.x client checks that this reaches a subscriptions/listen stream',
    },
  },
};

function usage(message) {
  if (message) console.error(`run.mjs: ${message}`);
  console.error('usage: node_modules/.bin/node run.mjs --url URL [--revision 2026-07-28] [--revision 2025-11-25] [--out DIR]');
  process.exit(2);
}

function parseArgs(argv) {
  const options = { url: null, revisions: [], out: null };
  for (let i = 0; i < argv.length; i++) {
    const value = () => argv[++i] ?? usage(`${argv[i - 1]} needs a value`);
    switch (argv[i]) {
      case '--url': options.url = value(); break;
      case '--revision': options.revisions.push(value()); break;
      case '--out': options.out = value(); break;
      default: usage(`unknown argument ${argv[i]}`);
    }
  }
  if (!options.url) usage('--url is required');
  if (!options.revisions.length) options.revisions = [STATELESS, HANDSHAKE];
  for (const revision of options.revisions) {
    if (!APPLICABLE[revision]) usage(`revision ${revision}: this runner knows ${Object.keys(APPLICABLE).join(' and ')}`);
  }
  return options;
}

function suite(args, timeoutMs) {
  return spawnSync(process.execPath, [SUITE, ...args], {
    encoding: 'utf8',
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
  });
}

/** The scenarios the suite has for a revision (`list --server --spec-version`). */
function listedScenarios(revision) {
  const listed = suite(['list', '--server', '--spec-version', revision], 60_000);
  if (listed.status !== 0) throw new Error(`conformance list failed (${listed.status}): ${listed.stderr}`);
  return [...listed.stdout.matchAll(/^\s+- (\S+) \[/gm)].map((m) => m[1]);
}

/** checks.json of the one scenario run into `dir`. */
function readChecks(dir) {
  if (!existsSync(dir)) return null;
  for (const entry of readdirSync(dir)) {
    const file = join(dir, entry, 'checks.json');
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  }
  return null;
}

const PASSING = new Set(['SUCCESS', 'INFO', 'SKIPPED']);

function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!existsSync(SUITE)) {
    console.error(`run.mjs: the conformance suite is not installed (${SUITE} is missing); run tests/setup`);
    process.exit(1);
  }
  const out = options.out ?? mkdtempSync(join(tmpdir(), 'modhost-conformance-'));
  mkdirSync(out, { recursive: true });
  console.log(`conformance: @modelcontextprotocol/conformance ${SUITE_VERSION} on Node ${process.version} against ${options.url}; results in ${out}`);

  const failures = [];
  const report = { suite: SUITE_VERSION, url: options.url, revisions: {} };
  for (const revision of options.revisions) {
    const applicable = APPLICABLE[revision];
    const notApplicable = NOT_APPLICABLE[revision];
    const checkExceptions = NOT_APPLICABLE_CHECKS[revision];
    const listed = listedScenarios(revision);
    const placed = new Set([...Object.keys(applicable), ...Object.keys(notApplicable)]);
    for (const name of listed) {
      if (!placed.has(name)) failures.push(`${revision}: the suite has scenario ${name}, which run.mjs neither runs nor lists as not applicable; decide which`);
      if (name in applicable && name in notApplicable) failures.push(`${revision}: ${name} is in both tables`);
    }
    for (const name of placed) {
      if (!listed.includes(name)) failures.push(`${revision}: run.mjs places scenario ${name}, which this suite version does not list for ${revision}`);
    }

    const ran = {};
    for (const [scenario, what] of Object.entries(applicable)) {
      const dir = join(out, revision, scenario);
      const run = suite(['server', '--url', options.url, '--scenario', scenario, '--spec-version', revision, '--output-dir', dir, '--timeout', '60000'], 180_000);
      writeFileSync(join(out, `${revision}-${scenario}.log`), `${run.stdout ?? ''}\n--- stderr ---\n${run.stderr ?? ''}`);
      const checks = readChecks(dir);
      const verdict = { what, passed: [], notApplicable: [], skipped: [], failed: [] };
      ran[scenario] = verdict;
      if (!checks) {
        const why = run.error ? String(run.error) : `exit ${run.status}, no checks.json`;
        verdict.failed.push({ id: '(run)', message: `${why}\n${(run.stdout ?? '').slice(-2000)}${(run.stderr ?? '').slice(-2000)}` });
      } else {
        for (const check of checks) {
          const key = `${scenario}:${check.id}`;
          const exception = checkExceptions[key];
          const line = { id: check.id, name: check.name, status: check.status, message: check.errorMessage ?? '' };
          if (check.status === 'SKIPPED') {
            verdict.skipped.push({ ...line, message: line.message || check.details?.message || check.details?.note || '' });
          } else if (PASSING.has(check.status)) {
            if (check.status !== 'INFO' || !/^(incoming|outgoing)/.test(check.id)) verdict.passed.push(line);
          } else if (exception && exception.message.test(line.message)) {
            verdict.notApplicable.push({ ...line, why: exception.why });
          } else {
            verdict.failed.push(line);
          }
        }
        if (!verdict.passed.some((c) => c.status === 'SUCCESS')) {
          verdict.failed.push({ id: '(scenario)', message: 'no check of this scenario succeeded' });
        }
      }
      const mark = verdict.failed.length ? 'FAIL ' : 'ok   ';
      console.log(`${mark} ${revision} ${scenario}: ${verdict.passed.length} passed, ${verdict.failed.length} failed, ${verdict.skipped.length} skipped by the suite, ${verdict.notApplicable.length} not applicable`);
      for (const c of verdict.failed) {
        const status = c.status && c.status !== 'FAILURE' ? ` [${c.status}]` : '';
        console.log(`        FAIL ${c.id}${c.name ? ` (${c.name})` : ''}${status}: ${c.message}`);
        failures.push(`${revision} ${scenario} ${c.id}${status}: ${c.message.split('\n')[0]}`);
      }
      for (const c of verdict.skipped) console.log(`        skip ${c.id}: ${c.message}`);
      for (const c of verdict.notApplicable) console.log(`        n/a  ${c.id}: ${c.why}`);
    }
    console.log(`        ${revision}: not applicable to modhost:`);
    for (const [scenario, why] of Object.entries(notApplicable)) console.log(`        n/a  ${scenario}: ${why}`);
    report.revisions[revision] = { ran, notApplicable };
  }
  writeFileSync(join(out, 'report.json'), JSON.stringify(report, null, 2));

  if (failures.length) {
    console.log(`\nconformance: ${failures.length} failure(s):`);
    for (const f of failures) console.log(`  - ${f}`);
    process.exit(1);
  }
  console.log('\nconformance: every applicable scenario passed');
  process.exit(0);
}

main();
