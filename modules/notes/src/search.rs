//! `notes.search`: notes whose text or tags contain a string, ignoring case.

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::notebook::{self, Selection};

pub const DESCRIPTION: &str = "Search the notes for `query` (plain text, case-insensitive) in their text and tags, newest first, \
optionally only those with `tag`. Returns up to `limit` notes (default 50, at most 500), the number that matched (`total`) and \
`truncated` when more did.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// The text to find.
    #[schemars(length(min = 1, max = 256))]
    pub query: String,
    /// Only notes with this tag.
    #[serde(default)]
    pub tag: Option<String>,
    /// The most notes to return (1 to 500, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
}

pub fn run(ctx: &mut Ctx, input: &SearchInput) -> Result<Selection, ModError> {
    let query = input.query.to_lowercase();
    if query.trim().is_empty() {
        return Err(ModError::invalid_input("query is empty"));
    }
    let tag = input
        .tag
        .as_deref()
        .map(notebook::normalize_tag)
        .transpose()?;
    let notebook = notebook::load(ctx)?;
    let selection = notebook::select(&notebook, input.limit, |note| {
        tag.as_ref().is_none_or(|t| note.tags.contains(t))
            && (note.text.to_lowercase().contains(&query)
                || note.tags.iter().any(|t| t.contains(&query)))
    });
    ctx.set_text(crate::list::summary(&selection, "matching notes"));
    Ok(selection)
}
