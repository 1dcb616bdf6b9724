//! A module's `describe` answer and `invoke` result, decoded and pinned.
//!
//! The input is one JSON document (a `result`). Asserted beyond "never
//! panics":
//!
//! - the pin agrees with itself: v2 only for major 2 at a minor this host
//!   knows, with the descriptor's operations; a refusal has a remedy; a
//!   descriptor without `contract_version` is contract 1;
//! - an invoke result re-encodes to JSON that decodes to the same value;
//! - every artifact path `is_clean_relative_path` accepts stays inside its
//!   root when walked component by component (the input as a whole is also
//!   tried as a path).

#![no_main]

use std::path::{Component, Path};
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use modproto::contract::{self, ContractDecision};
use modproto::invoke::is_clean_relative_path;
use modproto::{Descriptor, InvokeResult};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(path) = std::str::from_utf8(data) {
        check_path(path);
    }
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    check_descriptor(value.clone());
    check_invoke_result(value);
});

fn check_descriptor(value: Value) {
    let Ok(descriptor) = serde_json::from_value::<Descriptor>(value) else {
        return;
    };
    let declared = descriptor.contract_version.clone();
    let operations = descriptor.operations.clone();
    let decision = contract::evaluate(Arc::new(descriptor));
    assert_eq!(decision.pin().requested, declared);
    match &decision {
        ContractDecision::V1(pin) => {
            assert!(
                pin.effective
                    .as_deref()
                    .is_some_and(|e| e.starts_with("1."))
            );
        }
        ContractDecision::V2(accepted) => {
            assert_eq!(accepted.version().major, 2);
            // Not newer than the newest minor this host knows.
            let v = accepted.version();
            assert!(semver::Version::new(v.major, v.minor, 0) <= contract::NEWEST_V2);
            assert_eq!(accepted.operations(), operations.as_slice());
        }
        ContractDecision::Refused(pin) => {
            assert!(declared.is_some(), "no contract_version means contract 1");
            assert!(pin.effective.is_none() && !pin.remedy.is_empty());
        }
    }
}

fn check_invoke_result(value: Value) {
    let Ok(result) = serde_json::from_value::<InvokeResult>(value) else {
        return;
    };
    let text = serde_json::to_string(&result).expect("an InvokeResult serializes");
    let back: InvokeResult = serde_json::from_str(&text).expect("a re-encoded result decodes");
    assert_eq!(back, result, "re-encoded as {text}");
    for artifact in &result.artifacts {
        check_path(&artifact.path);
    }
}

fn check_path(path: &str) {
    if !is_clean_relative_path(path) {
        return;
    }
    let mut depth = 0usize;
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth
                    .checked_sub(1)
                    .unwrap_or_else(|| panic!("{path:?} escapes"));
            }
            Component::RootDir | Component::Prefix(_) => panic!("{path:?} is absolute"),
        }
    }
}
