//! What the child of an exec-gated call executes: its entry, or what the
//! entry's `#!/usr/bin/env` line would run.
//!
//! A call whose capability declares no spawns makes exactly one exec, its
//! own start (`seccomp::EXEC_GATE`): every later `execve` is refused. The
//! kernel does the whole start of a script inside that one exec: a `#!`
//! line naming an interpreter, that interpreter's own `#!` line, and the
//! ELF loader of the binary at the end. Not `env`: for
//! `#!/usr/bin/env python3` the kernel runs `env`, and `env` then execs
//! `python3` itself, a second exec the gate refuses. So for such a call the
//! host does `env`'s part ([`direct`]): it finds the command `env` would
//! run in the PATH the module gets, and execs it directly with the argument
//! list `env` would give it (`[CMD, ARGS..., entry]`); what follows
//! (`CMD`'s own `#!` line, its loader) the kernel does in the same exec.
//!
//! Design decisions:
//!
//! - **The kernel's rules for `#!` lines, `env`'s for its arguments.** The
//!   first 256 bytes, the interpreter up to the first space or tab, the
//!   rest of the line one argument (`fs/binfmt_script.c`); `env`'s options
//!   read as GNU `env` reads them, `-S` splitting its string into words and
//!   option parsing going on over them (`#!/usr/bin/env -S python3 -u`
//!   works). Levels before the last `env` are rewritten as the kernel
//!   would; the program after it is left to the kernel.
//! - **What the host cannot do as `env` would is refused, naming the
//!   line.** `-i`, `-u`, `-C`, `NAME=value`, `-v`, signal options, and a
//!   `-S` string with quotes, escapes or `${VAR}`: each changes what the
//!   program gets in a way the host does not reproduce, and a module that
//!   silently ran with a different environment or folder would be worse
//!   than one that does not start. The refusal says which word and how to
//!   write the line instead (`ConfineError::Unconfined`).
//! - **Only for exec-gated calls.** A call that may spawn runs `env` as
//!   the kernel would, options and all: nothing changes for it.
//! - **Checked against the chain.** What is executed must be a file of the
//!   interpreter chain landlock grants (`interpreter::resolve`), which reads
//!   the same line more leniently: a disagreement is a start error, never a
//!   silent execute denial ([`within`]).
//! - **Cached by the entry's identity and PATH,** as the chain is: a call
//!   pays a look-up once per module version.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::ConfineError;
use crate::flavour::Flavour;
use crate::interpreter::{self, Chain};

/// The bytes of a file the kernel reads for its `#!` line
/// (`BINPRM_BUF_SIZE`).
const BINPRM_BUF_SIZE: u64 = 256;

/// How many `#!` levels the kernel follows in one exec before `ELOOP`.
const MAX_LEVELS: usize = 5;

/// What `env` runs when PATH is unset (glibc's `execvp`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What the child execs in place of its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The file, as `env` would find it (`<PATH folder>/python3`).
    pub(crate) program: PathBuf,
    /// Its argument list, `argv[0]` first: `[CMD, ARGS..., entry]`.
    pub(crate) argv: Vec<OsString>,
    /// `program`, canonical: a file of the entry's interpreter chain.
    canonical: PathBuf,
}

/// Why the host cannot start an exec-gated module as its `#!` line asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaunchRefused {
    reason: String,
    remedy: String,
}

impl From<LaunchRefused> for ConfineError {
    fn from(refused: LaunchRefused) -> ConfineError {
        ConfineError::Unconfined {
            reason: refused.reason,
            remedy: refused.remedy,
        }
    }
}

/// What a call of `flavour` execs instead of `entry`: `None` to exec the
/// entry itself (a call that may spawn, or an entry whose start runs no
/// `env`).
pub(crate) fn for_call(
    entry: &Path,
    flavour: Flavour,
) -> Result<Option<Arc<Launch>>, ConfineError> {
    if !flavour.exec_gated {
        return Ok(None);
    }
    direct_cached(entry).map_err(ConfineError::from)
}

/// `Err` when `launch` executes a file that `chain` (what landlock lets the
/// call execute) does not hold.
pub(crate) fn within(launch: Option<&Launch>, chain: &Chain) -> Result<(), ConfineError> {
    match launch {
        Some(launch) if !chain.executables.contains(&launch.canonical) => {
            Err(ConfineError::Unconfined {
                reason: format!(
                    "the host would start {} ({}) for the module's `#!/usr/bin/env` line, which its interpreter chain does not hold",
                    launch.program.display(),
                    launch.canonical.display()
                ),
                remedy: "name the interpreter by its path in the module's `#!` line (`#!/usr/bin/python3`)".into(),
            })
        }
        _ => Ok(()),
    }
}

/// [`direct`] in the PATH the module gets
/// ([`crate::environment::module_path`]), cached by the entry's identity
/// and that PATH.
fn direct_cached(entry: &Path) -> Result<Option<Arc<Launch>>, LaunchRefused> {
    type Key = (
        PathBuf,
        Option<(std::time::SystemTime, u64)>,
        Option<OsString>,
    );
    type Entry = Result<Option<Arc<Launch>>, LaunchRefused>;
    static CACHE: Mutex<Option<HashMap<Key, Entry>>> = Mutex::new(None);
    let stamp = std::fs::metadata(entry)
        .ok()
        .and_then(|m| Some((m.modified().ok()?, m.len())));
    let path = crate::environment::module_path();
    let key: Key = (entry.to_path_buf(), stamp, path);
    if let Some(found) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|map| map.get(&key).cloned())
    {
        return found;
    }
    let found = direct(entry, key.2.as_deref()).map(|launch| launch.map(Arc::new));
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    // Bounded: a host runs a few dozen modules; a changed file makes a new key.
    if map.len() > 512 {
        map.clear();
    }
    map.insert(key, found.clone());
    found
}

/// What the kernel and `env` together would execute for `entry` (argument
/// list `[entry]`), with commands looked up in `path_env`, up to and
/// including the last `env` of its chain of `#!` lines; `None` when no
/// `env` is on the way (the kernel alone starts it in one exec).
pub(crate) fn direct(
    entry: &Path,
    path_env: Option<&OsStr>,
) -> Result<Option<Launch>, LaunchRefused> {
    let mut file = entry.to_path_buf();
    let mut argv: Vec<OsString> = vec![entry.as_os_str().to_owned()];
    let mut launch = None;
    for _ in 0..MAX_LEVELS {
        let Some(header) = interpreter::read_start(&file, BINPRM_BUF_SIZE) else {
            break;
        };
        let Some((interpreter, argument)) = kernel_shebang(&header) else {
            break;
        };
        let interpreter = PathBuf::from(OsString::from_vec(interpreter));
        let argument = argument.map(OsString::from_vec);
        let rest = argv.split_off(1);
        if !runs_env(&interpreter) {
            // The kernel's rewrite: [interpreter, argument?, file, rest...].
            argv = std::iter::once(interpreter.clone().into_os_string())
                .chain(argument)
                .chain(std::iter::once(file.into_os_string()))
                .chain(rest)
                .collect();
            file = interpreter;
            continue;
        }
        let line = |detail: &str| {
            let written = match &argument {
                Some(argument) => {
                    format!("#!{} {}", interpreter.display(), argument.to_string_lossy())
                }
                None => format!("#!{}", interpreter.display()),
            };
            format!(
                "the `{written}` line of {} {detail} (a call that declares no spawns may execute nothing after its start, `env`'s own exec included, so the host starts what `env` would run itself)",
                file.display()
            )
        };
        let (command, arguments) =
            env_command(argument.as_ref()).map_err(|refusal| LaunchRefused {
                // The fix in the reason too: discovery shows a describe
                // that failed by its reason alone.
                reason: format!(
                    "{}; write it as `#!/usr/bin/env CMD`, `#!/usr/bin/env -S CMD ARG...` (plain words) or `#!/path/to/CMD ARG`",
                    line(&refusal.detail())
                ),
                remedy: refusal.remedy(),
            })?;
        let program =
            interpreter::lookup_os(&command, Some(path_env.unwrap_or(OsStr::new(DEFAULT_PATH))))
                .ok_or_else(|| LaunchRefused {
                    reason: line(&format!(
                        "runs `{}`, which is not on the module's PATH ({})",
                        command.to_string_lossy(),
                        path_env.unwrap_or(OsStr::new(DEFAULT_PATH)).to_string_lossy()
                    )),
                    remedy: "install the interpreter where the host's PATH finds it, or name it by its path in the `#!` line (`#!/usr/bin/python3`)".into(),
                })?;
        argv = std::iter::once(command)
            .chain(arguments)
            .chain(std::iter::once(file.into_os_string()))
            .chain(rest)
            .collect();
        file = program;
        launch = Some((file.clone(), argv.clone()));
    }
    let Some((program, argv)) = launch else {
        return Ok(None);
    };
    let canonical = std::fs::canonicalize(&program).map_err(|e| LaunchRefused {
        reason: format!(
            "{} (what the module's `#!/usr/bin/env` line runs) cannot be resolved: {e}",
            program.display()
        ),
        remedy: "name the interpreter by its path in the module's `#!` line".into(),
    })?;
    Ok(Some(Launch {
        program,
        argv,
        canonical,
    }))
}

/// Whether `interpreter` is `env` (by its canonical name, as the chain
/// resolution decides it).
fn runs_env(interpreter: &Path) -> bool {
    std::fs::canonicalize(interpreter)
        .ok()
        .is_some_and(|p| p.file_name().is_some_and(|n| n == "env"))
}

/// The `#!` line of `header` as the kernel reads it (`fs/binfmt_script.c`,
/// Linux 5.1 and later): the interpreter and its one optional argument;
/// `None` where the kernel would not run it as a script.
fn kernel_shebang(header: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let spacetab = |b: u8| b == b' ' || b == b'\t';
    let terminator = |b: u8| spacetab(b) || b == 0;
    let buf = &header[..header.len().min(BINPRM_BUF_SIZE as usize)];
    if !buf.starts_with(b"#!") {
        return None;
    }
    // The line ends at a newline before any NUL (`strnchr`); without one,
    // at the buffer's last byte, if the interpreter's name ends before it.
    let newline = buf
        .iter()
        .take_while(|&&b| b != 0)
        .position(|&b| b == b'\n');
    let mut end = match newline {
        Some(at) => at,
        None => {
            let name = 2 + buf[2..].iter().position(|&b| !spacetab(b))?;
            let last = BINPRM_BUF_SIZE as usize - 1;
            let body = &buf[name..buf.len().min(last)];
            body.iter().position(|&b| terminator(b))?;
            buf.len().min(last)
        }
    };
    while end > 2 && spacetab(buf[end - 1]) {
        end -= 1;
    }
    let line = &buf[..end];
    let name = 2 + line[2..].iter().position(|&b| !spacetab(b))?;
    let separator = line[name..]
        .iter()
        .position(|&b| terminator(b))
        .map(|at| name + at);
    let interpreter = line[name..separator.unwrap_or(end)].to_vec();
    let argument = separator
        .filter(|&at| line[at] != 0)
        .and_then(|at| {
            line[at..]
                .iter()
                .position(|&b| !spacetab(b))
                .map(|s| at + s)
        })
        .map(|start| {
            let arg = &line[start..];
            arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())].to_vec()
        });
    Some((interpreter, argument))
}

/// Why the host cannot do what `env` would with a `#!` line's argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EnvRefusal {
    /// An option the host does not reproduce (`-i`, `-u NAME`, `-C DIR`,
    /// `-v`, ...).
    Option(String),
    /// `NAME=value`: a variable `env` would set.
    Assignment(String),
    /// A `-S` string with quotes, escapes or `${VAR}`.
    Quoting(String),
    /// Options only: `env` would run the entry itself again.
    NoCommand,
    /// The kernel hands `env` the whole rest of the line as one word.
    OneWord(String),
}

impl EnvRefusal {
    fn detail(&self) -> String {
        match self {
            EnvRefusal::Option(option) => format!(
                "asks `env` for `{option}`, which the host does not reproduce when it starts the interpreter itself"
            ),
            EnvRefusal::Assignment(assignment) => format!(
                "asks `env` to set `{assignment}`, which the host does not reproduce when it starts the interpreter itself"
            ),
            EnvRefusal::Quoting(word) => format!(
                "splits `{word}` with `env -S` quoting, escapes or variables, which the host does not reproduce when it starts the interpreter itself"
            ),
            EnvRefusal::NoCommand => "names no command for `env` to run".into(),
            EnvRefusal::OneWord(word) => format!(
                "hands `env` `{word}` as one word (the kernel passes the rest of a `#!` line as one argument), so `env` would look for a command of that name"
            ),
        }
    }

    fn remedy(&self) -> String {
        let plain = "write the line as `#!/usr/bin/env CMD` or `#!/usr/bin/env -S CMD ARG...` with plain words, or name the interpreter by its path (`#!/usr/bin/python3 -u`)";
        match self {
            EnvRefusal::Option(_) | EnvRefusal::Assignment(_) => format!(
                "{plain}; set variables, the folder or signal handling inside the program; or declare a program in the capability's `effects.spawns` (the operator granting it), which lets `env` run as it is"
            ),
            EnvRefusal::OneWord(_) => {
                format!("{plain} (`-S` splits the words)")
            }
            EnvRefusal::Quoting(_) | EnvRefusal::NoCommand => plain.into(),
        }
    }
}

/// What `env` would execute for the `#!` line argument `argument` (then
/// the entry's path): the command and its arguments from the line, as GNU
/// `env` reads them (`getopt` with `+`, `-S` splitting its string and
/// option parsing starting over on the words). Only `-S`,
/// `--split-string=` and `--` are honoured; anything else is refused. A
/// line that runs out of words before a command is refused too: `env`
/// would take the entry's path for its command and run the entry again.
fn env_command(argument: Option<&OsString>) -> Result<(OsString, Vec<OsString>), EnvRefusal> {
    let mut words: VecDeque<Vec<u8>> = argument
        .map(|a| a.as_bytes().to_vec())
        .into_iter()
        .collect();
    let text = |word: &[u8]| String::from_utf8_lossy(word).into_owned();
    let command = loop {
        let word = words.pop_front().ok_or(EnvRefusal::NoCommand)?;
        if word == b"--" {
            break words.pop_front().ok_or(EnvRefusal::NoCommand)?;
        }
        if let Some(long) = word.strip_prefix(b"--") {
            match long.strip_prefix(b"split-string=") {
                Some(string) => split_into(string, &mut words)?,
                None => return Err(EnvRefusal::Option(text(&word))),
            }
            continue;
        }
        if let Some(cluster) = word.strip_prefix(b"-") {
            match cluster.split_first() {
                Some((b'S', attached)) => {
                    let string = if attached.is_empty() {
                        words.pop_front().ok_or(EnvRefusal::NoCommand)?
                    } else {
                        attached.to_vec()
                    };
                    split_into(&string, &mut words)?;
                }
                // `-` alone is `-i`.
                Some((letter, _)) => {
                    return Err(EnvRefusal::Option(format!(
                        "-{}",
                        char::from(*letter).escape_default()
                    )));
                }
                None => return Err(EnvRefusal::Option("-".into())),
            }
            continue;
        }
        if word.contains(&b'=') {
            return Err(EnvRefusal::Assignment(text(&word)));
        }
        break word;
    };
    if command.iter().any(|&b| b == b' ' || b == b'\t') {
        return Err(EnvRefusal::OneWord(text(&command)));
    }
    let arguments = words.into_iter().map(OsString::from_vec).collect();
    Ok((OsString::from_vec(command), arguments))
}

/// `env -S`'s split of `string`, put in front of `words` (option parsing
/// starts over on them). Plain words only: separated by white space, a
/// word that starts with `#` ending the string (a comment, as `env` reads
/// it); quotes, backslashes and `$` are refused.
fn split_into(string: &[u8], words: &mut VecDeque<Vec<u8>>) -> Result<(), EnvRefusal> {
    if string
        .iter()
        .any(|b| matches!(b, b'\'' | b'"' | b'\\' | b'$'))
    {
        return Err(EnvRefusal::Quoting(
            String::from_utf8_lossy(string).trim().to_owned(),
        ));
    }
    let split: Vec<Vec<u8>> = string
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .take_while(|w| !w.starts_with(b"#"))
        .map(<[u8]>::to_vec)
        .collect();
    for word in split.into_iter().rev() {
        words.push_front(word);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
