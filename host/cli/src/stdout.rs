//! The command's standard output.
//!
//! Rust programs ignore `SIGPIPE`, so `println!` panics when the reader has
//! gone (`modhost list | head -1`). The CLI prints through [`outln!`] and
//! [`out!`] instead: a closed stdout ends the process quietly with the
//! status a shell reports for `SIGPIPE` (141), as other Unix tools end.
//! `SIGPIPE` itself stays ignored: the host writes to module pipes, and a
//! module that exits without reading must never take the host down.

use std::io::Write;

/// The exit status of a process ended by `SIGPIPE`, as shells report it.
const EXIT_BROKEN_PIPE: i32 = 128 + 13;

/// `EX_IOERR` from sysexits.h: stdout failed for another reason.
const EXIT_IO_ERROR: i32 = 74;

/// Write `args` to stdout; see the module documentation for a closed stdout.
pub fn write(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        eprintln!("error: could not write to stdout: {e}");
        std::process::exit(EXIT_IO_ERROR);
    }
}

/// `println!` for the command's output (see [`write`]).
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the command's output (see [`write`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!($($arg)*))
    };
}

/// Print `value` as pretty JSON on stdout (a closed pipe ends the command
/// quietly, see this file).
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    outln!("{text}");
    Ok(())
}
