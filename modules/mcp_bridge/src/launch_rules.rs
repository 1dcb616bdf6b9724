//! What a manifest's `[server]` `args` and `env` may say: the rules that
//! keep the code a server runs inside the pinned folder.
//!
//! The sandbox already decides what the server can touch; these rules are
//! about what it *loads*. A call's working folder and roots are filled by
//! the caller, so a command line or a variable that makes the interpreter
//! load code from anywhere but the module's folder (`{module}`) would run
//! the caller's bytes, or bytes the pin never covered, with the tool's
//! grants. So:
//!
//! - **`{module}` never climbs out.** After `{module}` a value may name
//!   only paths beneath it: a `..` component is refused
//!   (`{module}/../..` is any folder the sandbox lets it read).
//! - **No script relative to the working folder.** An argument (or an
//!   option's `=` value) starting `./` or `../`, or a relative name ending
//!   in a script's extension (`server.js`, `main.py`), would be read from
//!   the caller's root: give it as `{module}/...` instead.
//! - **The dynamic loader's variables are refused** (`LD_*`, `DYLD_*`,
//!   `GCONV_PATH`, `GLIBC_TUNABLES`), and so are the shells' start-up
//!   files (`BASH_ENV`, `ENV`): they load native code into the granted
//!   binary, which no pin covers.
//! - **Search paths stay in the module.** Every entry of a variable that
//!   lists where code is looked up (`PATH`, `PYTHONPATH`, `NODE_PATH`, ...)
//!   must be `{module}` or beneath it; an empty entry (the working folder)
//!   is refused too.
//! - **`NODE_OPTIONS` may tune, not load:** a path in it must be beneath
//!   `{module}`, and so must the value of the options that load code
//!   (`--require`, `--import`, `--loader`, ...). Option variables of other
//!   runtimes that load code (`RUBYOPT`, `PERL5OPT`, `JAVA_TOOL_OPTIONS`,
//!   ...) are refused: put such options in `args`, where they are plain.
//! - **`PYTHONSAFEPATH` is the bridge's:** it keeps the caller's working
//!   folder off Python's import path, so the manifest cannot unset it.
//!
//! Everything else (`NODE_ENV`, an API's base URL, `HOME`) is the
//! operator's to set.

use std::collections::BTreeMap;

/// Where `args` and `env` name the module's folder; replaced by its path
/// when the server starts.
pub(crate) const MODULE_PLACEHOLDER: &str = "{module}";

/// Variables that list where code is looked up, `:`-separated.
const SEARCH_PATHS: &[&str] = &[
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSTARTUP",
    "PYTHONPYCACHEPREFIX",
    "NODE_PATH",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "GEM_HOME",
    "GEM_PATH",
    "CLASSPATH",
];

/// Option variables of runtimes that load the code they name.
const CODE_OPTIONS: &[&str] = &[
    "RUBYOPT",
    "PERL5OPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
];

/// Variables that load native code or shell code at start.
const LOADERS: &[&str] = &["GCONV_PATH", "GLIBC_TUNABLES", "BASH_ENV", "ENV"];

/// Node options whose value is code to load.
const NODE_LOADING_OPTIONS: &[&str] = &[
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--env-file",
    "--experimental-policy",
    "--openssl-config",
    "--snapshot-blob",
];

/// The extensions of files an interpreter runs as a script.
const SCRIPT_EXTENSIONS: &[&str] = &[
    ".js", ".mjs", ".cjs", ".ts", ".mts", ".py", ".pyz", ".pyc", ".rb", ".pl", ".sh", ".jar",
    ".php", ".lua",
];

/// Every rule `server` breaks, one line each, saying what to write
/// instead.
pub(crate) fn problems(args: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    for arg in args {
        check_module_paths(&format!("server.args {arg:?}"), arg, &mut problems);
        let value = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => arg.as_str(),
        };
        if is_relative_script(value) {
            problems.push(format!(
                "server.args {arg:?} names a file relative to the working folder, which is the caller's root: write it as \"{MODULE_PLACEHOLDER}/{}\"",
                value.trim_start_matches("./")
            ));
        }
    }
    for (name, value) in env {
        let what = format!("server.env {name}");
        check_module_paths(&what, value, &mut problems);
        if name.starts_with("LD_") || name.starts_with("DYLD_") || LOADERS.contains(&name.as_str())
        {
            problems.push(format!(
                "{what} is refused: it makes the dynamic loader or a shell load code into the server's program, which no pin covers"
            ));
        } else if name == "PYTHONSAFEPATH" {
            problems.push(format!(
                "{what} is refused: the bridge sets it so that the caller's working folder is never on Python's import path"
            ));
        } else if SEARCH_PATHS.contains(&name.as_str()) {
            for entry in value.split(':') {
                if !is_module_path(entry) {
                    problems.push(format!(
                        "{what} lists {entry:?}: every entry of a search path must be {MODULE_PLACEHOLDER} or a folder beneath it (an empty one is the working folder, the caller's root)"
                    ));
                }
            }
        } else if CODE_OPTIONS.contains(&name.as_str()) {
            problems.push(format!(
                "{what} is refused: its options load code the bridge does not check; put them in server.args, naming files as {MODULE_PLACEHOLDER}/..."
            ));
        } else if name == "NODE_OPTIONS" {
            node_options(&what, value, &mut problems);
        }
    }
    problems
}

/// `..` after a `{module}` is a path out of the module.
fn check_module_paths(what: &str, value: &str, problems: &mut Vec<String>) {
    for (at, _) in value.match_indices(MODULE_PLACEHOLDER) {
        let rest = &value[at + MODULE_PLACEHOLDER.len()..];
        let path = rest.split([':', ' ', '=', ',', ';']).next().unwrap_or("");
        if path.split('/').any(|part| part == "..") {
            problems.push(format!(
                "{what} climbs out of the module's folder with `..` after {MODULE_PLACEHOLDER}: name a file beneath it"
            ));
            return;
        }
    }
}

/// `{module}` itself, or a path beneath it without `..`.
fn is_module_path(value: &str) -> bool {
    value == MODULE_PLACEHOLDER
        || value
            .strip_prefix(MODULE_PLACEHOLDER)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| rest.split('/').all(|part| part != ".."))
}

/// A path the interpreter would resolve against its working folder.
fn is_relative_script(value: &str) -> bool {
    if value.starts_with("./") || value.starts_with("../") || value == "." || value == ".." {
        return true;
    }
    let lower = value.to_ascii_lowercase();
    !value.starts_with('/')
        && !value.starts_with('-')
        && !value.contains(MODULE_PLACEHOLDER)
        && SCRIPT_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
}

fn node_options(what: &str, value: &str, problems: &mut Vec<String>) {
    let mut loading: Option<&str> = None;
    let mut refuse = |option: &str, path: &str| {
        problems.push(format!(
            "{what}: {option} {path:?} is not beneath {MODULE_PLACEHOLDER}: code Node loads must be in the module's folder"
        ));
    };
    for token in value.split_whitespace() {
        if let Some(option) = loading.take() {
            if !is_module_path(token) {
                refuse(option, token);
            }
            continue;
        }
        if token.starts_with('-') {
            let (option, inline) = match token.split_once('=') {
                Some((option, inline)) => (option, Some(inline)),
                None => (token, None),
            };
            match inline {
                Some(path)
                    if (NODE_LOADING_OPTIONS.contains(&option) || path.contains('/'))
                        && !is_module_path(path) =>
                {
                    refuse(option, path);
                }
                Some(_) => {}
                None if NODE_LOADING_OPTIONS.contains(&option) => loading = Some(option),
                None => {}
            }
        } else if token.contains('/') && !is_module_path(token) {
            refuse("a path", token);
        }
    }
    if let Some(option) = loading {
        problems.push(format!("{what} ends with {option} and no file"));
    }
}
