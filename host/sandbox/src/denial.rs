//! Recognising a call the sandbox broke, from what the module printed.
//!
//! A module that the sandbox denies something at start-up (a file outside
//! its grants, a program it did not declare) usually dies before it answers,
//! and the host sees only "exited without a response". Blaming the module's
//! author then sends the operator the wrong way: the module may be fine and
//! merely undeclared, or the operator's grants too narrow. The module's
//! stderr tail tells: a runtime that hits `EACCES` or `EPERM` says
//! "Permission denied" or "Operation not permitted" (libc's `strerror`,
//! Python's `PermissionError`, Node's `EACCES`), usually with the path.
//!
//! Design decision: **a heuristic that only ever adds a hint.** The text is
//! the module's, so it proves nothing; it changes the remedy the host
//! suggests, never the error's kind or whether the call failed.

/// A permission error seen in a module's stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The stderr line that shows it (trimmed, bounded).
    pub line: String,
    /// The path it names, when it names one.
    pub path: Option<String>,
}

/// The longest line kept in a [`Denial`].
const MAX_LINE: usize = 300;

/// The last permission error in `stderr`, if any.
pub fn permission_denial(stderr: &str) -> Option<Denial> {
    const SIGNS: &[&str] = &[
        "permission denied",
        "operation not permitted",
        "eacces",
        "eperm",
        "permissionerror",
    ];
    let line = stderr.lines().rev().find(|line| {
        let lower = line.to_ascii_lowercase();
        SIGNS.iter().any(|sign| lower.contains(sign))
    })?;
    let line = line.trim();
    let mut bounded: String = line.chars().take(MAX_LINE).collect();
    if bounded.len() < line.len() {
        bounded.push('…');
    }
    let path = line
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| "'\"`:,;()[]".contains(c)))
        // The last path: the program's own name comes first in
        // `sh: /m/m: 2: cannot open /x: Permission denied`.
        .rfind(|word| word.starts_with('/') && word.len() > 1)
        .map(str::to_owned);
    Some(Denial {
        line: bounded,
        path,
    })
}

impl Denial {
    /// What the operator can do, for module `module`.
    pub fn remedy(&self, module: &str) -> String {
        let what = match &self.path {
            Some(path) => path.clone(),
            None => "what was denied".into(),
        };
        format!(
            "the module was stopped by the host's sandbox, not by a bug: its stderr shows `{}`. \
             If it needs {what}, its capability must declare it (a root in `roots` with `effects.reads` or `effects.writes`, \
             a program in `effects.spawns` granted under [binaries] in config.toml, or `network`) and the operator grant it; \
             `modhost conformance {module}` compares its describe confined and unconfined; \
             confinement = \"off\" in config.toml runs modules unconfined (debugging only)",
            self.line
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_runtimes_are_recognised_with_their_path() {
        for (stderr, path) in [
            ("cat: /etc/shadow: Permission denied\n", Some("/etc/shadow")),
            (
                "Traceback (most recent call last):\n  File \"/m/m\", line 2\nPermissionError: [Errno 13] Permission denied: '/data/x'\n",
                Some("/data/x"),
            ),
            (
                "Error: EACCES: permission denied, open '/etc/ssl/openssl.cnf'\n",
                Some("/etc/ssl/openssl.cnf"),
            ),
            ("sh: 1: Operation not permitted\n", None),
            (
                "/h/modules/m/m: 2: cannot open /outside/secret: Permission denied\n",
                Some("/outside/secret"),
            ),
        ] {
            let denial = permission_denial(stderr).unwrap_or_else(|| panic!("{stderr}"));
            assert_eq!(denial.path.as_deref(), path, "{stderr}");
            assert!(denial.remedy("m").contains("sandbox"));
        }
    }

    #[test]
    fn other_failures_are_not_blamed_on_the_sandbox() {
        assert_eq!(permission_denial("panicked at src/main.rs:3: boom\n"), None);
        assert_eq!(permission_denial(""), None);
    }
}
