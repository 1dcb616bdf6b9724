//! The counts behind `[quotas]`, for one host process.
//!
//! Design decisions:
//!
//! - **A sliding minute, exact.** Each counted key keeps the times of the
//!   calls it admitted in the last 60 seconds (at most its limit of them);
//!   a call is admitted while fewer than the limit are in the window, so a
//!   burst gets exactly the limit through, and the refusal's retry time is
//!   when the oldest leaves the window. No bucket boundary lets twice the
//!   limit through across a minute's edge.
//! - **All or nothing.** Every limit that applies (the tool's, the
//!   principal's, per minute and at once) is checked before any is
//!   counted: a refused call uses up no quota.
//! - **At once = until the call's future ends**: the [`Permit`] is held by
//!   the call and released when dropped, so a cancelled call frees its
//!   slot too.
//! - **Only what has a limit is counted**, so the maps stay as small as the
//!   operator's configuration; a key whose window empties is forgotten.
//! - **One process.** The counts live in the host (shared by its clones);
//!   two processes (two `modhost invoke`s) count apart. `modhost mcp` is
//!   one process for all its calls.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::rate_limited::{QuotaLimit, QuotaScope, RateLimited};
use super::settings::{Limits, QuotaConfig};

/// The window of a per-minute limit.
pub(crate) const MINUTE: Duration = Duration::from_secs(60);

/// What a concurrency refusal suggests: the host cannot know when a
/// running call ends.
const CONCURRENT_RETRY_S: u64 = 1;

/// The counts of one host (and its clones).
#[derive(Debug, Default)]
pub(crate) struct Quotas {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Times of the calls admitted in the last minute, by what counts them.
    windows: HashMap<Key, VecDeque<Instant>>,
    /// Calls running now, by what counts them.
    running: HashMap<Key, u32>,
    /// Times of the approval questions asked in the last minute, by the
    /// principal whose calls they were about; a principal none was asked
    /// about in the last minute is forgotten.
    questions: HashMap<String, VecDeque<Instant>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Tool(String),
    Principal(String),
}

impl Key {
    fn scope(&self) -> QuotaScope {
        match self {
            Key::Tool(tool) => QuotaScope::Tool(tool.clone()),
            Key::Principal(principal) => QuotaScope::Principal(principal.clone()),
        }
    }
}

/// One admitted call's place among the running ones; dropped when the
/// call ends.
#[derive(Debug)]
pub(crate) struct Permit {
    quotas: Option<Arc<Quotas>>,
    running: Vec<Key>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(quotas) = &self.quotas else { return };
        let mut state = quotas.state.lock().unwrap_or_else(|e| e.into_inner());
        for key in &self.running {
            if let Some(count) = state.running.get_mut(key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    state.running.remove(key);
                }
            }
        }
    }
}

/// The call being admitted: what counts it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller<'a> {
    pub tool: &'a str,
    pub module: &'a str,
    pub capability: &'a str,
    pub principal: &'a str,
}

impl Quotas {
    /// Admit one call of `caller` at `now` under `config`, or say which
    /// quota refuses it.
    pub(crate) fn admit(
        self: &Arc<Self>,
        config: &QuotaConfig,
        caller: Caller<'_>,
        now: Instant,
    ) -> Result<Permit, RateLimited> {
        if config.limits_no_call() {
            return Ok(Permit {
                quotas: None,
                running: Vec::new(),
            });
        }
        let counted = [
            (
                Key::Tool(caller.tool.to_owned()),
                config.tool_limits(caller.tool, caller.module, caller.capability),
            ),
            (
                Key::Principal(caller.principal.to_owned()),
                config.principal_limits(caller.principal),
            ),
        ];
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for (key, limits) in &counted {
            state.check(key, *limits, now)?;
        }
        let mut running = Vec::new();
        for (key, limits) in counted {
            if limits.calls_per_minute.is_some() {
                state.windows.entry(key.clone()).or_default().push_back(now);
            }
            if limits.concurrent_calls.is_some() {
                *state.running.entry(key.clone()).or_default() += 1;
                running.push(key);
            }
        }
        Ok(Permit {
            quotas: Some(Arc::clone(self)),
            running,
        })
    }

    /// Count one call of `principal` that named no tool (an MCP client's
    /// made-up name) against the principal's calls per minute, or say it
    /// is over: such calls run nothing, but each is recorded, so a flood
    /// of them is bounded like calls that run.
    pub(crate) fn count_unknown_tool(
        &self,
        config: &QuotaConfig,
        principal: &str,
        now: Instant,
    ) -> Result<(), RateLimited> {
        let limits = config.principal_limits(principal);
        if limits.calls_per_minute.is_none() {
            return Ok(());
        }
        let key = Key::Principal(principal.to_owned());
        let per_minute = Limits {
            concurrent_calls: None,
            ..limits
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.check(&key, per_minute, now)?;
        state.windows.entry(key).or_default().push_back(now);
        Ok(())
    }

    /// Admit one approval question about a call of `principal` at `now`,
    /// or refuse it: at most `config.elicitations_per_minute` per principal
    /// in any minute. Per principal, so one caller asking in a loop spends
    /// its own budget, never another's.
    pub(crate) fn admit_question(
        &self,
        config: &QuotaConfig,
        principal: &str,
        now: Instant,
    ) -> Result<(), RateLimited> {
        let limit = config.elicitations_per_minute;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Forget every principal whose minute emptied: the map holds only
        // those asked about in the last minute, each at most `limit` times.
        state.questions.retain(|_, window| {
            prune(window, now);
            !window.is_empty()
        });
        let asked = state.questions.get(principal);
        if asked.map_or(0, VecDeque::len) >= limit as usize {
            return Err(RateLimited {
                scope: QuotaScope::Questions(principal.to_owned()),
                limit: QuotaLimit::PerMinute(limit),
                retry_after_s: retry_after(asked.and_then(|w| w.front().copied()), now),
            });
        }
        state
            .questions
            .entry(principal.to_owned())
            .or_default()
            .push_back(now);
        Ok(())
    }
}

impl State {
    /// Whether one more call counted by `key` fits `limits` at `now`.
    fn check(&mut self, key: &Key, limits: Limits, now: Instant) -> Result<(), RateLimited> {
        if let Some(limit) = limits.concurrent_calls
            && self.running.get(key).copied().unwrap_or(0) >= limit
        {
            return Err(RateLimited {
                scope: key.scope(),
                limit: QuotaLimit::Concurrent(limit),
                retry_after_s: CONCURRENT_RETRY_S,
            });
        }
        let Some(limit) = limits.calls_per_minute else {
            return Ok(());
        };
        let Some(window) = self.windows.get_mut(key) else {
            return Ok(());
        };
        prune(window, now);
        if window.is_empty() {
            self.windows.remove(key);
            return Ok(());
        }
        if window.len() >= limit as usize {
            return Err(RateLimited {
                scope: key.scope(),
                limit: QuotaLimit::PerMinute(limit),
                retry_after_s: retry_after(window.front().copied(), now),
            });
        }
        Ok(())
    }
}

/// Drop the times a minute or more before `now`.
fn prune(window: &mut VecDeque<Instant>, now: Instant) {
    while window
        .front()
        .is_some_and(|&at| now.saturating_duration_since(at) >= MINUTE)
    {
        window.pop_front();
    }
}

/// Whole seconds until `oldest` leaves the minute (at least 1).
fn retry_after(oldest: Option<Instant>, now: Instant) -> u64 {
    let left = oldest.map_or(Duration::ZERO, |at| {
        (at + MINUTE).saturating_duration_since(now)
    });
    let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> QuotaConfig {
        #[derive(serde::Deserialize)]
        struct Wrapper {
            quotas: QuotaConfig,
        }
        toml::from_str::<Wrapper>(text).unwrap().quotas
    }

    fn caller(tool: &str, principal: &'static str) -> Caller<'static> {
        let tool: &'static str = Box::leak(tool.to_owned().into_boxed_str());
        Caller {
            tool,
            module: "m",
            capability: "m.c",
            principal,
        }
    }

    #[test]
    fn a_burst_gets_exactly_the_limit_and_the_retry_is_when_the_oldest_leaves() {
        let quotas = Arc::new(Quotas::default());
        let config = config("[quotas.each_tool]\ncalls_per_minute = 5\n");
        let start = Instant::now();
        for i in 0..5 {
            let at = start + Duration::from_secs(i);
            quotas.admit(&config, caller("t", "p"), at).unwrap();
        }
        let refused = quotas
            .admit(&config, caller("t", "p"), start + Duration::from_secs(10))
            .unwrap_err();
        assert_eq!(refused.scope, QuotaScope::Tool("t".into()));
        assert_eq!(refused.limit, QuotaLimit::PerMinute(5));
        assert_eq!(refused.retry_after_s, 50);
        // Another tool has its own count; a refused call used up nothing.
        quotas
            .admit(&config, caller("u", "p"), start + Duration::from_secs(10))
            .unwrap();
        // The oldest leaves the window at 60 s: one more fits, not two.
        let later = start + MINUTE;
        quotas.admit(&config, caller("t", "p"), later).unwrap();
        let refused = quotas.admit(&config, caller("t", "p"), later).unwrap_err();
        assert_eq!(refused.retry_after_s, 1);
    }

    #[test]
    fn at_once_counts_running_calls_until_their_permit_drops() {
        let quotas = Arc::new(Quotas::default());
        let config = config("[quotas.each_principal]\nconcurrent_calls = 2\n");
        let now = Instant::now();
        let first = quotas.admit(&config, caller("a", "p"), now).unwrap();
        let _second = quotas.admit(&config, caller("b", "p"), now).unwrap();
        let refused = quotas.admit(&config, caller("c", "p"), now).unwrap_err();
        assert_eq!(refused.scope, QuotaScope::Principal("p".into()));
        assert_eq!(refused.limit, QuotaLimit::Concurrent(2));
        assert!(refused.retry_after_s >= 1);
        quotas.admit(&config, caller("c", "q"), now).unwrap();
        drop(first);
        quotas.admit(&config, caller("c", "p"), now).unwrap();
    }

    #[test]
    fn nothing_is_counted_without_a_limit_and_questions_have_their_own() {
        let quotas = Arc::new(Quotas::default());
        let unlimited = QuotaConfig::default();
        let now = Instant::now();
        for _ in 0..1000 {
            quotas.admit(&unlimited, caller("t", "p"), now).unwrap();
        }
        assert!(quotas.state.lock().unwrap().windows.is_empty());
        let two = config("[quotas]\nelicitations_per_minute = 2\n");
        quotas.admit_question(&two, "p", now).unwrap();
        quotas.admit_question(&two, "p", now).unwrap();
        let refused = quotas.admit_question(&two, "p", now).unwrap_err();
        assert_eq!(refused.scope, QuotaScope::Questions("p".into()));
        assert_eq!(refused.retry_after_s, 60);
        quotas.admit_question(&two, "p", now + MINUTE).unwrap();
    }

    /// The attack: one caller asks in a loop until its budget is spent.
    /// Another caller's question is still admitted, the refusal names the
    /// caller who spent it, and a caller asked about no more is forgotten.
    #[test]
    fn one_principals_spent_questions_do_not_refuse_anothers() {
        let quotas = Arc::new(Quotas::default());
        let one = config("[quotas]\nelicitations_per_minute = 1\n");
        let now = Instant::now();
        quotas.admit_question(&one, "ci-bot", now).unwrap();
        let refused = quotas.admit_question(&one, "ci-bot", now).unwrap_err();
        assert_eq!(refused.scope, QuotaScope::Questions("ci-bot".into()));
        assert!(refused.to_string().contains("caller ci-bot"), "{refused}");
        quotas.admit_question(&one, "local:alice", now).unwrap();
        // A principal whose name looks like a pattern counts on its own.
        quotas.admit_question(&one, "ci-*", now).unwrap();
        assert_eq!(quotas.state.lock().unwrap().questions.len(), 3);
        let later = now + MINUTE;
        quotas.admit_question(&one, "ci-bot", later).unwrap();
        assert_eq!(
            quotas.state.lock().unwrap().questions.len(),
            1,
            "the callers asked about no more are forgotten"
        );
    }
}
