//! Who a call is made for, when the caller does not say: the local user.
//!
//! `modhost invoke`, the library and `modhost mcp` on stdio act for the
//! user that runs them; a transport that authenticates its callers (HTTP,
//! later) names each call's principal in [`crate::InvokeRequest::principal`]
//! instead. The audit log records it and `[quotas]` counts by it.
//!
//! Design decision: the name comes from the password database for the
//! process's real uid (`/etc/passwd`), never from `$USER`, which any caller
//! sets as it likes; a uid the file does not list is named by its number.

use std::sync::OnceLock;

/// `local:<login name>`, or `local:uid:<n>` for a uid `/etc/passwd` does
/// not list. Looked up once per process.
pub fn local_principal() -> &'static str {
    static LOCAL: OnceLock<String> = OnceLock::new();
    LOCAL.get_or_init(|| {
        let uid = rustix::process::getuid().as_raw();
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        match login_name(&passwd, uid) {
            Some(name) => format!("local:{name}"),
            None => format!("local:uid:{uid}"),
        }
    })
}

/// The login name of `uid` in the text of a password file.
fn login_name(passwd: &str, uid: u32) -> Option<&str> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let listed: u32 = fields.next()?.parse().ok()?;
        (listed == uid && !name.is_empty()).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_password_files_for_the_uid() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\n# comment\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(login_name(passwd, 0), Some("root"));
        assert_eq!(login_name(passwd, 1000), Some("alice"));
        assert_eq!(login_name(passwd, 1001), None);
        assert!(local_principal().starts_with("local:"));
    }
}
