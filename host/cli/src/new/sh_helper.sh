# module.sh: the modhost protocol in POSIX shell builtins (sourced by the
# module's entry file).
#
# A module lives for one call: read one JSON-RPC request line from stdin,
# answer one response line on stdout, exit. `serve CAPABILITY HANDLER ...`
# answers `describe` with descriptor.json (beside this file) and calls the
# handler of the capability an `invoke` names. A handler answers with
# `reply_result JSON` or `reply_error CODE KIND MESSAGE`.
#
# Limits: `input_string` reads a plain string property (no escaped quotes);
# for richer input write the module in a language with a JSON parser.

MODULE_DIR=${0%/*}
request=
request_id=null

reply() {
  printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$request_id,$1}"
}

reply_result() {
  reply "\"result\":$1"
}

# reply_error CODE KIND MESSAGE (MESSAGE without double quotes)
reply_error() {
  reply "\"error\":{\"code\":$1,\"message\":\"$3\",\"data\":{\"kind\":\"$2\"}}"
}

# input_string NAME: the string property NAME of the input; fails when the
# input has no such string.
input_string() {
  rest=${request#*\"input\":}
  case $rest in
    *"\"$1\":\""*) ;;
    *) return 1 ;;
  esac
  rest=${rest#*\"$1\":\"}
  printf '%s' "${rest%%\"*}"
}

# root_path NAME: the path of the granted root NAME; fails when not granted.
root_path() {
  rest=${request#*\"roots\":\{}
  case $rest in
    *"\"$1\":{"*) ;;
    *) return 1 ;;
  esac
  rest=${rest#*\"$1\":\{}
  rest=${rest#*\"path\":\"}
  printf '%s' "${rest%%\"*}"
}

describe() {
  body=
  while IFS= read -r part || [ -n "$part" ]; do
    body="$body$part"
  done <"$MODULE_DIR/descriptor.json"
  reply_result "$body"
}

# serve CAPABILITY HANDLER [CAPABILITY HANDLER ...]
serve() {
  IFS= read -r request || [ -n "$request" ] || exit 0
  case $request in
    '{'*'}') ;;
    *)
      reply_error -32700 parse "the request line is not JSON"
      exit 0
      ;;
  esac
  case $request in
    *'"id":'*)
      request_id=${request#*\"id\":}
      request_id=${request_id%%[,\}]*}
      ;;
  esac
  method=${request#*\"method\":\"}
  method=${method%%\"*}
  case $method in
    describe)
      describe
      exit 0
      ;;
    invoke) ;;
    *)
      reply_error -32601 unknown_method "unknown method $method"
      exit 0
      ;;
  esac
  capability=${request#*\"capability\":\"}
  capability=${capability%%\"*}
  while [ $# -ge 2 ]; do
    if [ "$1" = "$capability" ]; then
      "$2"
      exit 0
    fi
    shift 2
  done
  reply_error -32003 unknown_capability "no capability $capability"
  exit 0
}
