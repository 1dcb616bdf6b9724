//! The user's home directories, which are never a workspace.
//!
//! `$HOME` alone is not enough: a server started without it (as some
//! clients and service managers start theirs), or with it pointing
//! elsewhere, would otherwise accept the user's real home as a client's
//! root. The account's home from the password database counts too.

use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::OnceLock;

/// `$HOME` (when set and not empty) and the home of this process's
/// effective user in the password database, canonical where they resolve,
/// without duplicates; looked up once per process (the password database
/// is a file read, and neither changes under a running host).
pub fn user_homes() -> &'static [PathBuf] {
    static HOMES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    HOMES.get_or_init(look_up)
}

fn look_up() -> Vec<PathBuf> {
    let from_env = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut homes: Vec<PathBuf> = Vec::with_capacity(2);
    for home in from_env.into_iter().chain(account_home()) {
        let home = std::fs::canonicalize(&home).unwrap_or(home);
        if !homes.contains(&home) {
            homes.push(home);
        }
    }
    homes
}

/// The effective user's home in the password database (`getpwuid_r`).
fn account_home() -> Option<PathBuf> {
    let mut buffer = vec![0u8; 4096];
    loop {
        // SAFETY: `entry` and `buffer` outlive the call, `buffer`'s length
        // is passed with it, and the strings `entry` points at live in
        // `buffer`, read before it is dropped or grown.
        #[allow(unsafe_code)]
        let home = unsafe {
            let mut entry: libc::passwd = std::mem::zeroed();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let status = libc::getpwuid_r(
                libc::geteuid(),
                &raw mut entry,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &raw mut found,
            );
            if status == libc::ERANGE && buffer.len() < 1 << 20 {
                None
            } else if status != 0 || found.is_null() || entry.pw_dir.is_null() {
                return None;
            } else {
                Some(CStr::from_ptr(entry.pw_dir).to_bytes().to_vec())
            }
        };
        match home {
            Some(bytes) if !bytes.is_empty() => {
                use std::os::unix::ffi::OsStringExt;
                return Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)));
            }
            Some(_) => return None,
            None => buffer.resize(buffer.len() * 2, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The account's home is found whatever `$HOME` says (the tests run as
    /// root, whose home the password database gives).
    #[test]
    fn the_accounts_home_counts_besides_home() {
        let account = account_home().expect("this user has a home in the password database");
        assert!(account.is_absolute(), "{}", account.display());
        let canonical = std::fs::canonicalize(&account).unwrap_or(account);
        assert!(user_homes().contains(&canonical), "{:?}", user_homes());
    }
}
