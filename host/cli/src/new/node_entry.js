#!/usr/bin/env node
// {{NAME}}: a modhost module (made with `modhost new`).
//
// What it declares is in descriptor.json; what it does is below. The
// protocol (one request line in, one response line out) is in
// modhost_module.js, beside this file. Install the folder, check it, call it:
//
//     modhost install .        (from this folder; --upgrade after a change)
//     modhost conformance {{NAME}}
//     modhost invoke {{NAME}} greet --input @example-input.json
'use strict';

const fs = require('fs');
const path = require('path');
const { invalidInput, serve } = require(path.join(__dirname, 'modhost_module.js'));

// {{NAME}}.greet: the host has validated `input` against the input_schema;
// the check below only keeps a direct run honest.
function greet(input, ctx) {
  const name = input.name;
  if (typeof name !== 'string') {
    throw invalidInput('name: a string is required');
  }
  const countFile = path.join(ctx.root('state'), 'count');
  let count = 0;
  try {
    count = parseInt(fs.readFileSync(countFile, 'utf8').trim(), 10) || 0;
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  count += 1;
  fs.writeFileSync(countFile, `${count}\n`);
  return { greeting: `Hello, ${name}!`, count };
}

process.exitCode = serve({ '{{NAME}}.greet': greet });
