//! How many connections the proxy may hold at once without running the
//! host out of file descriptors.
//!
//! Each proxied connection holds several of the host's descriptors: the
//! client's socket, the upstream socket, a tunnel's two pipes (four
//! descriptors, `splice.rs`), and for a component's request the host's
//! own client socket too. A host under the common soft limit of 1024 would
//! be out of descriptors after a hundred or so tunnels, and then every
//! other call fails (a landlock ruleset is a descriptor too). So the proxy
//! raises the process's soft limit to its hard limit when it starts (as Go's
//! runtime does for every program), and bounds its connections by what the
//! limit then allows, keeping a reserve for the rest of the host.

/// Descriptors one proxied connection may hold, with a margin.
pub(crate) const PER_CONNECTION: u64 = 8;

/// Descriptors kept for the rest of the host: rulesets, pipes to modules,
/// the home's files, a server's clients.
pub(crate) const RESERVED: u64 = 256;

/// Raise the soft descriptor limit to the hard one; the soft limit in force
/// afterwards (`None` when it cannot be read: no bound from it). Also what
/// `modhost mcp --http` sizes its connection table by.
pub fn raise_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: limit.maximum,
                    maximum: limit.maximum,
                },
            );
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The most connections a descriptor limit of `limit` leaves room for
/// (at least one).
pub(crate) fn connections_within(limit: u64) -> usize {
    let room = limit.saturating_sub(RESERVED) / PER_CONNECTION;
    usize::try_from(room).unwrap_or(usize::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_limit_bounds_the_connections_and_keeps_the_reserve() {
        assert_eq!(connections_within(1024), 96);
        assert!(connections_within(1024) as u64 * PER_CONNECTION + RESERVED <= 1024);
        assert_eq!(connections_within(100), 1);
        assert_eq!(connections_within(1 << 20), 131_040);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let raised = raise_limit().expect("the descriptor limit is readable");
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(Some(raised), limit.current);
        assert_eq!(limit.current, limit.maximum);
    }
}
