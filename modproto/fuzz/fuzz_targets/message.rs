//! Module stdout, decoded the way the host's native runner decodes it.
//!
//! The input is a chunk of stdout. It is split on `\n` and every line goes
//! through the same steps as `classify_line` in `host/runner/src/native.rs`
//! (that function is private to the host, so the steps are repeated here over
//! the same modproto calls): strip one `\r`, require UTF-8, skip blank lines,
//! `Message::parse`, then decode the params of `progress`/`log` and, for a
//! successful response, the result as a descriptor (pinned) and as an invoke
//! result (artifact paths checked).
//!
//! Beyond "never panics", one property is asserted: whatever `parse` accepts
//! re-encodes with `to_line` to a single line that parses to the same value,
//! so the host never forwards a message it would itself reject or change.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use modproto::invoke::is_clean_relative_path;
use modproto::{Descriptor, InvokeResult, LogParams, Message, ProgressParams, contract};

fuzz_target!(|stdout: &[u8]| {
    for raw in stdout.split(|b| *b == b'\n') {
        classify(raw);
    }
});

fn classify(raw: &[u8]) {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let Ok(line) = std::str::from_utf8(raw) else {
        return;
    };
    if line.trim().is_empty() {
        return;
    }
    let Ok(message) = Message::parse(line) else {
        return;
    };

    let again = message.to_line();
    assert!(!again.contains('\n'), "to_line wrote a newline: {again}");
    assert_eq!(
        Message::parse(&again).as_ref(),
        Ok(&message),
        "re-encoded as {again}"
    );

    match message {
        Message::Notification(n) => {
            let params = n.params.unwrap_or(serde_json::Value::Null);
            match n.method.as_str() {
                modproto::METHOD_PROGRESS => drop(serde_json::from_value::<ProgressParams>(params)),
                modproto::METHOD_LOG => drop(serde_json::from_value::<LogParams>(params)),
                _ => {}
            }
        }
        Message::Response(response) => {
            let Ok(result) = response.outcome else { return };
            if let Ok(descriptor) = serde_json::from_value::<Descriptor>(result.clone()) {
                drop(contract::evaluate(Arc::new(descriptor)));
            }
            if let Ok(invoke) = serde_json::from_value::<InvokeResult>(result) {
                for artifact in &invoke.artifacts {
                    is_clean_relative_path(&artifact.path);
                }
            }
        }
        Message::Request(_) => {}
    }
}
