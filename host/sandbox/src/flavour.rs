//! What differs between calls in the confinement a spawner thread carries.
//!
//! A spawner thread (`spawner`) carries the seccomp base layer every child
//! it starts inherits, and that layer differs by two things a call decides:
//! whether it may use the network (sockets), and whether its capability
//! declares no spawns (every `execve` after the module's own start refused:
//! the exec gate, `seccomp::Layer::Base`). Each combination is a
//! [`Flavour`], with threads of its own (`spawner_pool`) and a filter of
//! its own (`seccomp::programs`), so no child pays for a layer at its start.
//!
//! Design decision: **"declares no spawns" means "is granted no
//! executables".** What a call may execute besides its own chain is the
//! list of granted binaries the preparation receives (`Call::executables`
//! in the runner); a capability that names a binary the operator did not
//! configure is granted none, and so runs nothing, exactly as if it named
//! none. One function ([`Flavour::of`]) decides it, for the runner choosing
//! a thread and for the preparation choosing a filter.

use std::path::PathBuf;

/// Which spawner threads a confined start goes to, and which seccomp filter
/// its child inherits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flavour {
    /// The call may use the network (its egress proxy): TCP stream sockets
    /// stay allowed.
    pub network: bool,
    /// The call's capability declares no spawns: its module may execute
    /// nothing after its own start (`execve`, `execveat` refused).
    pub exec_gated: bool,
}

impl Flavour {
    /// Every flavour, in the order of [`Flavour::index`].
    pub(crate) const ALL: [Flavour; 4] = [
        Flavour::new(false, false),
        Flavour::new(true, false),
        Flavour::new(false, true),
        Flavour::new(true, true),
    ];

    const fn new(network: bool, exec_gated: bool) -> Flavour {
        Flavour {
            network,
            exec_gated,
        }
    }

    /// The flavour of a call with (or without) `network`, granted
    /// `executables` (a capability's `effects.spawns`, as the operator
    /// configured them): exec-gated when it is granted none.
    pub fn of(network: bool, executables: &[PathBuf]) -> Flavour {
        Flavour::new(network, executables.is_empty())
    }

    /// Its place in [`Flavour::ALL`].
    pub(crate) const fn index(self) -> usize {
        self.network as usize | ((self.exec_gated as usize) << 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flavour_has_its_own_index() {
        for (at, flavour) in Flavour::ALL.iter().enumerate() {
            assert_eq!(flavour.index(), at, "{flavour:?}");
        }
        assert!(Flavour::of(false, &[]).exec_gated);
        assert!(!Flavour::of(true, &[PathBuf::from("/usr/bin/git")]).exec_gated);
    }
}
