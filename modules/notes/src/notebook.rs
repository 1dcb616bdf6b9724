//! The notebook as the log makes it: [`fold`] replays the records into the
//! current notes, and [`select`] is what `notes.list` and `notes.search`
//! return (newest first, bounded).

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::Serialize;

use crate::log::{self, Contents, Record};

/// The root that holds the notebook.
pub const STATE: &str = "state";

/// The most notes one list or search returns.
pub const MAX_LIMIT: usize = 500;
/// The default of `limit`.
pub const DEFAULT_LIMIT: usize = 50;

/// One note as callers see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Note {
    /// Stable for the note's life; `notes.remove` takes it.
    pub id: u64,
    pub text: String,
    /// Lowercase, sorted, without duplicates.
    pub tags: Vec<String>,
    /// When it was added, RFC 3339 UTC.
    pub created: String,
    #[serde(skip)]
    #[schemars(skip)]
    pub nonce: String,
}

/// The notes in the log, by ascending id, and how many lines were skipped.
#[derive(Debug, Default)]
pub struct Notebook {
    pub notes: Vec<Note>,
    pub skipped: usize,
}

/// Replay the records: the n-th `add` is note n; a `remove` of a note that
/// is not there changes nothing.
pub fn fold(contents: Contents) -> Notebook {
    let mut notes: Vec<Note> = Vec::new();
    let mut added = 0u64;
    for record in contents.records {
        match record {
            Record::Add(add) => {
                added += 1;
                notes.push(Note {
                    id: added,
                    text: add.text,
                    tags: add.tags,
                    created: add.created,
                    nonce: add.nonce,
                });
            }
            Record::Remove { id } => notes.retain(|n| n.id != id),
        }
    }
    Notebook {
        notes,
        skipped: contents.skipped,
    }
}

/// Read the state root's notebook, telling the caller about skipped lines.
pub fn load(ctx: &mut Ctx) -> Result<Notebook, ModError> {
    let notebook = fold(log::read(ctx.root(STATE)?)?);
    if notebook.skipped > 0 {
        ctx.warn(format!(
            "{} unreadable line(s) in state:{} were skipped (a write cut short, e.g. by a crash); every complete note is intact",
            notebook.skipped,
            log::LOG
        ));
    }
    Ok(notebook)
}

/// What a list or search answers.
#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Selection {
    /// Newest first.
    pub notes: Vec<Note>,
    /// How many notes matched, returned or not.
    pub total: usize,
    /// Whether more matched than `limit`.
    pub truncated: bool,
}

/// The notes `matches` accepts, newest first, at most `limit`.
pub fn select(
    notebook: &Notebook,
    limit: Option<usize>,
    matches: impl Fn(&Note) -> bool,
) -> Selection {
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let matching: Vec<&Note> = notebook.notes.iter().rev().filter(|n| matches(n)).collect();
    Selection {
        total: matching.len(),
        truncated: matching.len() > limit,
        notes: matching.into_iter().take(limit).cloned().collect(),
    }
}

/// One line per note: `#3 [todo, work] first line of the text`.
pub fn render(notes: &[Note]) -> String {
    notes
        .iter()
        .map(|n| {
            let first = n.text.lines().next().unwrap_or_default();
            if n.tags.is_empty() {
                format!("#{} {first}", n.id)
            } else {
                format!("#{} [{}] {first}", n.id, n.tags.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tag as stored: lowercase ASCII letters, digits, `-`, `_` and `.`, 1 to
/// 32 of them; anything else is refused (an uppercase letter is folded).
pub fn normalize_tag(tag: &str) -> Result<String, ModError> {
    let tag = tag.trim().to_ascii_lowercase();
    let valid = !tag.is_empty()
        && tag.len() <= 32
        && tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
    if valid {
        Ok(tag)
    } else {
        Err(ModError::invalid_input(format!(
            "tag {tag:?}: a tag is 1 to 32 letters, digits, '-', '_' or '.'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Added;

    fn add(text: &str, tags: &[&str]) -> Record {
        Record::Add(Added {
            nonce: text.into(),
            text: text.into(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            created: "2026-01-01T00:00:00Z".into(),
        })
    }

    #[test]
    fn ids_are_positions_of_adds_and_survive_removals() {
        let notebook = fold(Contents {
            records: vec![
                add("a", &[]),
                add("b", &["x"]),
                Record::Remove { id: 1 },
                add("c", &["x"]),
                Record::Remove { id: 9 },
            ],
            skipped: 0,
        });
        let ids: Vec<(u64, &str)> = notebook
            .notes
            .iter()
            .map(|n| (n.id, n.text.as_str()))
            .collect();
        assert_eq!(ids, [(2, "b"), (3, "c")]);
        let tagged = select(&notebook, Some(1), |n| n.tags.contains(&"x".to_owned()));
        assert_eq!((tagged.total, tagged.truncated), (2, true));
        assert_eq!(tagged.notes[0].id, 3, "newest first");
    }

    #[test]
    fn tags_are_folded_and_checked() {
        assert_eq!(normalize_tag(" Work ").unwrap(), "work");
        for bad in ["", "two words", "--x;rm", &"a".repeat(33)] {
            assert_eq!(
                normalize_tag(bad).unwrap_err().kind(),
                "invalid_input",
                "{bad:?}"
            );
        }
    }
}
