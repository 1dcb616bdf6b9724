//! Shell-script modules for the crate's tests: tiny, dependency-free, and
//! able to record how often they were described.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// Write an executable file.
pub fn write_executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Make a fifo at `path` with `mode` (nobody holds its other end).
pub fn make_fifo(path: &Path, mode: u32) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(mode),
        0,
    )
    .unwrap();
}

/// A descriptor with one capability `<id>.run` taking `{"msg": string}`,
/// reading both its roots (so both are granted to it, read-only).
pub fn descriptor(id: &str) -> Value {
    json!({
        "id": id,
        "version": "1.2.3",
        "roots": [{"name": "state", "kind": "state"}, {"name": "data", "kind": "source"}],
        "capabilities": [{
            "id": format!("{id}.run"),
            "input_schema": {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]},
            "output_schema": {"type": "object", "required": ["ok"]},
            "effects": {"reads": ["state", "data"]}
        }]
    })
}

/// A script module answering `describe` with `descriptor` and `invoke` with
/// `invoke_result` (a full response member: `{"result": ...}` or
/// `{"error": ...}`). Each describe appends a line to `<dir>/<id>.describes`;
/// the invoke request line is echoed to stderr.
pub fn script(descriptor: &Value, invoke_answer: &Value, counter: &Path) -> String {
    let describe = json!({"jsonrpc": "2.0", "id": 1, "result": descriptor});
    let mut invoke = json!({"jsonrpc": "2.0", "id": 1});
    for (k, v) in invoke_answer.as_object().unwrap() {
        invoke[k] = v.clone();
    }
    format!(
        "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) echo x >> '{}'; printf '%s\\n' '{}' ;;\n  *) printf '%s\\n' \"$line\" >&2; printf '%s\\n' '{}' ;;\nesac\n",
        counter.display(),
        describe,
        invoke
    )
}

/// Install a working script module `id` under `<home>/modules/<id>/<id>`
/// (or bare at `<home>/modules/<id>` when `bare`); returns its path and the
/// describe counter file.
pub fn install(home: &Path, id: &str, bare: bool) -> (PathBuf, PathBuf) {
    let counter = home.join(format!("{id}.describes"));
    let path = if bare {
        home.join("modules").join(id)
    } else {
        home.join("modules").join(id).join(id)
    };
    let answer = json!({"result": {"output": {"ok": true}, "text": "done"}});
    write_executable(&path, &script(&descriptor(id), &answer, &counter));
    (path, counter)
}

/// How many times the module with this counter was described.
pub fn describes(counter: &Path) -> usize {
    std::fs::read_to_string(counter)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}
