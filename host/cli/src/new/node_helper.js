// The modhost protocol for a Node module, no dependencies.
//
// A module lives for one call: read one JSON-RPC request line from stdin,
// answer one response line on stdout, exit. `describe` answers
// descriptor.json (beside this file); `invoke` calls the handler registered
// for the capability with the input and a context holding the granted
// roots. A handler returns the output, or throws a ModuleError (see
// invalidInput, rootMissing, failed) for an error the caller can act on.
'use strict';

const fs = require('fs');
const path = require('path');

class ModuleError extends Error {
  constructor(kind, message, code = -32000, remedy = undefined, problems = []) {
    super(message);
    this.kind = kind;
    this.code = code;
    this.remedy = remedy;
    this.problems = problems;
  }
}

const invalidInput = (message, problems) =>
  new ModuleError('invalid_input', message, -32602, undefined, problems || [message]);
const rootMissing = (name) =>
  new ModuleError('root_missing', `the ${name} root was not granted`, -32001,
    `name "${name}" in this capability's effects`);
const failed = (message, remedy) => new ModuleError('failed', message, -32000, remedy);

function send(message) {
  fs.writeSync(1, JSON.stringify(message) + '\n');
}

function sendError(id, code, kind, message, remedy, problems) {
  const data = { kind };
  if (remedy) data.remedy = remedy;
  if (problems && problems.length) data.problems = problems;
  send({ jsonrpc: '2.0', id, error: { code, message, data } });
}

// Answer one request with `handlers` (capability id -> function); returns
// the exit status.
function serve(handlers) {
  const line = fs.readFileSync(0, 'utf8').split('\n')[0];
  if (!line.trim()) return 0; // stdin closed without a request
  let request;
  try {
    request = JSON.parse(line);
  } catch (e) {
    sendError(null, -32700, 'parse', `the request line is not JSON: ${e.message}`);
    return 0;
  }
  if (!request || typeof request !== 'object' || Array.isArray(request) ||
      request.jsonrpc !== '2.0' || typeof request.method !== 'string') {
    const id = request && typeof request === 'object' && 'id' in request ? request.id : null;
    sendError(id, -32600, 'invalid_request', 'not a JSON-RPC 2.0 request');
    return 0;
  }
  const id = request.id === undefined ? null : request.id;
  if (request.method === 'describe') {
    const descriptor = JSON.parse(fs.readFileSync(path.join(__dirname, 'descriptor.json'), 'utf8'));
    send({ jsonrpc: '2.0', id, result: descriptor });
    return 0;
  }
  if (request.method !== 'invoke') {
    sendError(id, -32601, 'unknown_method', `unknown method ${JSON.stringify(request.method)}`);
    return 0;
  }
  const params = request.params || {};
  const handler = Object.prototype.hasOwnProperty.call(handlers, params.capability)
    ? handlers[params.capability] : undefined;
  if (!handler) {
    sendError(id, -32003, 'unknown_capability', `no capability ${JSON.stringify(params.capability)}`);
    return 0;
  }
  const roots = params.roots || {};
  const ctx = {
    requestId: params.request_id,
    root(name) {
      const root = roots[name];
      if (!root || !root.path) throw rootMissing(name);
      return root.path;
    },
  };
  let output;
  try {
    output = handler(params.input || {}, ctx);
  } catch (e) {
    if (e instanceof ModuleError) {
      sendError(id, e.code, e.kind, e.message, e.remedy, e.problems);
    } else {
      // A bug: its stack goes to stderr, which the host shows.
      process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
      sendError(id, -32603, 'internal', String(e && e.message ? e.message : e));
    }
    return 0;
  }
  send({ jsonrpc: '2.0', id, result: { output } });
  return 0;
}

module.exports = { ModuleError, invalidInput, rootMissing, failed, serve };
