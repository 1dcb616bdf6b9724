//! End-to-end tests: the `modhost` binary against the real `files` module and
//! the fixture modules in `tests/fixtures/`, each test in a fresh host home.
//!
//! Everything goes through the CLI, the surface operators and scripts use:
//! `--json` output is asserted field by field, and errors by their exact
//! kind. Support code (building the binaries, temporary homes, the process
//! table) lives in [`support`].

mod attacks_http_auth;
mod attacks_http_transport;
mod audit;
mod cli;
mod cli_conventions;
mod code_map;
mod compile_progress;
mod confinement_failures;
mod conformance;
mod conformance_grants;
mod contract;
mod descriptor_checks;
mod descriptor_identity;
mod discovery;
mod doctor;
mod egress;
mod egress_clients;
mod error_kinds;
mod exec_gate;
mod fetch_module;
mod files_module;
mod folder_helpers;
mod git_module;
mod grants_authority;
mod hostile;
mod import_cycles;
mod install;
mod install_checks;
mod interpreters;
mod library_deps;
mod lockdown;
mod mcp;
mod mcp_attacks;
mod mcp_client_setup;
mod mcp_clients;
mod mcp_elicitation;
mod mcp_eras;
mod mcp_http;
mod mcp_http_auth;
mod mcp_http_clients;
mod mcp_http_replicas;
mod mcp_live;
mod mcp_robustness;
mod mcp_server_modules;
mod mcp_stdio;
mod memory_bound;
mod misbehaving;
mod net_lab;
mod new_module;
mod notes_module;
mod parallel_changes;
mod pins;
mod principals;
mod protocol_doc;
mod provider_exports;
mod python_attacker;
mod quotas;
mod redteam;
mod roots;
mod sandbox_kernel;
mod secrets;
mod sessions_module;
mod snapshot;
mod snapshot_gc;
mod source_roots;
mod spill;
mod standing;
mod state_bound;
mod strict_decoding;
mod support;
mod tools;
mod version_managers;
mod warm_approval;
mod wasm;
