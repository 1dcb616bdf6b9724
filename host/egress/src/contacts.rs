//! What a call's module reached through the proxy, and what it was refused.

use serde::{Deserialize, Serialize};

/// The most distinct entries kept in each list: a module that tries a
/// million hosts costs the host a count, not a million strings.
pub const MAX_ENTRIES: usize = 64;

/// The hosts one call contacted and those refused, in first-seen order,
/// each once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contacts {
    /// `host:port` of every connection the proxy made for the call.
    pub contacted: Vec<String>,
    /// Every target the proxy refused, with the reason it gave.
    pub refused: Vec<Refusal>,
    /// Distinct entries left out past [`MAX_ENTRIES`] in either list.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
}

/// One refused target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// `host:port` as the module asked for it.
    pub host: String,
    /// Why, as the module was told (the 403's `X-Modhost-Refused`).
    pub reason: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Contacts {
    pub(crate) fn contact(&mut self, host: String) {
        if self.contacted.contains(&host) {
            return;
        }
        if self.contacted.len() >= MAX_ENTRIES {
            self.omitted += 1;
            return;
        }
        self.contacted.push(host);
    }

    pub(crate) fn refuse(&mut self, refusal: Refusal) {
        if self.refused.contains(&refusal) {
            return;
        }
        if self.refused.len() >= MAX_ENTRIES {
            self.omitted += 1;
            return;
        }
        self.refused.push(refusal);
    }

    /// Whether nothing was tried.
    pub fn is_empty(&self) -> bool {
        self.contacted.is_empty() && self.refused.is_empty() && self.omitted == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_once_and_a_count_past_the_bound() {
        let mut contacts = Contacts::default();
        contacts.contact("a:443".into());
        contacts.contact("a:443".into());
        for i in 0..MAX_ENTRIES + 5 {
            contacts.refuse(Refusal {
                host: format!("h{i}:443"),
                reason: "no".into(),
            });
        }
        assert_eq!(contacts.contacted, ["a:443"]);
        assert_eq!(contacts.refused.len(), MAX_ENTRIES);
        assert_eq!(contacts.omitted, 5);
    }
}
