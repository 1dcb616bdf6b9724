//! `--format text|json` and its shorthand `--json`, the same on every
//! command that prints a report (`list`, `describe`, `knowledge`,
//! `doctor`): text for people, or one JSON document on stdout for scripts.
//! (`tools --format` takes provider shapes instead, and `--json` there too
//! means `--format json`.)

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// text (for people) or json (one JSON document on stdout).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// Shorthand for --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

impl OutputArgs {
    pub fn is_json(&self) -> bool {
        self.json || self.format == OutputFormat::Json
    }
}
