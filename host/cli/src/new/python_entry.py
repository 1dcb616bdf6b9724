#!/usr/bin/env python3
"""{{NAME}}: a modhost module (made with `modhost new`).

What it declares is in descriptor.json; what it does is below. The
protocol (one request line in, one response line out) is in
modhost_module.py, beside this file. Install the folder, check it, call it:

    modhost install .        (from this folder; --upgrade after a change)
    modhost conformance {{NAME}}
    modhost invoke {{NAME}} greet --input @example-input.json
"""

import os
import sys

# Nothing is written into the module's folder: what the operator approved
# is exactly what runs.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from modhost_module import invalid_input, serve  # noqa: E402


def greet(input, ctx):
    """{{NAME}}.greet: the host has validated `input` against the
    input_schema; the check below only keeps a direct run honest."""
    name = input.get("name")
    if not isinstance(name, str):
        raise invalid_input("name: a string is required")
    count_file = os.path.join(ctx.root("state"), "count")
    try:
        with open(count_file, encoding="utf-8") as f:
            count = int(f.read().strip() or 0)
    except FileNotFoundError:
        count = 0
    count += 1
    with open(count_file, "w", encoding="utf-8") as f:
        f.write(f"{count}\n")
    return {"greeting": f"Hello, {name}!", "count": count}


sys.exit(serve({"{{NAME}}.greet": greet}))
