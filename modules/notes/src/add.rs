//! `notes.add`: append one note to the log and answer with its id.

use std::time::{SystemTime, UNIX_EPOCH};

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::log::{self, Added, Record};
use crate::notebook::{self, Note};

pub const DESCRIPTION: &str = "Add a note to the notebook kept in this module's state. `text` is the note (up to 16 KiB); `tags` \
(optional, up to 16) are short labels to list it by later (letters, digits, '-', '_', '.'; folded to lowercase). Returns the note with \
its `id` (what notes.remove takes) and how many notes the notebook now holds.";

/// The longest note, in bytes.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
const MAX_TAGS: usize = 16;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddInput {
    /// The note.
    #[schemars(length(min = 1, max = 16384))]
    pub text: String,
    /// Labels to find it by, e.g. `["todo", "deploy"]`.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub tags: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AddOutput {
    pub note: Note,
    /// Notes in the notebook after this one.
    pub count: usize,
}

pub fn run(ctx: &mut Ctx, input: &AddInput) -> Result<AddOutput, ModError> {
    let text = input.text.trim_end().to_owned();
    if text.trim().is_empty() {
        return Err(ModError::invalid_input("text is empty"));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(ModError::invalid_input(format!(
            "text is {} bytes; a note holds at most {MAX_TEXT_BYTES}",
            text.len()
        ))
        .with_remedy("split it into several notes sharing a tag"));
    }
    if input.tags.len() > MAX_TAGS {
        return Err(ModError::invalid_input(format!(
            "{} tags; a note takes at most {MAX_TAGS}",
            input.tags.len()
        )));
    }
    let mut tags = input
        .tags
        .iter()
        .map(|t| notebook::normalize_tag(t))
        .collect::<Result<Vec<_>, _>>()?;
    tags.sort();
    tags.dedup();

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let nonce = format!("{}-{}", ctx.request_id(), now.as_nanos());
    let record = Record::Add(Added {
        nonce: nonce.clone(),
        text,
        tags,
        created: rfc3339_utc(now.as_secs()),
    });
    log::append(ctx.root(notebook::STATE)?, &record)?;

    let notebook = notebook::load(ctx)?;
    let note = notebook
        .notes
        .iter()
        .rev()
        .find(|n| n.nonce == nonce)
        .cloned()
        .ok_or_else(|| {
            ModError::failed(format!(
                "state:{}: the note was written but is not in the notebook read back",
                log::LOG
            ))
        })?;
    ctx.set_text(format!(
        "added {} ({} notes)",
        notebook::render(std::slice::from_ref(&note)),
        notebook.notes.len()
    ));
    Ok(AddOutput {
        note,
        count: notebook.notes.len(),
    })
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil-from-days
/// algorithm of Howard Hinnant's date library; no time crate is needed for it).
fn rfc3339_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339_utc;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_796_083_200 + 3661), "2026-12-01T01:01:01Z");
    }
}
