//! Reading one transcript file: its format detected from its first records
//! ([`detect`]), then every record handed to that format's parser
//! ([`crate::claude`], [`crate::codex`]), which reports to the
//! [`Recorder`]. Above the parsers and the session types they fill, so
//! neither imports this file.

use std::io::BufReader;
use std::time::Instant;

use modsdk::{ModError, Root};
use serde_json::{Map, Value};

use crate::line_reader::{Line, LineReader};
use crate::session::{Format, Recorder, Session, TurnText, Unreadable};
use crate::{claude, codex};

/// Records inspected for a known shape before a file is called unreadable.
const DETECTION_RECORDS: u64 = 20;
/// The deadline is checked every this many lines.
const DEADLINE_CHECK_LINES: u64 = 1024;

/// The parser state of a file whose format is known.
enum Parser {
    Claude(claude::State),
    Codex(codex::State),
}

impl Parser {
    fn format(&self) -> Format {
        match self {
            Parser::Claude(_) => Format::ClaudeCode,
            Parser::Codex(_) => Format::Codex,
        }
    }

    fn apply(&mut self, record: &Map<String, Value>, recorder: &mut Recorder<'_>) {
        if let Some(stamp) = record.get("timestamp").and_then(Value::as_str) {
            recorder.timestamp(stamp);
        }
        match self {
            Parser::Claude(state) => state.apply(record, recorder),
            Parser::Codex(state) => state.apply(record, recorder),
        }
    }

    fn finish(self, recorder: &mut Recorder<'_>) {
        match self {
            Parser::Claude(state) => state.finish(recorder),
            Parser::Codex(_) => {}
        }
    }
}

/// The format of a file whose first known record is `record`, if any.
fn detect(record: &Map<String, Value>) -> Option<Parser> {
    if claude::recognizes(record) {
        Some(Parser::Claude(claude::State::default()))
    } else {
        codex::recognizes(record).map(Parser::Codex)
    }
}

/// Read the transcript at `path` (relative to `root`) in one pass, handing
/// every user and assistant text to `on_text`. Stops early (and says so in
/// `complete`) at `deadline`.
pub fn read(
    root: &Root,
    path: &str,
    deadline: Instant,
    on_text: &mut dyn FnMut(&TurnText<'_>),
) -> Result<Session, Unreadable> {
    let unreadable = |reason: String| Unreadable {
        session: path.to_owned(),
        reason,
    };
    let file = root
        .open_file(path)
        .map_err(|e: ModError| unreadable(e.message().to_owned()))?;
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, file));
    let mut recorder = Recorder {
        // The format is fixed once detected; until then the summary is a placeholder.
        session: Session::new(path, Format::ClaudeCode),
        on_text,
        line: 0,
        stamp: String::new(),
    };
    let mut parser: Option<Parser> = None;
    let mut probed = 0u64;
    loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => return Err(unreadable(format!("reading stopped: {e}"))),
        };
        recorder.line += 1;
        recorder.session.lines = recorder.line;
        if recorder.line.is_multiple_of(DEADLINE_CHECK_LINES) && Instant::now() >= deadline {
            recorder.session.complete = false;
            break;
        }
        let record = match line {
            Line::Oversized => {
                recorder.unreadable(|| {
                    format!(
                        "longer than {} MiB, skipped",
                        crate::line_reader::MAX_LINE_BYTES >> 20
                    )
                });
                None
            }
            Line::Text(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Text(bytes) => match serde_json::from_slice::<Value>(bytes) {
                Ok(Value::Object(record)) => Some(record),
                Ok(_) => {
                    recorder.unreadable(|| "a JSON value that is not an object".to_owned());
                    None
                }
                Err(e) => {
                    recorder.unreadable(|| format!("not JSON ({e})"));
                    None
                }
            },
        };
        match (&mut parser, record) {
            (Some(parser), Some(record)) => parser.apply(&record, &mut recorder),
            (Some(_), None) => {}
            (None, record) => {
                if let Some(found) = record.as_ref().and_then(detect) {
                    recorder.session.format = found.format();
                    let mut found = found;
                    if let Some(record) = &record {
                        found.apply(record, &mut recorder);
                    }
                    parser = Some(found);
                    continue;
                }
                probed += 1;
                if probed >= DETECTION_RECORDS {
                    return Err(unreadable(not_a_transcript(&recorder.session, probed)));
                }
            }
        }
    }
    let Some(parser) = parser else {
        if !recorder.session.complete {
            return Err(unreadable(
                "the call's deadline came before its format was known".to_owned(),
            ));
        }
        if recorder.session.lines == 0 {
            return Err(unreadable("empty file".to_owned()));
        }
        return Err(unreadable(not_a_transcript(&recorder.session, probed)));
    };
    parser.finish(&mut recorder);
    let mut session = recorder.session;
    if let (Some(start), Some(end)) = (session.started_ms, session.ended_ms) {
        session.duration_seconds = Some(u64::try_from((end - start) / 1000).unwrap_or(0));
    }
    if session.project.is_none() && session.format == Format::ClaudeCode {
        // Claude Code names the folder after the project's path.
        session.project = path
            .rsplit_once('/')
            .and_then(|(dir, _)| dir.rsplit('/').next())
            .map(str::to_owned);
    }
    Ok(session)
}

fn not_a_transcript(seen: &Session, records: u64) -> String {
    match &seen.first_unreadable {
        Some(first) if seen.unreadable_lines == records => {
            format!("not JSON Lines ({first})")
        }
        _ => format!(
            "no Claude Code or Codex record in its first {records} records; not a known transcript format"
        ),
    }
}
