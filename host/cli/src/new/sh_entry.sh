#!/bin/sh
# {{NAME}}: a modhost module (made with `modhost new`).
#
# What it declares is in descriptor.json; what it does is below. The
# protocol (one request line in, one response line out) is in module.sh,
# beside this file. Install the folder, check it, call it:
#
#     modhost install .        (from this folder; --upgrade after a change)
#     modhost conformance {{NAME}}
#     modhost invoke {{NAME}} greet --input @example-input.json
#
# A module runs confined: it may execute its own files and its interpreter,
# nothing else unless a capability declares it in effects.spawns. So this
# uses shell builtins only (no sed, jq or cat).

. "${0%/*}/module.sh"

# {{NAME}}.greet: the host has validated the input against the input_schema;
# the check below only keeps a direct run honest.
greet() {
  name=$(input_string name) || {
    reply_error -32602 invalid_input "name: a string is required"
    return
  }
  state=$(root_path state) || {
    reply_error -32001 root_missing "the state root was not granted"
    return
  }
  count=0
  if [ -f "$state/count" ]; then
    IFS= read -r count <"$state/count" || :
  fi
  count=$((count + 1))
  printf '%s\n' "$count" >"$state/count"
  reply_result "{\"output\":{\"greeting\":\"Hello, $name!\",\"count\":$count}}"
}

serve {{NAME}}.greet greet
