//! When the CLI colours its output: `--color auto|always|never`, else
//! `NO_COLOR` (any non-empty value: never, <https://no-color.org>), else
//! auto (only a terminal gets colour). One decision for every writer: the
//! help and usage errors (clap), the log lines (tracing) and the status line.

use std::io::IsTerminal;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when the stream is a terminal and NO_COLOR is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// The choice in force: the flag, else `NO_COLOR`, else auto.
    pub fn resolve(flag: Option<ColorChoice>) -> ColorChoice {
        flag.unwrap_or_else(|| {
            if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
                ColorChoice::Never
            } else {
                ColorChoice::Auto
            }
        })
    }

    /// The `--color` value among raw arguments, read before clap parses
    /// them so its own help and errors follow it too (a malformed value is
    /// left to clap to report).
    pub fn from_args(args: &[std::ffi::OsString]) -> Option<ColorChoice> {
        let mut value = None;
        let mut next_is_value = false;
        for arg in args.iter().skip(1).map(|a| a.to_string_lossy()) {
            if arg == "--" {
                break;
            }
            if next_is_value {
                value = Some(arg.into_owned());
                next_is_value = false;
            } else if arg == "--color" {
                next_is_value = true;
            } else if let Some(v) = arg.strip_prefix("--color=") {
                value = Some(v.to_owned());
            }
        }
        value.and_then(|v| <ColorChoice as clap::ValueEnum>::from_str(&v, true).ok())
    }

    /// Whether stderr gets colour.
    pub fn stderr(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => std::io::stderr().is_terminal(),
        }
    }

    pub fn for_clap(self) -> clap::ColorChoice {
        match self {
            ColorChoice::Auto => clap::ColorChoice::Auto,
            ColorChoice::Always => clap::ColorChoice::Always,
            ColorChoice::Never => clap::ColorChoice::Never,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<std::ffi::OsString> {
        list.iter().map(Into::into).collect()
    }

    #[test]
    fn the_flag_is_found_in_either_spelling_and_not_after_a_double_dash() {
        assert_eq!(
            ColorChoice::from_args(&args(&["modhost", "--color", "never", "list"])),
            Some(ColorChoice::Never)
        );
        assert_eq!(
            ColorChoice::from_args(&args(&["modhost", "list", "--color=always"])),
            Some(ColorChoice::Always)
        );
        assert_eq!(
            ColorChoice::from_args(&args(&["modhost", "invoke", "m.c", "--", "--color=always"])),
            None
        );
        assert_eq!(
            ColorChoice::from_args(&args(&["modhost", "--color", "pink"])),
            None
        );
    }
}
