//! modconform: the modhost conformance kit.
//!
//! It tells a module author (and the host, before it registers anything)
//! everything that is wrong with a module:
//!
//! - [`check_descriptor`]: static checks over a descriptor (id and version
//!   syntax, the contract pin, unique ids, schemas that compile and have an
//!   object root, effects that name declared roots and binaries, skills that
//!   exist, knowledge files whose sha256 matches, tool names that stay
//!   distinct after mangling, `effects.network` host entries that parse,
//!   without redundant ones, and a warning for "any public host",
//!   `effects.secrets` names a host can grant (the report names each
//!   capability's secrets, [`ConformanceReport::secrets`]), provider
//!   portability warnings) and, for a contract-2 module, the no-weakening
//!   check;
//! - [`check_no_weakening`]: contract 2's rule that a capability declares at
//!   least the effects of every operation that names it. It takes a
//!   [`modproto::contract::V2Accepted`], which only the contract pin
//!   produces, so operations are never relied on before the pin ran;
//! - [`run_battery`]: behavioural checks against a live module, through the
//!   [`ModuleCaller`] trait;
//! - [`check_unknown_keys`]: typos are errors; a key the contract does not
//!   define in a closed object of the raw describe result, with the key it
//!   resembles (the battery runs it on what the module describes);
//! - [`tool_name`]: the one implementation of the agent-facing tool name.
//!
//! Design decisions:
//!
//! - **Pure.** The crate starts no process and opens no socket. A live module
//!   is reached through [`ModuleCaller`], which the host implements (native
//!   processes, wasm components) and tests fake in memory. The only file
//!   access is reading knowledge files to compare digests, and even that goes
//!   through a closure in [`check_descriptor_with`].
//! - **All findings at once.** No check stops another; each problem is one
//!   [`Finding`] with a stable id, a severity, the capability it concerns, a
//!   reason and a remedy. A validator that reports one problem at a time turns
//!   one bad descriptor into as many rebuilds as it has defects.
//! - **Per-module verdicts.** A [`ConformanceReport`] is about one module and says
//!   nothing about any other; the host refuses a module whose verdict has an
//!   error and keeps every other one.

mod battery;
mod finding;
mod network;
mod no_weakening;
pub mod portability;
pub mod schema;
mod secrets;
mod static_checks;
mod tool_name;
mod unknown_keys;

pub use battery::{
    BatteryOptions, CallerError, Grants, ModuleCaller, RawCall, run_battery, run_battery_with,
};
pub use finding::{ConformanceReport, Finding, Severity, has_errors};
pub use no_weakening::{check_host_conformance, check_no_weakening};
pub use static_checks::{
    ReadKnowledge, check_descriptor, check_descriptor_with, is_valid_module_id,
};
pub use tool_name::{MAX_TOOL_NAME_LEN, raw_tool_name, tool_name};
pub use unknown_keys::check_unknown_keys;

use modproto::Descriptor;
use std::path::Path;

/// Static checks and the behavioural battery on one module, as one verdict.
///
/// `descriptor` is what the module answered to `describe` (the battery
/// describes it again to check determinism); `module_dir` is where its
/// knowledge files live, when it has a folder.
pub fn check_module(
    caller: &mut dyn ModuleCaller,
    descriptor: &Descriptor,
    module_dir: Option<&Path>,
) -> ConformanceReport {
    check_module_with(caller, descriptor, module_dir, &BatteryOptions::default())
}

/// [`check_module`] with explicit battery bounds.
pub fn check_module_with(
    caller: &mut dyn ModuleCaller,
    descriptor: &Descriptor,
    module_dir: Option<&Path>,
    options: &BatteryOptions,
) -> ConformanceReport {
    let mut findings = check_descriptor(descriptor, module_dir);
    findings.extend(run_battery_with(caller, descriptor, options));
    ConformanceReport::new(descriptor.id.clone(), findings).naming_secrets(descriptor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::tests::{FakeModule, Flaws};
    use serde_json::json;

    #[test]
    fn check_module_combines_static_and_behavioural_findings() {
        let good: Descriptor = serde_json::from_value(FakeModule::descriptor()).unwrap();
        let verdict = check_module(&mut FakeModule::new(Flaws::default()), &good, None);
        assert_eq!(verdict.module, "files");
        assert!(verdict.findings.is_empty(), "{}", verdict.render());
        assert!(verdict.conforms());

        // A static defect in the descriptor under test and a behavioural one
        // in the module: both in one verdict.
        let mut broken = FakeModule::descriptor();
        broken["capabilities"][0]["effects"]["spawns"] = json!(["curl"]);
        let broken: Descriptor = serde_json::from_value(broken).unwrap();
        let flaws = Flaws {
            hangs_on_empty_stdin: true,
            ..Flaws::default()
        };
        let verdict = check_module(&mut FakeModule::new(flaws), &broken, None);
        let ids: Vec<&str> = verdict.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "effects.unknown_binary",
                "battery.describe_differs",
                "battery.empty_stdin"
            ],
            "{}",
            verdict.render()
        );
        assert!(!verdict.conforms());
        let refusal = verdict.refusal();
        assert!(
            refusal.contains("effects.unknown_binary") && refusal.contains("battery.empty_stdin")
        );
    }
}
