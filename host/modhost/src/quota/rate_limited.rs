//! A call (or an approval question) a quota refused, and when to retry.

use std::fmt;

/// What a quota counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaScope {
    /// One tool's calls (`[quotas.each_tool]`, `[quotas.tools."<tool>"]`).
    Tool(String),
    /// One caller's calls (`[quotas.each_principal]`,
    /// `[quotas.principals."<principal>"]`).
    Principal(String),
    /// The approval questions a server asks about one principal's calls
    /// (`elicitations_per_minute`, each principal its own).
    Questions(String),
}

/// Which limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaLimit {
    /// This many admitted in any 60 seconds.
    PerMinute(u32),
    /// This many running at once.
    Concurrent(u32),
}

/// A refusal by a quota: kind `rate_limited`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RateLimited {
    pub scope: QuotaScope,
    pub limit: QuotaLimit,
    /// Whole seconds after which the same call would be admitted (for a
    /// per-minute limit, when its oldest counted call leaves the minute;
    /// for a concurrency limit, a guess: a running call ends when it ends).
    pub retry_after_s: u64,
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, section) = match &self.scope {
            QuotaScope::Tool(tool) => (format!("tool {tool}"), "[quotas] each_tool or tools"),
            QuotaScope::Principal(principal) => (
                format!("caller {principal}"),
                "[quotas] each_principal or principals",
            ),
            QuotaScope::Questions(principal) => (
                format!("caller {principal}"),
                "[quotas] elicitations_per_minute",
            ),
        };
        let reached = match (&self.scope, self.limit) {
            (QuotaScope::Questions(_), QuotaLimit::PerMinute(n)) => {
                format!("its {n} approval questions per minute")
            }
            (_, QuotaLimit::PerMinute(n)) => format!("its {n} per minute"),
            (_, QuotaLimit::Concurrent(n)) => format!("its {n} at once"),
        };
        write!(
            f,
            "rate limited: {what} has reached {reached} ({section} in config.toml); retry after {} s",
            self.retry_after_s
        )
    }
}

impl RateLimited {
    /// What a caller can do about it.
    pub fn remedy(&self) -> String {
        format!(
            "call again after {} s, or ask the operator to raise the quota in config.toml",
            self.retry_after_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_says_which_quota_and_when_to_retry() {
        let limited = RateLimited {
            scope: QuotaScope::Tool("git__git_log".into()),
            limit: QuotaLimit::PerMinute(5),
            retry_after_s: 12,
        };
        assert_eq!(
            limited.to_string(),
            "rate limited: tool git__git_log has reached its 5 per minute ([quotas] each_tool or tools in config.toml); retry after 12 s"
        );
        assert!(limited.remedy().contains("after 12 s"));
        let questions = RateLimited {
            scope: QuotaScope::Questions("ci-bot".into()),
            limit: QuotaLimit::PerMinute(30),
            retry_after_s: 7,
        };
        assert_eq!(
            questions.to_string(),
            "rate limited: caller ci-bot has reached its 30 approval questions per minute ([quotas] elicitations_per_minute in config.toml); retry after 7 s"
        );
    }
}
