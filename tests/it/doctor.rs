//! `modhost doctor` lists every part of a native call's confinement, with
//! enforced or not and why, and says the host runs as root and what it does
//! about it. The suite runs as root on a kernel with landlock and seccomp
//! (CI too), so every part must come out enforced here: a machine that
//! lacks one fails this test instead of passing quietly.

use crate::support::Home;

const PARTS: [&str; 13] = [
    "filesystem",
    "tcp",
    "egress",
    "udp_and_raw_sockets",
    "unix_sockets",
    "abstract_sockets",
    "devices",
    "namespaces",
    "process_group",
    "capabilities",
    "resource_limits",
    "inherited_descriptors",
    "exec_beyond_spawns",
];

#[test]
fn doctor_lists_every_part_of_confinement_enforced_and_why() {
    let home = Home::new();
    let run = home.run(&["doctor", "--json"]);
    run.expect_code(0);
    let report = run.json();
    let confinement = &report["confinement"];
    let parts = confinement["parts"].as_array().expect("parts");
    let names: Vec<&str> = parts.iter().filter_map(|p| p["part"].as_str()).collect();
    assert_eq!(names, PARTS, "{confinement:#}");
    for part in parts {
        assert_eq!(part["enforced"], true, "{part:#}");
        assert!(
            !part["why"].as_str().unwrap_or_default().is_empty(),
            "{part:#}"
        );
    }
    assert_eq!(confinement["not_enforced"], serde_json::json!([]));
    assert_eq!(
        confinement["host_runs_as_root"], true,
        "the suite runs as root"
    );
    let capabilities = &parts[9]["why"];
    assert!(
        capabilities
            .as_str()
            .is_some_and(|w| w.contains("runs as root") && w.contains("drops every capability")),
        "{capabilities}"
    );

    let human = home.run(&["doctor"]);
    human.expect_code(0);
    for line in [
        "the host runs as root",
        "UDP and raw sockets",
        "network egress",
        "inherited descriptors",
    ] {
        assert!(human.stdout.contains(line), "{line:?} in {}", human.stdout);
    }
}
