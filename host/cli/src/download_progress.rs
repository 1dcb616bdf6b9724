//! The download progress bar of `modhost install https://…` and `oci://…`.
//!
//! Drawn on stderr only when stderr is a terminal: a script or a log file
//! reading stderr gets no carriage-return noise, and stdout (what scripts
//! parse) is never touched. A server that states no size gets a spinner
//! with the bytes so far.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use modhost::fetch_source::Progress;

/// A [`Progress`] drawing one bar per download on a terminal, nothing
/// otherwise.
#[derive(Debug)]
pub struct DownloadProgress {
    on_terminal: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl DownloadProgress {
    /// A bar when stderr is a terminal.
    pub fn for_stderr() -> DownloadProgress {
        DownloadProgress {
            on_terminal: std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(bar) = self.bar.lock()
            && let Some(bar) = bar.as_ref()
        {
            f(bar);
        }
    }
}

impl Progress for DownloadProgress {
    fn start(&self, what: &str, total: Option<u64>) {
        if !self.on_terminal {
            return;
        }
        let bar = match total {
            Some(total) => ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                .with_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                ),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        };
        bar.set_message(short_name(what));
        if let Ok(mut slot) = self.bar.lock() {
            *slot = Some(bar);
        }
    }

    fn advance(&self, bytes: u64) {
        self.with_bar(|bar| bar.inc(bytes));
    }

    fn finish(&self) {
        if let Ok(mut slot) = self.bar.lock()
            && let Some(bar) = slot.take()
        {
            bar.finish_and_clear();
        }
    }
}

/// The last path segment of a URL or reference: what fits beside a bar.
fn short_name(what: &str) -> String {
    let trimmed = what.trim_end_matches('/');
    let last = trimmed.rsplit('/').next().unwrap_or(trimmed);
    let last = last.split(['?', '#']).next().unwrap_or(last);
    if last.is_empty() {
        what.to_owned()
    } else {
        last.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_names_the_last_segment() {
        assert_eq!(short_name("https://h/a/b/m.tar.gz?x=1"), "m.tar.gz");
        assert_eq!(short_name("registry:5000/acme/notes"), "notes");
    }

    #[test]
    fn off_a_terminal_nothing_is_drawn_and_nothing_panics() {
        let progress = DownloadProgress {
            on_terminal: false,
            bar: Mutex::new(None),
        };
        progress.start("https://h/m", Some(10));
        progress.advance(5);
        progress.finish();
        assert!(progress.bar.lock().unwrap().is_none());
    }
}
