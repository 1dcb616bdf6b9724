//! `notes.list`: the newest notes, all or those carrying one tag.

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::notebook::{self, Selection};

pub const DESCRIPTION: &str = "List the notes, newest first, optionally only those with `tag`. Returns up to `limit` notes \
(default 50, at most 500) with their ids, tags and creation time, the number that matched (`total`) and `truncated` when more did.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Only notes with this tag.
    #[serde(default)]
    pub tag: Option<String>,
    /// The most notes to return (1 to 500, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
}

pub fn run(ctx: &mut Ctx, input: &ListInput) -> Result<Selection, ModError> {
    let tag = input
        .tag
        .as_deref()
        .map(notebook::normalize_tag)
        .transpose()?;
    let notebook = notebook::load(ctx)?;
    let selection = notebook::select(&notebook, input.limit, |note| {
        tag.as_ref().is_none_or(|t| note.tags.contains(t))
    });
    ctx.set_text(summary(&selection, "notes"));
    Ok(selection)
}

/// The text rendering shared with search: the notes, then how many more.
pub fn summary(selection: &Selection, what: &str) -> String {
    if selection.notes.is_empty() {
        return format!("no {what}");
    }
    let mut text = notebook::render(&selection.notes);
    if selection.truncated {
        text.push_str(&format!(
            "\n… {} more {what}",
            selection.total - selection.notes.len()
        ));
    }
    text
}
