//! Secret names: what `effects.secrets` (and an operation's
//! `semantics.secrets`) may hold.
//!
//! A capability declares the secrets it needs by name; the operator stores
//! the values and grants each name to the capabilities that may have it; a
//! call that gets a secret finds it as an environment variable of that name
//! (PROTOCOL.md, "Secrets"). The name is therefore an environment variable
//! name, and one the host does not already set itself.
//!
//! Design decisions:
//!
//! - **Upper-case environment names only** (`[A-Z_][A-Z0-9_]*`, at most
//!   [`MAX_SECRET_NAME_LEN`] bytes): every shell, language and operator can
//!   spell them, they cannot be mistaken for an option, and the host never
//!   has to quote one. A name that misses only by case or punctuation comes
//!   with the name it probably meant ([`SecretNameError::suggestion`]).
//! - **Never a variable the host sets.** A module's environment already
//!   holds `PATH`, `LANG`, `TZ`, `LC_*`, the host's `MODHOST_*` and, with
//!   network, the proxy variables ([`is_reserved_secret_name`]): a secret of
//!   the same name would replace one of them, or be replaced. `LD_*` is
//!   refused too: the dynamic loader reads those before the module's first
//!   instruction, so a value there is configuration of what runs, not data.
//! - **Pure.** Checking a name needs no host; the conformance kit, the sdk
//!   and the host all call [`check_secret_name`], so they agree.

use std::fmt;

/// The longest secret name, in bytes.
pub const MAX_SECRET_NAME_LEN: usize = 64;

/// Variables the host sets in a module's environment itself.
const RESERVED_NAMES: &[&str] = &[
    "PATH",
    "LANG",
    "TZ",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
];

/// Prefixes of variables the host sets (`LC_*`, `MODHOST_*`) or that the
/// dynamic loader reads (`LD_*`).
const RESERVED_PREFIXES: &[&str] = &["LC_", "MODHOST_", "LD_"];

/// What is wrong with a secret name, and the name it probably meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretNameError {
    /// What is wrong, in a sentence.
    pub problem: String,
    /// A corrected name, when one is evident.
    pub suggestion: Option<String>,
}

impl fmt::Display for SecretNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problem)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for SecretNameError {}

/// Whether `name` is one the host sets in a module's environment itself
/// (or the loader reads), so no secret may carry it.
pub fn is_reserved_secret_name(name: &str) -> bool {
    RESERVED_NAMES.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Check one secret name: `[A-Z_][A-Z0-9_]*`, at most
/// [`MAX_SECRET_NAME_LEN`] bytes, not reserved.
pub fn check_secret_name(name: &str) -> Result<(), SecretNameError> {
    if name.is_empty() {
        return Err(SecretNameError {
            problem: "a secret name is empty".to_owned(),
            suggestion: None,
        });
    }
    let well_formed = name.len() <= MAX_SECRET_NAME_LEN
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !well_formed {
        let suggestion = suggest(name).filter(|s| s != name);
        let why = if name.len() > MAX_SECRET_NAME_LEN {
            format!("is longer than {MAX_SECRET_NAME_LEN} bytes")
        } else {
            "is not an environment variable name of upper-case letters, digits and `_` (not starting with a digit)".to_owned()
        };
        return Err(SecretNameError {
            problem: format!("secret name {name:?} {why}"),
            suggestion: suggestion.filter(|s| !is_reserved_secret_name(s)),
        });
    }
    if is_reserved_secret_name(name) {
        return Err(SecretNameError {
            problem: format!(
                "secret name {name:?} is a variable the host sets in a module's environment itself (PATH, LANG, TZ, LC_*, MODHOST_*, the proxy variables) or one the dynamic loader reads (LD_*)"
            ),
            suggestion: Some(format!("SECRET_{name}")).filter(|s| check_secret_name(s).is_ok()),
        });
    }
    Ok(())
}

/// The well-formed name `name` most likely meant: upper case, every other
/// character `_`, `_` before a leading digit, cut to the longest allowed.
fn suggest(name: &str) -> Option<String> {
    let mut fixed: String = name
        .chars()
        .map(|c| match c.to_ascii_uppercase() {
            c @ ('A'..='Z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .collect();
    if fixed.starts_with(|c: char| c.is_ascii_digit()) {
        fixed.insert(0, '_');
    }
    fixed.truncate(MAX_SECRET_NAME_LEN);
    (!fixed.trim_matches('_').is_empty()).then_some(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_names_are_accepted() {
        for name in ["GITHUB_TOKEN", "A", "_X", "TOKEN_2", &"A".repeat(64)] {
            assert_eq!(check_secret_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn malformed_names_are_refused_with_the_name_meant() {
        for (name, meant) in [
            ("github_token", Some("GITHUB_TOKEN")),
            ("GITHUB-TOKEN", Some("GITHUB_TOKEN")),
            ("gh.token", Some("GH_TOKEN")),
            ("2FA_KEY", Some("_2FA_KEY")),
            ("API KEY", Some("API_KEY")),
            ("", None),
            ("--", None),
            ("ÄPI", Some("_PI")),
        ] {
            let error = check_secret_name(name).unwrap_err();
            assert_eq!(error.suggestion.as_deref(), meant, "{name}: {error}");
            assert!(error.problem.contains(&format!("{name:?}")) || name.is_empty());
        }
        let long = "A".repeat(65);
        let error = check_secret_name(&long).unwrap_err();
        assert!(error.problem.contains("longer than 64"), "{error}");
        assert_eq!(error.suggestion.as_deref(), Some(&long[..64]));
    }

    #[test]
    fn names_the_host_sets_are_refused() {
        for name in [
            "PATH",
            "LANG",
            "TZ",
            "LC_ALL",
            "MODHOST_HOME",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "LD_PRELOAD",
        ] {
            let error = check_secret_name(name).unwrap_err();
            assert!(error.problem.contains("sets"), "{name}: {error}");
            assert!(is_reserved_secret_name(name));
        }
        assert_eq!(
            check_secret_name("PATH").unwrap_err().suggestion.as_deref(),
            Some("SECRET_PATH")
        );
        // A lower-case spelling of a reserved name is not suggested as is.
        assert_eq!(check_secret_name("path").unwrap_err().suggestion, None);
        assert!(!is_reserved_secret_name("PATHS_TOKEN"));
    }
}
