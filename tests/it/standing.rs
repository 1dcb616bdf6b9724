//! Every refusal names its real cause: invoking
//! any capability of a broken, refused, nonconforming, disabled, unpinned or
//! changed module, by any spelling (`MODULE CAP`, `MODULE.CAP`, the tool
//! name), reports that standing with its reason and remedy, never
//! `unknown_capability ... (it has: )`, and exits 2 like every other
//! refusal; a capability that ran and failed exits 1.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::install_checks::script_module;
use crate::support::Home;

fn descriptor(id: &str) -> Value {
    json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{
            "id": format!("{id}.run"), "description": "run it",
            "input_schema": {"type": "object"}
        }]
    })
}

/// Invoke `id`'s `run` capability by every spelling and check the refusal.
#[track_caller]
fn assert_refused_as(home: &Home, id: &str, kind: &str, says: &str) {
    let dotted = format!("{id}.run");
    let tool = format!("{id}__run");
    for spelling in [vec![id, "run"], vec![dotted.as_str()], vec![tool.as_str()]] {
        let mut args = vec!["invoke"];
        args.extend(&spelling);
        args.push("--json");
        let run = home.run(&args);
        let error = run.refusal_error();
        assert_eq!(error["kind"], kind, "{spelling:?}: {error:#}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(says) && !message.contains("it has:"),
            "{spelling:?}: the message must name the standing: {error:#}"
        );
        assert!(
            !error["remedy"].as_str().unwrap().is_empty(),
            "{spelling:?}: no remedy: {error:#}"
        );
    }
}

#[test]
fn a_module_that_cannot_be_called_says_why_whatever_the_capability_is_called() {
    let home = Home::new();
    let modules = home.modules();

    // Broken: describe fails, so nothing of its capabilities is known.
    let broken = modules.join("crashy/crashy");
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::write(&broken, "#!/bin/sh\necho 'cannot start' >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();

    // Refused contract, and a weakening contract-2 module.
    let mut newer = descriptor("newer");
    newer["contract_version"] = json!("9.0.0");
    script_module(&modules.join("newer"), "newer", &newer);
    let mut weak = descriptor("weak");
    weak["contract_version"] = json!("2.0.0");
    weak["operations"] = json!([{
        "id": "run", "capability": "weak.run", "semantics": {"external": true}
    }]);
    script_module(&modules.join("weak"), "weak", &weak);

    // Disabled, unpinned and changed: conforming modules the operator
    // switched off, never approved, or whose bytes changed since approval.
    for id in ["off", "fresh", "edited"] {
        script_module(&modules.join(id), id, &descriptor(id));
    }
    home.run(&["pin", "off"]).expect_code(0);
    home.run(&["disable", "off"]).expect_code(0);
    home.run(&["pin", "edited"]).expect_code(0);
    let mut edited = descriptor("edited");
    edited["version"] = json!("1.0.1");
    script_module(&modules.join("edited"), "edited", &edited);

    assert_refused_as(&home, "crashy", "module_broken", "broken");
    assert_refused_as(&home, "newer", "contract_refused", "contract");
    assert_refused_as(&home, "weak", "nonconforming", "do not conform");
    assert_refused_as(&home, "off", "module_disabled", "disabled");
    assert_refused_as(&home, "fresh", "unpinned", "not pinned");
    assert_refused_as(&home, "edited", "changed", "changed");
}

#[test]
fn a_capability_that_ran_and_failed_exits_1_and_an_unknown_one_2() {
    let home = Home::new();
    let failing = home.modules().join("failing/failing");
    std::fs::create_dir_all(failing.parent().unwrap()).unwrap();
    let text = descriptor("failing").to_string();
    std::fs::write(
        &failing,
        format!(
            "#!/bin/sh\nIFS= read -r line || exit 0\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{text}}}'; exit 0 ;;\nesac\nprintf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{{\"code\":-32003,\"message\":\"no luck\",\"data\":{{\"kind\":\"failed\"}}}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&failing, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", "failing"]).expect_code(0);
    let error = home
        .run(&["invoke", "failing", "run", "--json"])
        .invoke_error();
    assert_eq!(error["kind"], "failed", "{error:#}");
    let run = home.run(&["invoke", "failing", "nope", "--json"]);
    assert_eq!(run.refused_kind(), "unknown_capability");
    assert!(
        run.stdout.contains("failing.run"),
        "an enabled module lists what it has: {run:#?}"
    );
}

#[test]
fn help_documents_the_exit_codes() {
    let home = Home::new();
    let run = home.run(&["--help"]);
    run.expect_code(0);
    for line in [
        "Exit codes:",
        "1  the capability ran and failed",
        "2  refused",
    ] {
        assert!(run.stdout.contains(line), "--help lacks {line:?}: {run:#?}");
    }
}
