//! Approved snapshots do not pile up: `remove`, `pin` and `unpin` delete,
//! under the home lock, every snapshot no pin names, and only those.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Fixture, Home};

/// The snapshot folders in the store, by name (digests).
fn snapshots(home: &Home) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.path().join("cache/snapshots"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The digest `pins.json` records for `id`.
fn pinned_digest(home: &Home, id: &str) -> String {
    let pins: Value =
        serde_json::from_slice(&std::fs::read(home.path().join("pins.json")).unwrap()).unwrap();
    pins["modules"][id]["digest"]
        .as_str()
        .unwrap_or_else(|| panic!("{id} is not pinned: {pins:#}"))
        .to_owned()
}

fn snapshot(home: &Home, digest: &str) -> PathBuf {
    home.path().join("cache/snapshots").join(digest)
}

#[test]
fn removing_a_module_removes_its_snapshot_and_keeps_the_others_which_still_run() {
    let home = Home::new();
    home.install(Fixture::Echo, "one");
    home.install(Fixture::Echo, "two");
    let one = pinned_digest(&home, "one");
    let two = pinned_digest(&home, "two");
    assert_ne!(one, two);
    let mut both = vec![one.clone(), two.clone()];
    both.sort();
    assert_eq!(snapshots(&home), both);

    home.run(&["remove", "one"]).expect_code(0);
    assert!(!snapshot(&home, &one).exists(), "{:?}", snapshots(&home));
    assert_eq!(snapshots(&home), std::slice::from_ref(&two));
    home.invoke("two", "two.echo", &json!({}), &[])
        .invoke_result();
    assert!(snapshot(&home, &two).is_dir());
}

#[test]
fn unpinning_or_repinning_leaves_no_unused_snapshot() {
    let home = Home::new();
    let entry = home.install(Fixture::Echo, "echo");
    let first = pinned_digest(&home, "echo");

    // The operator approves new bytes: the old snapshot is no longer used.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&entry)
        .unwrap();
    std::io::Write::write_all(&mut file, b"\nversion 2\n").unwrap();
    drop(file);
    home.run(&["pin", "echo"]).expect_code(0);
    let second = pinned_digest(&home, "echo");
    assert_ne!(first, second);
    assert_eq!(snapshots(&home), std::slice::from_ref(&second));
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();

    home.run(&["unpin", "echo"]).expect_code(0);
    assert!(snapshots(&home).is_empty(), "{:?}", snapshots(&home));
}
