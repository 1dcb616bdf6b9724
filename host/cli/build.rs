//! Embeds the bundled modules' knowledge files into `modhost`, so
//! `modhost install --bundled` installs each module with its knowledge from
//! nothing but the binaries cargo builds (see `src/bundled.rs`).
//!
//! Writes `$OUT_DIR/bundled_knowledge.rs`: every file beneath
//! `modules/<name>/knowledge/` of this workspace, as `(module, path inside
//! the module's folder, bytes)`, plus the name of every folder under
//! `modules/` (a unit test holds that list to the bundled one). Outside the
//! workspace (no `modules/` beside the crate) both are empty.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let modules = manifest.join("../../modules");
    let mut folders = Vec::new();
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&modules) {
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            // A module's manifest changes when a module is added or renamed.
            println!(
                "cargo:rerun-if-changed={}",
                path.join("Cargo.toml").display()
            );
            let knowledge = path.join("knowledge");
            if knowledge.is_dir() {
                println!("cargo:rerun-if-changed={}", knowledge.display());
                collect(&knowledge, &path, &name, &mut files);
            }
            folders.push(name);
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("../../Cargo.toml").display()
    );
    folders.sort();
    files.sort();
    let mut out = String::from(
        "/// Every folder under `modules/` of the workspace this modhost was built from.\n\
         #[cfg(test)]\n\
         pub(crate) const MODULE_FOLDERS: &[&str] = &[\n",
    );
    for name in &folders {
        out.push_str(&format!("    {name:?},\n"));
    }
    out.push_str(
        "];\n\n/// Every bundled knowledge file: (module, path in its folder, bytes).\n\
         pub(crate) const KNOWLEDGE: &[(&str, &str, &[u8])] = &[\n",
    );
    for (module, relative, absolute) in &files {
        out.push_str(&format!(
            "    ({module:?}, {relative:?}, include_bytes!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"))
        .join("bundled_knowledge.rs");
    std::fs::write(&target, out).expect("write bundled_knowledge.rs");
}

/// Every regular file beneath `dir`, named relative to the module folder
/// `module_dir` (with `/`), and its absolute path.
fn collect(
    dir: &Path,
    module_dir: &Path,
    module: &str,
    files: &mut Vec<(String, String, PathBuf)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            collect(&path, module_dir, module, files);
        } else if meta.is_file() {
            let relative = path
                .strip_prefix(module_dir)
                .expect("beneath the module")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let absolute = std::fs::canonicalize(&path).unwrap_or(path);
            files.push((module.to_owned(), relative, absolute));
        }
    }
}
