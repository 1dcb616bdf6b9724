//! Naming a capability from the command line: the same names everywhere.
//!
//! `modhost invoke` accepts, in this order of precedence:
//!
//! 1. `MODULE CAPABILITY` (two words; the capability may be short: `search`);
//! 2. a tool name, exactly as `modhost tools` and `modhost mcp` print it
//!    (`files__files_search`), so a name copied out of an agent's transcript
//!    works unchanged;
//! 3. `MODULE.CAPABILITY` when the module named by the prefix has that
//!    capability (`files.search`);
//! 4. a capability id offered by exactly one module.
//!
//! Design decisions:
//!
//! - **Tool names are matched by recomputing them** ([`modconform::tool_name`])
//!   rather than by splitting at `__`: a long name is cut and given a digest
//!   suffix, and module ids may contain `_`, so only the forward mapping is
//!   reliable.
//! - **Resolution never looks at status.** A disabled or broken module still
//!   resolves, so the invoke pipeline reports *why* it cannot run
//!   (`module_disabled`, `module_broken`) instead of "no such capability".
//! - An ambiguous name is refused naming every candidate; it is never
//!   resolved by discovery order.

use crate::discovery::InstalledModule;
use crate::host::HostError;
use crate::invoke::InvokeError;

/// What a command-line target resolved to.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub module: &'a InstalledModule,
    /// The full capability id when the module described itself and has it;
    /// otherwise the capability as written (the invoke pipeline explains).
    pub capability: &'a str,
}

/// Resolve `target` (and the optional second word `capability`) against the
/// discovered `modules`.
// The error is the invoke pipeline's own type, reported by the same code;
// it is built at most once per command, so its size costs nothing.
#[allow(clippy::result_large_err)]
pub fn resolve<'a>(
    modules: &'a [InstalledModule],
    target: &'a str,
    capability: Option<&'a str>,
) -> Result<Target<'a>, InvokeError> {
    if let Some(capability) = capability {
        let module = modules
            .iter()
            .find(|m| m.id == target)
            .ok_or_else(|| unknown_module(modules, target))?;
        return Ok(Target {
            module,
            capability: full_capability_id(module, capability).unwrap_or(capability),
        });
    }

    let by_tool_name: Vec<Target<'a>> = modules
        .iter()
        .flat_map(|m| {
            m.descriptor
                .iter()
                .flat_map(|d| d.capabilities.iter())
                .filter(|c| modconform::tool_name(&m.id, &c.id) == target)
                .map(move |c| Target {
                    module: m,
                    capability: c.id.as_str(),
                })
        })
        .collect();
    if let Some(found) = single(&by_tool_name, target)? {
        return Ok(found);
    }

    if let Some((prefix, _)) = target.split_once('.')
        && let Some(module) = modules.iter().find(|m| m.id == prefix)
        && let Some(id) = full_capability_id(module, target)
    {
        return Ok(Target {
            module,
            capability: id,
        });
    }

    let by_capability_id: Vec<Target<'a>> = modules
        .iter()
        .filter_map(|m| {
            let c = m.descriptor.as_ref()?.capability(target)?;
            Some(Target {
                module: m,
                capability: c.id.as_str(),
            })
        })
        .collect();
    if let Some(found) = single(&by_capability_id, target)? {
        return Ok(found);
    }

    // A module id alone, or with a capability it lacks: say what it has.
    let (module_id, capability) = target
        .split_once("__")
        .or_else(|| target.split_once('.'))
        .unwrap_or((target, ""));
    match modules.iter().find(|m| m.id == module_id) {
        // A module that cannot be called (broken, refused, disabled,
        // unpinned, changed) may not even know its capabilities: the
        // pipeline names its standing, never "no capability (it has: )".
        Some(module) if !module.is_invocable() => Ok(Target {
            module,
            capability: if capability.is_empty() {
                target
            } else {
                capability
            },
        }),
        Some(module) => Err(InvokeError::UnknownCapability {
            module: module.id.clone(),
            capability: capability.to_owned(),
            available: module.capability_ids(),
        }),
        None => Err(unknown_module(modules, module_id)),
    }
}

/// The capability's full id when `module` has `capability`, or
/// `<module>.<capability>` for a short form.
fn full_capability_id<'a>(module: &'a InstalledModule, capability: &str) -> Option<&'a str> {
    let descriptor = module.descriptor.as_ref()?;
    descriptor
        .capability(capability)
        .or_else(|| descriptor.capability(&format!("{}.{capability}", module.id)))
        .map(|c| c.id.as_str())
}

/// The one candidate, none, or an error naming them all.
#[allow(clippy::result_large_err)]
fn single<'a>(candidates: &[Target<'a>], target: &str) -> Result<Option<Target<'a>>, InvokeError> {
    match candidates {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(InvokeError::Host(HostError::Refused(format!(
            "{target:?} names a capability of several modules ({}); name the module: modhost invoke MODULE CAPABILITY",
            many.iter()
                .map(|t| format!("{} {}", t.module.id, t.capability))
                .collect::<Vec<_>>()
                .join(", ")
        )))),
    }
}

fn unknown_module(modules: &[InstalledModule], id: &str) -> InvokeError {
    InvokeError::Host(HostError::UnknownModule {
        id: id.to_owned(),
        known: modules.iter().map(|m| m.id.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::installed;

    fn modules() -> Vec<InstalledModule> {
        vec![
            installed("files", &["files.search", "files.read", "shared"]),
            installed("git_tools", &["git.log", "shared"]),
        ]
    }

    fn names(t: Target<'_>) -> (String, String) {
        (t.module.id.clone(), t.capability.to_owned())
    }

    #[test]
    fn every_spelling_reaches_the_same_capability() {
        let m = modules();
        let want = ("files".to_owned(), "files.search".to_owned());
        assert_eq!(
            names(resolve(&m, "files", Some("files.search")).unwrap()),
            want
        );
        assert_eq!(names(resolve(&m, "files", Some("search")).unwrap()), want);
        assert_eq!(
            names(resolve(&m, "files__files_search", None).unwrap()),
            want
        );
        assert_eq!(names(resolve(&m, "files.search", None).unwrap()), want);
        // A module id with `_` in it: the tool name is recomputed, not split.
        assert_eq!(
            names(resolve(&m, "git_tools__git_log", None).unwrap()),
            ("git_tools".to_owned(), "git.log".to_owned())
        );
        assert_eq!(
            names(resolve(&m, "git.log", None).unwrap()),
            ("git_tools".to_owned(), "git.log".to_owned())
        );
    }

    #[test]
    fn unknown_and_ambiguous_names_are_errors_that_say_so() {
        let m = modules();
        let err = resolve(&m, "shared", None).unwrap_err();
        assert!(
            err.to_string().contains("files shared, git_tools shared"),
            "{err}"
        );
        let err = resolve(&m, "nope__x", None).unwrap_err();
        assert_eq!(err.kind(), "unknown_module");
        assert!(err.to_string().contains("\"nope\""), "{err}");
        let err = resolve(&m, "files", None).unwrap_err();
        assert_eq!(err.kind(), "unknown_capability");
        let err = resolve(&m, "files__files_nope", None).unwrap_err();
        assert_eq!(err.kind(), "unknown_capability");
        assert!(err.to_string().contains("files.search"), "{err}");
        let err = resolve(&m, "nope", Some("x")).unwrap_err();
        assert_eq!(err.kind(), "unknown_module");
        // A capability the module lacks resolves as written: the pipeline
        // reports it with the module's list.
        assert_eq!(resolve(&m, "files", Some("x")).unwrap().capability, "x");
    }
}
