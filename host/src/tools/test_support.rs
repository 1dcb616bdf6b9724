//! Fixtures the toolbox's tests share: a module from capability JSON, and
//! an invoker that records its calls.

use std::sync::Arc;

use modproto::Descriptor;
use serde_json::{Value, json};

use super::{InvokeCall, InvokeFailure, Invoker, ModuleEntry};

pub(crate) fn module(id: &str, caps: &Value) -> ModuleEntry {
    let d: Descriptor = serde_json::from_value(json!({
        "id": id, "version": "1.0.0",
        "roots": [{"name": "workspace", "kind": "workspace"}, {"name": "artifacts", "kind": "artifacts"}],
        "capabilities": caps
    }))
    .unwrap();
    ModuleEntry {
        descriptor: Arc::new(d),
        dir: None,
    }
}

/// Records each call it is given and answers with the input.
#[derive(Debug, Default)]
pub(crate) struct RecordingInvoker {
    pub(crate) calls: std::sync::Mutex<Vec<InvokeCall>>,
}

impl Invoker for RecordingInvoker {
    async fn invoke(&self, call: InvokeCall) -> Result<modproto::InvokeResult, InvokeFailure> {
        let output = call.input.clone();
        self.calls.lock().unwrap().push(call);
        Ok(modproto::InvokeResult::new(output))
    }
}
