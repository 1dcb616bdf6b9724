//! `notes.remove`: forget one note (a `remove` record appended to the log).

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::log::{self, Record};
use crate::notebook::{self, Note};

pub const DESCRIPTION: &str = "Remove the note with `id` (as notes.add, notes.list and notes.search return it). Returns the \
removed note and how many notes remain. An id that is not in the notebook is a not_found error.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveInput {
    /// The note's id.
    #[schemars(range(min = 1))]
    pub id: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RemoveOutput {
    pub removed: Note,
    /// Notes left.
    pub count: usize,
}

pub fn run(ctx: &mut Ctx, input: &RemoveInput) -> Result<RemoveOutput, ModError> {
    let notebook = notebook::load(ctx)?;
    let Some(removed) = notebook.notes.iter().find(|n| n.id == input.id).cloned() else {
        return Err(
            ModError::not_found(format!("no note with id {} in the notebook", input.id))
                .with_remedy("notes.list and notes.search show the ids of the notes there are"),
        );
    };
    log::append(ctx.root(notebook::STATE)?, &Record::Remove { id: input.id })?;
    let count = notebook.notes.len() - 1;
    ctx.set_text(format!(
        "removed {} ({count} notes left)",
        notebook::render(std::slice::from_ref(&removed))
    ));
    Ok(RemoveOutput { removed, count })
}
