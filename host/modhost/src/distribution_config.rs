//! `[distribution]` in `config.toml`: how remote sources are fetched.
//!
//! ```toml
//! [distribution]
//! ca_certificates = ["/etc/ssl/internal-ca.pem"]  # trusted besides the web PKI's roots
//! max_download_bytes = 536870912                  # one artifact (512 MiB)
//! download_timeout_secs = 600                     # one download, connection to last byte
//! stall_timeout_secs = 30                         # the longest wait for the next bytes
//! ```
//!
//! Design decisions: durations are whole seconds in `_secs` keys, as in
//! `[http]`. An operator's CA is added to the web PKI's roots, never in
//! their place, and there is no key that turns verification off: a lab or
//! an internal mirror is trusted by naming its CA. The CA files are read
//! when a fetch starts, so a missing file names itself there (and
//! `config.toml` stays loadable for everything else); its path must be
//! absolute, and every bound above zero, checked when the file is read.

use std::path::PathBuf;
use std::time::Duration;

use modhost_distribution::FetchLimits;
use serde::Deserialize;

/// `[distribution]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DistributionConfig {
    /// PEM files of CAs trusted besides the web PKI's roots.
    pub ca_certificates: Vec<PathBuf>,
    /// The most bytes one downloaded artifact may have.
    pub max_download_bytes: u64,
    /// Seconds one download may take, connection to last byte.
    pub download_timeout_secs: u64,
    /// Seconds a download may wait for its next bytes.
    pub stall_timeout_secs: u64,
}

impl Default for DistributionConfig {
    fn default() -> Self {
        let limits = FetchLimits::default();
        DistributionConfig {
            ca_certificates: Vec::new(),
            max_download_bytes: limits.max_bytes,
            download_timeout_secs: limits.total.as_secs(),
            stall_timeout_secs: limits.stall.as_secs(),
        }
    }
}

impl DistributionConfig {
    /// The bounds of one fetch.
    pub fn limits(&self) -> FetchLimits {
        FetchLimits {
            max_bytes: self.max_download_bytes,
            total: Duration::from_secs(self.download_timeout_secs),
            stall: Duration::from_secs(self.stall_timeout_secs),
        }
    }

    /// What is wrong with the section, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for path in &self.ca_certificates {
            if !path.is_absolute() {
                problems.push(format!(
                    "[distribution] ca_certificates: {:?}: the path must be absolute",
                    path.display().to_string()
                ));
            }
        }
        for (key, value) in [
            ("max_download_bytes", self.max_download_bytes),
            ("download_timeout_secs", self.download_timeout_secs),
            ("stall_timeout_secs", self.stall_timeout_secs),
        ] {
            if value == 0 {
                problems.push(format!(
                    "[distribution] {key} = 0 would refuse every download; give a positive value or leave the key out for the default"
                ));
            }
        }
        if self.stall_timeout_secs > self.download_timeout_secs {
            problems.push(format!(
                "[distribution] stall_timeout_secs = {} is longer than download_timeout_secs = {}: a stall would never be noticed before the whole download times out",
                self.stall_timeout_secs, self.download_timeout_secs
            ));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> DistributionConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_are_the_fetch_limits_defaults_and_have_no_problem() {
        let config = DistributionConfig::default();
        assert_eq!(config.limits(), FetchLimits::default());
        assert!(config.problems().is_empty());
    }

    #[test]
    fn keys_parse_and_bad_values_are_named() {
        let config = parse(
            "ca_certificates = [\"/ca.pem\"]\nmax_download_bytes = 10\ndownload_timeout_secs = 5\nstall_timeout_secs = 2\n",
        );
        assert_eq!(config.limits().max_bytes, 10);
        assert_eq!(config.limits().stall, Duration::from_secs(2));
        assert!(config.problems().is_empty());

        let bad = parse("ca_certificates = [\"ca.pem\"]\nmax_download_bytes = 0\n");
        let problems = bad.problems().join("; ");
        assert!(problems.contains("must be absolute"), "{problems}");
        assert!(problems.contains("max_download_bytes = 0"), "{problems}");
        let slow = parse("download_timeout_secs = 5\nstall_timeout_secs = 60\n");
        assert!(slow.problems()[0].contains("stall_timeout_secs"));
        assert!(toml::from_str::<DistributionConfig>("ca_certificate = []").is_err());
    }
}
