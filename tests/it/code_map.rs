//! ARCHITECTURE.md's code map matches the files: a new file the map does not
//! name, or a name the map keeps after its file went away, fails here.
//!
//! How the document is read (names are what it writes between backticks):
//! - The code map is the text from `## Code map` to the next `## ` heading.
//!   Each `### ` heading names a repository folder (`host/runner/`); the
//!   sections of the crates and the bundled modules are checked against the
//!   `.rs` files beneath their `src` and `benches` folders
//!   (`modules/*/src` for `modules/`). Every crate under `host/` has a
//!   checked section.
//! - A file is named when a name in its section ending in `.rs` is its path,
//!   or the end of its path at a `/` (`native/process.rs`, `lib.rs`); a `*`
//!   stands for any part of a file name (`*_tests.rs`).
//! - A folder name (ending in `/`, such as `cli/new/`) covers the files
//!   beneath it only while the section names none of them: a folder
//!   described as a whole is covered whole, but once the map names files of
//!   a folder it names every one.
//! - Every `.rs` name anywhere in the document must be the path, or the end
//!   of the path, of a file in the repository.

use std::path::Path;

/// The sections checked, by their heading's folder, in the document's order.
const CHECKED_SECTIONS: &[&str] = &[
    "modproto/",
    "sdk/",
    "conformance/",
    "host/sandbox/",
    "host/runner/",
    "host/egress/",
    "host/distribution/",
    "host/modhost/",
    "host/mcp/",
    "host/cli/",
    "host/test-support/",
    "modules/",
];

#[test]
fn the_code_map_names_every_source_file_and_only_files_that_exist() {
    let tests = crate::support::tests_dir();
    let root = tests.parent().unwrap();
    let document = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    // A fenced block's fences would pair its backticks across the block.
    let document: String = document
        .lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut every_file = Vec::new();
    rust_files(root, root, &mut every_file);
    every_file.sort();
    assert!(
        every_file.iter().any(|f| f == "host/modhost/src/lib.rs"),
        "the walk found the sources"
    );
    // A crate added under `host/` gets its section too.
    for entry in std::fs::read_dir(root.join("host")).unwrap() {
        let entry = entry.unwrap();
        if entry.path().join("Cargo.toml").is_file() {
            let folder = format!("host/{}/", entry.file_name().to_string_lossy());
            assert!(
                CHECKED_SECTIONS.contains(&folder.as_str()),
                "the crate in `{folder}` has no checked code-map section"
            );
        }
    }

    let mut problems = Vec::new();
    for name in backticked(&document).filter(|n| n.ends_with(".rs")) {
        if !every_file.iter().any(|f| names(name, f)) {
            problems.push(format!("ARCHITECTURE.md names `{name}`, which is no file"));
        }
    }

    let map = document
        .split_once("\n## Code map\n")
        .expect("ARCHITECTURE.md has a `## Code map` section")
        .1;
    let map = map.split("\n## ").next().unwrap();
    let mut checked = Vec::new();
    for section in map.split("\n### ").skip(1) {
        let folder = backticked(section).next().unwrap_or_default();
        if !CHECKED_SECTIONS.contains(&folder) {
            continue;
        }
        checked.push(folder);
        let sources: Vec<&String> = every_file
            .iter()
            .filter(|f| {
                f.strip_prefix(folder).is_some_and(|rest| {
                    rest.starts_with("src/")
                        || rest.starts_with("benches/")
                        || (folder == "modules/" && rest.split('/').nth(1) == Some("src"))
                })
            })
            .collect();
        let file_names: Vec<&str> = backticked(section).filter(|n| n.ends_with(".rs")).collect();
        let folder_names: Vec<&str> = backticked(section)
            .filter(|n| n.ends_with('/') && *n != folder)
            .collect();
        let named = |f: &str| file_names.iter().any(|n| names(n, f));
        for file in &sources {
            if named(file) {
                continue;
            }
            let covered = folder_names.iter().any(|dir| {
                let dir = dir.trim_end_matches('/');
                ancestors(file).any(|a| {
                    ends_at_slash(a, dir)
                        && !sources
                            .iter()
                            .any(|f| f.starts_with(&format!("{a}/")) && named(f))
                })
            });
            if !covered {
                problems.push(format!(
                    "{file} is not in the code map's `{folder}` section"
                ));
            }
        }
    }
    assert_eq!(checked, CHECKED_SECTIONS, "the code map's sections");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every backticked span of `text`.
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// Whether the document name `name` (a path's end, `*` for part of a file
/// name) names the repository file `file`.
fn names(name: &str, file: &str) -> bool {
    let (name_dir, name_file) = name.rsplit_once('/').unwrap_or(("", name));
    let (file_dir, file_file) = file.rsplit_once('/').unwrap_or(("", file));
    let file_matches = match name_file.split_once('*') {
        Some((head, tail)) => {
            file_file.len() >= head.len() + tail.len()
                && file_file.starts_with(head)
                && file_file.ends_with(tail)
        }
        None => file_file == name_file,
    };
    file_matches && (name_dir.is_empty() || ends_at_slash(file_dir, name_dir))
}

/// Whether the path `path` ends with the path `end` at a `/` boundary.
fn ends_at_slash(path: &str, end: &str) -> bool {
    path == end || path.ends_with(&format!("/{end}"))
}

/// The folders above `file`, nearest first.
fn ancestors(file: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(file.rsplit_once('/').map(|(d, _)| d), |d| {
        d.rsplit_once('/').map(|(d, _)| d)
    })
}

/// Every `.rs` file of the repository, relative to `root`, outside build
/// output, installed packages and hidden folders.
fn rust_files(root: &Path, dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                rust_files(root, &path, found);
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            let relative = path.strip_prefix(root).unwrap();
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}
