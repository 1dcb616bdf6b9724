//! `modhost doctor [--format text|json] [--json]`: what this machine and
//! home support. A missing home is reported (with `modhost install` as the
//! remedy), never created: the doctor only looks.

use std::process::ExitCode;

use modhost::discovery::ModuleStatus;
use modhost::home::HomeLayout;
use modhost::{Host, HostOptions};
use modhost_sandbox::{self as confine, ConfinementMode};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

pub async fn run(options: HostOptions, args: &Args) -> anyhow::Result<ExitCode> {
    let missing_home = HomeLayout::resolve(options.home.as_deref())
        .ok()
        .filter(|home| !home.exists());
    let host = match &missing_home {
        Some(home) => Err(format!(
            "no modhost home at {}: nothing is installed there; `modhost install PATH` creates it \
             (or point --home or MODHOST_HOME at an existing home)",
            home.display()
        )),
        None => Host::open(options.clone()).map_err(|e| e.to_string()),
    };
    let report = match &host {
        Ok(host) => {
            let modules = host.discover().await;
            let count = |status| modules.iter().filter(|m| m.status == status).count();
            let layout = host.layout();
            let dirs = [
                ("modules", layout.modules_dir()),
                ("state", layout.root().join("state")),
                ("artifacts", layout.root().join("artifacts")),
                ("cache", layout.cache_dir()),
            ];
            json!({
                "ok": true,
                "home": layout.root(),
                "workspace": host.workspace(),
                "config": layout.config_path(),
                "config_present": layout.config_path().exists(),
                "layout": dirs.iter().map(|(name, path)| json!({"name": name, "path": path, "present": path.is_dir()})).collect::<Vec<_>>(),
                "modules": {
                    "total": modules.len(),
                    "enabled": count(ModuleStatus::Enabled),
                    "disabled": count(ModuleStatus::Disabled),
                    "broken": count(ModuleStatus::Broken),
                },
                "confinement": confinement(Some(host.config().confinement)),
                "components": components(host),
                "limits": limits(&host.config().limits),
            })
        }
        Err(e) => json!({
            "ok": false,
            "home": HomeLayout::resolve(options.home.as_deref()).ok(),
            "home_present": missing_home.is_none(),
            "error": e,
            "confinement": confinement(None),
        }),
    };
    if args.output.is_json() {
        super::stdout::print_json(&report)?;
    } else {
        print_human(&report);
    }
    Ok(if host.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::exit_code::EXIT_USAGE)
    })
}

/// Every part of a native call's confinement, enforced here or not and
/// why; whether the host runs as root and what the module does about it.
fn confinement(mode: Option<ConfinementMode>) -> serde_json::Value {
    let support = confine::probe();
    let unenforced = support.unenforced(false);
    json!({
        "mode": mode.map(ConfinementMode::as_str),
        "landlock_abi": support.abi,
        "seccomp": support.seccomp,
        "host_runs_as_root": support.host_is_root,
        "environment_allowlist": true,
        "parts": support.parts(),
        "summary": support.summary(),
        "not_enforced": unenforced.iter().map(|p| p.part).collect::<Vec<_>>(),
        "remedy": (!unenforced.is_empty()).then(|| confine::support::remedy_for(&unenforced)),
        "memory": memory_bound(&support),
    })
}

/// What bounds a native call's memory here: a memory cgroup per call (and
/// its hierarchy), or `RLIMIT_DATA` per process, and why.
fn memory_bound(support: &confine::support::ConfinementSupport) -> serde_json::Value {
    let mechanism = confine::memory_cgroup::per_call_mechanism();
    json!({
        "per_call": mechanism.is_ok(),
        "mechanism": mechanism.unwrap_or("RLIMIT_DATA"),
        "why": support.memory_bound(),
    })
}

/// The bounds `[limits]` sets on native calls and module folders, and each
/// module's own (`[limits.modules."<id>"]`).
fn limits(limits: &modhost::config::Limits) -> serde_json::Value {
    let modules: serde_json::Map<String, serde_json::Value> = limits
        .modules
        .keys()
        .map(|id| {
            let storage = limits.storage_for(id);
            (
                id.clone(),
                json!({
                    "native_memory_bytes": limits.native_memory_for(id),
                    "storage_bytes": storage.bytes,
                    "storage_files": storage.files,
                }),
            )
        })
        .collect();
    json!({
        "native_memory_bytes": limits.native_memory_bytes,
        "storage_bytes": limits.storage_bytes,
        "storage_files": limits.storage_files,
        "modules": modules,
    })
}

/// WebAssembly component support: whether this build has it, whether the
/// engine starts, where compiled components are cached and the memory cap.
fn components(host: &Host) -> serde_json::Value {
    let engines = host.engines();
    let mut report = json!({
        "supported": engines.supports_components(),
        "cache_dir": engines.component_cache_dir(),
        "memory_limit_bytes": engines.memory_limit_bytes(),
    });
    #[cfg(feature = "wasm")]
    match engines.wasm() {
        Ok(engine) => {
            report["engine"] = json!("ok");
            report["warnings"] = json!(engine.warnings());
        }
        Err(e) => report["engine"] = json!(format!("failed: {e}")),
    }
    #[cfg(not(feature = "wasm"))]
    {
        report["engine"] = json!("not built (the `wasm` cargo feature is off)");
    }
    report
}

fn print_human(report: &serde_json::Value) {
    let text = |v: &serde_json::Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    outln!("home:        {}", text(&report["home"]));
    if let Some(error) = report.get("error") {
        outln!("error:       {}", text(error));
    } else {
        match &report["workspace"] {
            serde_json::Value::Null => outln!(
                "workspace:   none (started in / or the home directory; {})",
                modhost::host::NO_WORKSPACE_REMEDY
            ),
            workspace => outln!("workspace:   {}", text(workspace)),
        }
        outln!(
            "config:      {} ({})",
            text(&report["config"]),
            if report["config_present"] == true {
                "present"
            } else {
                "absent, defaults apply"
            }
        );
        for dir in report["layout"].as_array().into_iter().flatten() {
            outln!(
                "layout:      {:10} {}",
                text(&dir["name"]),
                if dir["present"] == true {
                    "present"
                } else {
                    "absent (created on demand)"
                }
            );
        }
        let m = &report["modules"];
        outln!(
            "modules:     {} found ({} enabled, {} disabled, {} broken)",
            m["total"],
            m["enabled"],
            m["disabled"],
            m["broken"]
        );
        let w = &report["components"];
        outln!(
            "components:  engine {}; cache {}; memory limit {} bytes per call",
            text(&w["engine"]),
            text(&w["cache_dir"]),
            w["memory_limit_bytes"]
        );
        for warning in w["warnings"].as_array().into_iter().flatten() {
            outln!("components:  warning: {}", text(warning));
        }
        let l = &report["limits"];
        let words = |v: &serde_json::Value| confine::bytes_in_words(v.as_u64().unwrap_or(0));
        let memory = &report["confinement"]["memory"];
        outln!(
            "memory:      {} per native call, all its processes together ([limits] native_memory_bytes), held by {}",
            words(&l["native_memory_bytes"]),
            if memory["per_call"] == true {
                format!("a memory cgroup per call ({})", text(&memory["mechanism"]))
            } else {
                "RLIMIT_DATA, per process only".to_owned()
            }
        );
        outln!(
            "storage:     {} and {} files per module, its state and artifacts folders together ([limits] storage_bytes, storage_files)",
            words(&l["storage_bytes"]),
            l["storage_files"]
        );
        for (id, own) in l["modules"].as_object().into_iter().flatten() {
            outln!(
                "limits:      module {id}: {} of memory per call; {} and {} files of storage",
                words(&own["native_memory_bytes"]),
                words(&own["storage_bytes"]),
                own["storage_files"]
            );
        }
    }
    let c = &report["confinement"];
    outln!("confinement: {}", text(&c["summary"]));
    if let Some(mode) = c["mode"].as_str() {
        outln!("confinement: mode {mode} (config.toml `confinement`)");
    }
    outln!("confinement: {}", text(&c["memory"]["why"]));
    outln!(
        "confinement: the host runs as {}; every module drops every capability before exec",
        if c["host_runs_as_root"] == true {
            "root (uid 0)"
        } else {
            "an unprivileged user"
        }
    );
    for part in c["parts"].as_array().into_iter().flatten() {
        outln!(
            "  {:27} {:13} {}",
            text(&part["label"]),
            if part["enforced"] == true {
                "enforced"
            } else {
                "NOT ENFORCED"
            },
            text(&part["why"])
        );
    }
    if let Some(remedy) = c["remedy"].as_str() {
        outln!("confinement: to enforce every part: {remedy}");
    }
}
