//! Per-caller policy, as the attacks it stops: rules naming principals and
//! scopes hide and refuse what they name for the callers they name and no
//! other, a caller cannot widen itself, the principal reaches every call
//! and refusal (and the audit log), and each principal has its own budget
//! of approval questions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::test_support::{RecordingInvoker, Refused, module};
use super::{CallError, KNOWLEDGE_TOOL, ModuleEntry, ToolOutcome, Toolbox};
use crate::CallWorkspace;
use crate::approval::{ApprovalConfig, ApprovedBy, PolicyVerdict, Refusal};
use crate::caller::Caller;
use crate::home::HomeLayout;
use crate::lockdown::Lockdown;

fn cap(id: &str, effects: &Value) -> Value {
    json!({"id": id, "description": format!("does {id}"),
           "input_schema": {"type": "object"}, "effects": effects})
}

/// `web`: a network tool (asks by default), a local one (allowed), one
/// that writes the workspace (asks).
fn web() -> ModuleEntry {
    module(
        "web",
        &json!([
            cap("web.get", &json!({"network": true})),
            cap("web.cached", &json!({})),
            cap("web.purge", &json!({"writes": ["workspace"]}))
        ]),
    )
}

/// The module `id` with one capability `<id>.search` and a knowledge overlay.
fn guided(id: &str) -> ModuleEntry {
    let search = format!("{id}.search");
    let mut d = (*module(id, &json!([cap(&search, &json!({}))])).descriptor).clone();
    d.knowledge = serde_json::from_value(json!({"overlays": [
        {"id": "guide", "path": "guide.md", "sha256": "0".repeat(64)}
    ]}))
    .unwrap();
    ModuleEntry {
        descriptor: Arc::new(d),
        dir: None,
    }
}

/// A toolbox of `modules` under the `[approval]` rules `rules` (the
/// section's body: `[[rules]]` entries).
fn toolbox(
    rules: &str,
    modules: Vec<ModuleEntry>,
) -> (tempfile::TempDir, Toolbox<RecordingInvoker>) {
    let approval: ApprovalConfig = toml::from_str(rules).unwrap();
    let home = tempfile::tempdir().unwrap();
    let tb = Toolbox::new(
        modules,
        &approval,
        &Default::default(),
        &Default::default(),
        RecordingInvoker::default(),
        HomeLayout::new(home.path()),
        None,
    );
    (home, tb)
}

fn ci() -> Caller {
    Caller::remote("ci-bot", ["mcp:tools".to_owned()])
}

fn ops() -> Caller {
    Caller::remote("ops-bot", ["mcp:tools".to_owned()])
}

fn remote(principal: &str, scopes: &[&str]) -> Caller {
    Caller::remote(principal, scopes.iter().map(|s| (*s).to_owned()))
}

/// The names `tools/list` shows `caller`.
fn offered(tb: &Toolbox<RecordingInvoker>, caller: &Caller) -> Vec<String> {
    tb.tools()
        .iter()
        .filter(|t| tb.is_offered_to(t, caller))
        .map(|t| t.name.clone())
        .collect()
}

async fn call(
    tb: &Toolbox<RecordingInvoker>,
    caller: &Caller,
    name: &str,
    approver: Option<ApprovedBy>,
) -> Result<ToolOutcome, CallError> {
    tb.call_as(
        caller,
        name,
        json!({}),
        approver,
        None,
        &CallWorkspace::Host,
        None,
    )
    .await
}

/// The principals of the calls that reached the module, in order.
fn principals_run(tb: &Toolbox<RecordingInvoker>) -> Vec<Option<String>> {
    let loaded = tb.live.current();
    let calls = loaded.invoker.calls.lock().unwrap();
    calls.iter().map(|c| c.principal.clone()).collect()
}

fn refusals(tb: &Toolbox<RecordingInvoker>) -> Vec<Refused> {
    tb.live.current().invoker.refusals.lock().unwrap().clone()
}

const PURGE: &str = "web__web_purge";

/// The default's rule for a local tool that writes nothing else.
const ALLOWED: &str = "default: local, writes only its own state and artifacts";

/// A rule denying `ci-*` hides the tool from such a caller and refuses its
/// call (even approved) as a call of a tool that does not exist, recorded
/// with its principal and the deny rule; another principal and the local
/// user still see and call it.
#[tokio::test]
async fn a_rule_denying_ci_principals_hides_and_refuses_the_tool_for_them_only() {
    let (_home, tb) = toolbox(
        "[[rules]]\nname = \"no ci purge\"\nprincipal = \"ci-*\"\ncapability = \"web.purge\"\ndecision = \"deny\"\n",
        vec![web()],
    );
    assert_eq!(offered(&tb, &ci()), ["web__web_get", "web__web_cached"]);
    for other in [ops(), Caller::local()] {
        assert!(
            offered(&tb, &other).contains(&PURGE.to_owned()),
            "{other:?}"
        );
    }
    let policy = tb.policy_for(&ci(), PURGE, None).unwrap();
    assert_eq!(policy.decision.verdict, PolicyVerdict::Deny);
    assert_eq!(policy.decision.rule, "rule \"no ci purge\"");
    assert_eq!(
        tb.policy_for(&ops(), PURGE, None).unwrap().decision.verdict,
        PolicyVerdict::Ask
    );
    assert_eq!(
        tb.policy_of(PURGE, None).unwrap().decision.verdict,
        PolicyVerdict::Ask
    );

    let refused = call(&tb, &ci(), PURGE, Some(ApprovedBy::User))
        .await
        .unwrap_err();
    let missing = call(&tb, &ci(), "web__web_nothing", None)
        .await
        .unwrap_err();
    assert_eq!(refused, CallError::UnknownTool(PURGE.into()));
    assert_eq!(
        refused.to_string().replace(PURGE, "NAME"),
        missing.to_string().replace("web__web_nothing", "NAME"),
        "a hidden tool answers unlike a missing one"
    );
    assert!(!refused.to_string().contains("no ci purge"), "{refused}");
    assert!(principals_run(&tb).is_empty(), "nothing refused ran");
    // The audit log keeps the real reason.
    assert_eq!(
        refusals(&tb),
        [
            Refused {
                tool: PURGE.into(),
                kind: "denied".into(),
                rule: Some("rule \"no ci purge\"".into()),
                principal: Some("ci-bot".into()),
            },
            Refused {
                tool: "web__web_nothing".into(),
                kind: "not_found".into(),
                rule: None,
                principal: Some("ci-bot".into()),
            }
        ]
    );

    call(&tb, &ops(), PURGE, Some(ApprovedBy::User))
        .await
        .unwrap();
    tb.call(PURGE, json!({}), Some(ApprovedBy::User), None)
        .await
        .unwrap();
    call(&tb, &Caller::local(), PURGE, Some(ApprovedBy::User))
        .await
        .unwrap();
    // The remote caller's principal is in its call; the local user's is
    // left for the host to name, as before.
    assert_eq!(
        principals_run(&tb),
        [Some("ops-bot".to_owned()), None, None]
    );
}

/// A `without_scope` deny refuses a caller lacking the scope, admits one
/// holding it, and never touches the local user, who holds no scopes.
#[tokio::test]
async fn a_without_scope_deny_refuses_a_caller_lacking_the_scope_and_admits_one_holding_it() {
    let (_home, tb) = toolbox(
        "[[rules]]\nname = \"writers only\"\ncapability = \"web.purge\"\nwithout_scope = \"files:write\"\ndecision = \"deny\"\n",
        vec![web()],
    );
    let reader = remote("ci-bot", &["files:read"]);
    let writer = remote("ci-bot", &["files:read", "files:write"]);
    assert!(!offered(&tb, &reader).contains(&PURGE.to_owned()));
    assert!(offered(&tb, &writer).contains(&PURGE.to_owned()));
    assert!(offered(&tb, &Caller::local()).contains(&PURGE.to_owned()));
    let refused = call(&tb, &reader, PURGE, Some(ApprovedBy::User))
        .await
        .unwrap_err();
    assert_eq!(refused, CallError::UnknownTool(PURGE.into()));
    assert_eq!(
        refusals(&tb)[0].rule.as_deref(),
        Some("rule \"writers only\"")
    );
    call(&tb, &writer, PURGE, Some(ApprovedBy::User))
        .await
        .unwrap();
    tb.call(PURGE, json!({}), Some(ApprovedBy::User), None)
        .await
        .unwrap();
    assert_eq!(principals_run(&tb), [Some("ci-bot".to_owned()), None]);
}

/// The attack: callers named and scoped like patterns, hoping to match
/// allow rules written for others. None does: each call still needs the
/// approval the default asks for, and runs nothing without it.
#[tokio::test]
async fn a_caller_cannot_widen_itself_with_a_patterned_name_or_scope() {
    let (_home, tb) = toolbox(
        r#"
        [[rules]]
        name = "alice fetches"
        principal = "ops-alice"
        capability = "web.get"
        decision = "allow"
        [[rules]]
        name = "admins purge"
        scope = "admin"
        capability = "web.purge"
        decision = "allow"
        "#,
        vec![web()],
    );
    let attackers = [
        remote("ops-*", &["admin*"]),
        remote("*", &["*"]),
        remote("ops-alic?", &["Admin"]),
        remote("ops-alice ", &["admin "]),
        remote("ops", &["admin mcp:tools"]),
    ];
    for attacker in &attackers {
        for tool in ["web__web_get", PURGE] {
            let policy = tb.policy_for(attacker, tool, None).unwrap();
            assert_eq!(
                policy.decision.verdict,
                PolicyVerdict::Ask,
                "{attacker:?} {tool}"
            );
            let refused = call(&tb, attacker, tool, None).await.unwrap_err();
            assert!(
                matches!(refused, CallError::Refused(Refusal::NeedsApproval { .. })),
                "{attacker:?} {tool}: {refused}"
            );
        }
    }
    assert!(principals_run(&tb).is_empty(), "nothing ran");
    // The callers the rules name are let through by them.
    call(&tb, &remote("ops-alice", &[]), "web__web_get", None)
        .await
        .unwrap();
    call(&tb, &remote("x", &["admin"]), PURGE, None)
        .await
        .unwrap();
    let loaded = tb.live.current();
    let calls = loaded.invoker.calls.lock().unwrap();
    let rules: Vec<_> = calls
        .iter()
        .map(|c| c.approval.as_ref().map(|a| (a.by.clone(), a.rule.clone())))
        .collect();
    assert_eq!(
        rules,
        [
            Some(("rule".into(), Some("rule \"alice fetches\"".into()))),
            Some(("rule".into(), Some("rule \"admins purge\"".into()))),
        ]
    );
}

/// A caller is served the guides only of modules whose tools it is
/// offered, and is not offered the knowledge tool when none is left; the
/// local user, whom the rules do not name, is served every guide.
#[tokio::test]
async fn the_knowledge_tool_serves_a_caller_only_the_guides_of_modules_offered_to_it() {
    let modules = vec![guided("files"), guided("web")];
    let (_home, tb) = toolbox(
        "[[rules]]\nprincipal = \"ci-*\"\nmodule = \"web\"\ndecision = \"deny\"\n",
        modules.clone(),
    );
    assert_eq!(offered(&tb, &ci()), [KNOWLEDGE_TOOL, "files__files_search"]);
    assert_eq!(offered(&tb, &Caller::local()).len(), 3);
    // Nor does the knowledge tool's schema, as listed to it, name the
    // hidden module; the local user and another caller see both.
    let enum_for = |caller: &Caller| {
        let tools = tb.tools();
        let tool = tools.iter().find(|t| t.name == KNOWLEDGE_TOOL).unwrap();
        tb.as_offered_to(tool, caller).input_schema["properties"]["module"]["enum"].clone()
    };
    assert_eq!(enum_for(&ci()), json!(["files"]));
    assert_eq!(enum_for(&ops()), json!(["files", "web"]));
    assert_eq!(enum_for(&Caller::local()), json!(["files", "web"]));
    let knowledge = |caller: Caller, module: &'static str| {
        let tb = &tb;
        async move {
            tb.call_as(
                &caller,
                KNOWLEDGE_TOOL,
                json!({"module": module}),
                None,
                None,
                &CallWorkspace::Host,
                None,
            )
            .await
            .unwrap()
        }
    };
    let hidden = knowledge(ci(), "web").await;
    assert!(
        hidden.is_error && hidden.text.contains("not_found"),
        "{}",
        hidden.text
    );
    // Nor is it told the hidden module is there to be asked about.
    assert!(
        hidden.text.ends_with("use one of: files"),
        "{}",
        hidden.text
    );
    assert!(!knowledge(ci(), "files").await.is_error);
    assert!(!knowledge(ops(), "web").await.is_error);
    assert!(!knowledge(Caller::local(), "web").await.is_error);

    let (_home, tb) = toolbox(
        "[[rules]]\nprincipal = \"ci-*\"\nmodule = \"web\"\ndecision = \"deny\"\n\
         [[rules]]\nprincipal = \"ci-*\"\nmodule = \"files\"\ndecision = \"deny\"\n",
        modules,
    );
    assert!(offered(&tb, &ci()).is_empty());
    assert_eq!(offered(&tb, &ops()).len(), 3);
}

/// A caller's own deny holds in lockdown too: the lockdown narrows what
/// the rules decided for that caller, never replaces it.
#[tokio::test]
async fn in_lockdown_the_rules_for_the_caller_still_decide() {
    let (_home, tb) = toolbox(
        "[[rules]]\nname = \"no ci cache\"\nprincipal = \"ci-*\"\ncapability = \"web.cached\"\ndecision = \"deny\"\n",
        vec![web()],
    );
    let locked = Lockdown {
        since: "web__web_get".into(),
    };
    let at = |caller: Caller| {
        let (tb, locked) = (&tb, &locked);
        async move {
            tb.call_as(
                &caller,
                "web__web_cached",
                json!({}),
                Some(ApprovedBy::User),
                None,
                &CallWorkspace::Host,
                Some(locked),
            )
            .await
        }
    };
    let refused = at(ci()).await.unwrap_err();
    assert_eq!(refused, CallError::UnknownTool("web__web_cached".into()));
    assert_eq!(
        refusals(&tb)[0].rule.as_deref(),
        Some("rule \"no ci cache\"")
    );
    assert_eq!(
        tb.policy_for(&ci(), "web__web_cached", Some(&locked))
            .unwrap()
            .decision
            .verdict,
        PolicyVerdict::Deny
    );
    at(ops()).await.unwrap();
    let loaded = tb.live.current();
    let calls = loaded.invoker.calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].lockdown.is_some());
    assert_eq!(calls[0].principal.as_deref(), Some("ops-bot"));
}

/// A name nobody offers, called by a remote caller, is refused and
/// recorded with its principal, and so is a refusal its server records.
#[tokio::test]
async fn refusals_of_a_remote_caller_name_its_principal() {
    let (_home, tb) = toolbox("", vec![web()]);
    assert!(matches!(
        call(&tb, &ci(), "nope", None).await,
        Err(CallError::UnknownTool(_))
    ));
    let input = json!({});
    let mut bound = crate::audit::RefusedCall::new(
        "web__web_get",
        &input,
        modproto::HostErrorKind::RateLimited.into(),
    );
    bound.rule = Some("too many calls at once");
    tb.record_refusal_for(&ops(), &bound);
    tb.record_refusal_for(&Caller::local(), &bound);
    let principals: Vec<_> = refusals(&tb).into_iter().map(|r| r.principal).collect();
    assert_eq!(
        principals,
        [Some("ci-bot".to_owned()), Some("ops-bot".to_owned()), None]
    );
}

/// Through a real host: the audit record of a call made with `call_as`
/// names its principal (and the rule its gate applied for it), a refusal
/// names the refused caller; one principal's spent question budget does
/// not refuse another's question; and an edit of a rule that names
/// callers is announced, though no tool's registered verdict changed.
#[tokio::test]
async fn through_a_host_the_principal_is_audited_questions_are_per_principal_and_rule_edits_announced()
 {
    use crate::audit::Outcome;
    use crate::host::Host;

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let config = |who: &str| {
        format!(
            "pins = \"off\"\n[quotas]\nelicitations_per_minute = 1\n\
             [[approval.rules]]\nname = \"no beta for {who}\"\nprincipal = \"{who}\"\ncapability = \"beta.run\"\ndecision = \"deny\"\n"
        )
    };
    std::fs::write(home.join("config.toml"), config("ci-*")).unwrap();
    modhost_test_support::modules::install(home, "alpha", false);
    modhost_test_support::modules::install(home, "beta", false);
    let host = Host::open_at(home);
    let tb = super::open_live_toolbox(&host).await.unwrap();
    let changes = tb.changes().expect("a live toolbox signals");
    let run = |caller: Caller, tool: &'static str| {
        let tb = &tb;
        async move {
            tb.call_as(
                &caller,
                tool,
                json!({"msg": "x"}),
                None,
                None,
                &CallWorkspace::Host,
                None,
            )
            .await
        }
    };
    let ran = run(ops(), "alpha__alpha_run").await.unwrap();
    assert!(!ran.is_error, "{}", ran.text);
    let refused = run(ci(), "beta__beta_run").await.unwrap_err();
    assert_eq!(refused, CallError::UnknownTool("beta__beta_run".into()));
    let ran = tb
        .call("beta__beta_run", json!({"msg": "x"}), None, None)
        .await
        .unwrap();
    assert!(!ran.is_error, "{}", ran.text);
    host.flush_audit_log();
    let records: Vec<_> = crate::audit::read(host.layout())
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.entry)
        .collect();
    let facts: Vec<_> = records
        .iter()
        .map(|e| {
            (
                e.tool.clone().unwrap_or_default(),
                e.principal.clone().unwrap_or_default(),
                e.outcome,
                e.approval.as_ref().and_then(|a| a.rule.clone()),
            )
        })
        .collect();
    let local = crate::audit::local_principal().to_owned();
    assert_eq!(
        facts,
        [
            (
                "alpha__alpha_run".to_owned(),
                "ops-bot".to_owned(),
                Some(Outcome::Ok),
                Some(ALLOWED.to_owned())
            ),
            (
                "beta__beta_run".to_owned(),
                "ci-bot".to_owned(),
                Some(Outcome::Refused),
                Some("rule \"no beta for ci-*\"".to_owned())
            ),
            (
                "beta__beta_run".to_owned(),
                local,
                Some(Outcome::Ok),
                Some(ALLOWED.to_owned())
            ),
        ],
        "{records:#?}"
    );

    // One question a minute, per principal.
    tb.admit_question_from(&ci()).unwrap();
    let spent = tb.admit_question_from(&ci()).unwrap_err();
    assert_eq!(
        spent.scope,
        crate::quota::QuotaScope::Questions("ci-bot".into())
    );
    tb.admit_question_from(&ops())
        .expect("another principal's question is admitted");
    tb.admit_question().expect("and the local user's");
    assert!(
        tb.admit_question().is_err(),
        "the local user's is spent too"
    );

    // The deny moves from ci-* to ops-*: the tools (the local user's
    // verdicts) are the same, the lists of remote callers are not.
    assert!(!changes.has_changed().unwrap());
    std::fs::write(home.join("config.toml"), config("ops-*")).unwrap();
    assert!(offered_by_host(&tb, &ci()).contains(&"beta__beta_run".to_owned()));
    assert!(!offered_by_host(&tb, &ops()).contains(&"beta__beta_run".to_owned()));
    assert!(changes.has_changed().unwrap(), "the rule edit is announced");
    host.shutdown().await;
}

fn offered_by_host(tb: &Toolbox<super::HostInvoker>, caller: &Caller) -> Vec<String> {
    tb.tools()
        .iter()
        .filter(|t| tb.is_offered_to(t, caller))
        .map(|t| t.name.clone())
        .collect()
}
