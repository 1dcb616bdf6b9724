//! A cargo-style status line on stderr for long work the person waits on:
//! the first compile of a component (`   Compiling files (4.2 MB) 1.3s`,
//! then `    Compiled files in 3.1s`).
//!
//! Only on a terminal: a log file or an MCP client's stderr capture gets the
//! host's one log line instead (the watcher is not installed there). The
//! line is redrawn in place by a ticker thread, ten times a second, so the
//! elapsed time moves while the compile holds its thread.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use modhost_runner::wasm::CompileWatcher;

/// Install the status line for component compiles when stderr is a
/// terminal; `color` colours the verb as cargo does.
pub fn install(color: bool) {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        modhost_runner::wasm::watch_compiles(StatusLine {
            color,
            active: Arc::new(Mutex::new(None)),
        });
    }
}

struct StatusLine {
    color: bool,
    /// The compile being shown: module, size, start.
    active: Arc<Mutex<Option<(String, usize, Instant)>>>,
}

/// `verb` right-aligned in 12 columns, green and bold when coloured.
fn verb(verb: &str, color: bool) -> String {
    if color {
        format!("\x1b[1;32m{verb:>12}\x1b[0m")
    } else {
        format!("{verb:>12}")
    }
}

fn draw(line: &str) {
    let mut err = std::io::stderr().lock();
    // Carriage return, the line, then clear what a longer line left.
    let _ = write!(err, "\r{line}\x1b[K");
    let _ = err.flush();
}

impl CompileWatcher for StatusLine {
    fn started(&self, module: &str, bytes: usize) {
        let started = Instant::now();
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((module.to_owned(), bytes, started));
        let active = Arc::clone(&self.active);
        let color = self.color;
        let module = module.to_owned();
        std::thread::spawn(move || {
            loop {
                {
                    let guard = active.lock().unwrap_or_else(|p| p.into_inner());
                    match guard.as_ref() {
                        Some((shown, _, at)) if *shown == module && *at == started => {}
                        _ => return,
                    }
                    draw(&format!(
                        "{} {module} ({:.1} MB) for this host {:.1}s",
                        verb("Compiling", color),
                        bytes as f64 / 1e6,
                        started.elapsed().as_secs_f64()
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }

    fn finished(&self, module: &str, elapsed: Duration, compiled: bool) {
        let mut guard = self.active.lock().unwrap_or_else(|p| p.into_inner());
        *guard = None;
        if compiled {
            draw(&format!(
                "{} {module} in {:.1}s (later runs load it from the cache)\n",
                verb("Compiled", self.color),
                elapsed.as_secs_f64()
            ));
        } else {
            // The error itself follows from the caller; clear the line for it.
            draw("");
        }
    }
}
