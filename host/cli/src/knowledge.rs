//! `modhost knowledge MODULE [--skill ID] [--format text|json] [--json]`: the module's verified
//! overlays and skills, each under its provenance line; documents whose
//! digest does not match are left out and reported on stderr.

use std::process::ExitCode;

use modhost::Host;
use modhost::knowledge::{self, Selection};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
    /// Only this skill (overlays are left out).
    #[arg(long, value_name = "ID")]
    skill: Option<String>,
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let module = host.module(&args.module).await?;
    let Some(descriptor) = &module.descriptor else {
        anyhow::bail!(
            "module {} did not describe itself; `modhost describe {}` says why",
            module.id,
            module.id
        );
    };
    let selection = args
        .skill
        .as_deref()
        .map_or(Selection::All, Selection::Skill);
    let loaded = knowledge::load(descriptor, module.knowledge_dir(), selection);
    if args.output.is_json() {
        super::stdout::print_json(&loaded)?;
    } else {
        let mut text = String::new();
        for doc in loaded.overlays.iter().chain(&loaded.skills) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&doc.provenance());
            text.push('\n');
            text.push_str(doc.content.trim_end());
            text.push('\n');
        }
        out!("{text}");
        for w in &loaded.warnings {
            eprintln!("warning: {w}");
        }
    }
    // Asking for one skill that is not there is the caller's mistake.
    if args.skill.is_some() && loaded.skills.is_empty() {
        return Ok(ExitCode::from(super::exit_code::EXIT_USAGE));
    }
    Ok(ExitCode::SUCCESS)
}
