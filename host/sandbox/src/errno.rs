//! The errno of the last failed system call, read without allocating, so
//! the clone child (`child.rs`, `capabilities.rs`, `seccomp.rs`) can report
//! which step of its confinement failed.

pub(crate) fn last_errno() -> libc::c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM)
}
