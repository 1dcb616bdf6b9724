//! Quotas: how often a tool may be called and by whom, how many calls run
//! at once, and how many approval questions a server asks about each
//! principal's calls (`[quotas]` in `config.toml`, `settings`).
//!
//! Every call that reaches the invoke pipeline (`modhost invoke`, the
//! library, `modhost mcp`) is admitted here first; a call over a quota is
//! refused before anything else happens, with the kind `rate_limited` and
//! the seconds after which it would be admitted ([`RateLimited`]). An MCP
//! client sees that as a tool error (`isError`) naming both. The counts
//! are the host process's (`counters`): one `modhost mcp` counts all its
//! calls, but separate `modhost invoke` processes do not share counts.
//!
//! # API
//!
//! [`QuotaConfig`] and [`Limits`] (`[quotas]`), [`RateLimited`] with its
//! [`QuotaScope`] and [`QuotaLimit`].

pub(crate) mod counters;
mod rate_limited;
mod settings;

pub use rate_limited::{QuotaLimit, QuotaScope, RateLimited};
pub use settings::{Limits, QuotaConfig};
