//! Modules that misbehave on `invoke`: each failure has its exact kind, the
//! host goes on (a good call right after works), and nothing the call started
//! is left running.

use serde_json::{Value, json};

use std::os::unix::process::CommandExt;

use crate::support::{Fixture, Home, is_alive, live_group_members, wait_until_empty};

/// A home with one misbehaving fixture (installed as `id`) beside the echo
/// fixture that proves the host goes on.
fn home_with(fixture: Fixture, id: &str) -> Home {
    let home = Home::new();
    home.install(fixture, id);
    home.install(Fixture::Echo, "echo");
    home
}

#[track_caller]
fn assert_host_goes_on(home: &Home) {
    let result = home
        .invoke("echo", "echo.echo", &json!({"after": "misbehaviour"}), &[])
        .invoke_result();
    assert_eq!(
        result["output"]["request"]["input"],
        json!({"after": "misbehaviour"})
    );
    home.assert_no_module_processes();
}

#[test]
fn a_module_that_crashes_before_answering_is_crashed_with_status_and_stderr() {
    let home = home_with(Fixture::Crash, "crash");
    let run = home.invoke("crash", "crash.run", &json!({}), &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "crashed", "{error:#}");
    assert!(
        error["message"].as_str().unwrap_or_default().contains('3'),
        "exit status missing: {error:#}"
    );
    // The bounded tail of stderr is carried with the error, wherever the host
    // chose to put it in the error object.
    assert!(
        error.to_string().contains("marker 7f3a"),
        "stderr tail missing: {error:#}"
    );
    home.assert_no_module_processes();
    assert_host_goes_on(&home);
}

#[test]
fn a_module_that_hangs_times_out_and_is_killed() {
    let home = home_with(Fixture::Hang, "hang");
    let run = home.invoke("hang", "hang.run", &json!({}), &["--deadline-ms", "300"]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "timeout", "{error:#}");
    assert!(
        error.to_string().contains("sleeping forever"),
        "stderr tail missing: {error:#}"
    );
    home.assert_no_module_processes();
    assert_host_goes_on(&home);
}

/// The host killed mid-call (`kill -9`, an out-of-memory kill): its
/// module, waiting for ever, must not outlive it. A confined module is
/// cloned from a spawner thread and asks to be killed when that thread,
/// which lives as long as the host, dies. (Hygiene, not a bound on a
/// hostile module: it may withdraw the request, or leave a grandchild.)
#[test]
fn a_waiting_module_does_not_outlive_a_host_killed_mid_call() {
    let home = home_with(Fixture::Hang, "hang");
    home.run(&["pin", "hang"]).expect_code(0);
    let mut host = invoking_hang(&home, 60_000);
    let started = std::time::Instant::now();
    while home.live_module_processes().is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the module never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    host.kill().expect("kill -9 the host");
    host.wait().expect("reap the host");
    home.assert_no_module_processes();
}

/// `modhost invoke hang hang.run`, started in the background: the module
/// waits for ever, and the host kills it at `deadline_ms`.
fn invoking_hang(home: &Home, deadline_ms: u64) -> std::process::Child {
    let mut host = std::process::Command::new(&crate::support::binaries().modhost);
    host.arg("--home")
        .arg(home.path())
        .arg("--workspace")
        .arg(home.workspace())
        .args(["invoke", "hang", "hang.run", "--deadline-ms"])
        .arg(deadline_ms.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("MODHOST_") {
            host.env_remove(key);
        }
    }
    host.spawn().expect("modhost starts")
}

/// A root host's modules run in a pids cgroup of the host's own,
/// `modhost-<host pid>` beside the host's cgroup (the bound on their
/// processes): every thread of the module, read from the host's side while
/// it runs. Running modhost as root leaves none of them behind: the host
/// removes its cgroup as it ends.
#[test]
fn an_ended_host_leaves_no_cgroup_behind() {
    let own_status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        own_status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")),
        "this test is for a root host (the pids cgroup is root's)"
    );
    let home = home_with(Fixture::Hang, "hang");
    home.run(&["pin", "hang"]).expect_code(0);
    let mut host = invoking_hang(&home, 2_000);
    let cgroup = own_pids_cgroup().join(format!("modhost-{}", host.id()));
    let inside = format!("/modhost-{}", host.id());
    let mut tasks_seen = 0;
    let status = loop {
        for module in home.live_module_processes() {
            for (task, membership) in pids_memberships(module.pid) {
                assert!(
                    membership.ends_with(&inside),
                    "task {task} of the module runs in the pids cgroup {membership}, not in {}",
                    cgroup.display()
                );
                tasks_seen += 1;
            }
        }
        if let Some(status) = host.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(1), "the call times out");
    assert!(tasks_seen > 0, "the module was never seen running");
    assert!(
        !cgroup.exists(),
        "{} is left behind by a host that has ended",
        cgroup.display()
    );
}

/// Each thread of process `pid` with its path in the hierarchy with the
/// pids controller; threads gone meanwhile are left out.
fn pids_memberships(pid: u32) -> Vec<(String, String)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let memberships = std::fs::read_to_string(task.path().join("cgroup")).ok()?;
            let (_, path) = pids_membership(&memberships)?;
            Some((
                task.file_name().to_string_lossy().into_owned(),
                path.to_owned(),
            ))
        })
        .collect()
}

/// From a `/proc/<pid>/cgroup` (`<id>:<controllers>:<path>` lines), the
/// path in the hierarchy with the pids controller, and whether that is v1
/// (a line naming `pids`) rather than v2 (the `0::` line).
fn pids_membership(memberships: &str) -> Option<(bool, &str)> {
    let lines: Vec<(&str, &str)> = memberships
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':').skip(1);
            Some((parts.next()?, parts.next()?))
        })
        .collect();
    let version_1 = lines
        .iter()
        .find(|(controllers, _)| controllers.split(',').any(|c| c == "pids"));
    match version_1 {
        Some(&(_, path)) => Some((true, path)),
        None => lines
            .iter()
            .find(|(controllers, _)| controllers.is_empty())
            .map(|&(_, path)| (false, path)),
    }
}

/// This process's cgroup in the hierarchy with the pids controller (a v1
/// `pids` mount, else the v2 one), where its children's cgroups go.
fn own_pids_cgroup() -> std::path::PathBuf {
    let memberships = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let (version_1, path) = pids_membership(&memberships).expect("this process is in a cgroup");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (root, mount_point) = mountinfo
        .lines()
        .find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fields = before.split(' ').skip(3);
            let (root, mount_point) = (fields.next()?, fields.next()?);
            let mut after = after.split(' ');
            let (fstype, options) = (after.next()?, after.nth(1).unwrap_or(""));
            let wanted = if version_1 {
                fstype == "cgroup" && options.split(',').any(|o| o == "pids")
            } else {
                fstype == "cgroup2"
            };
            wanted.then(|| (root.to_owned(), mount_point.to_owned()))
        })
        .expect("the pids hierarchy is mounted");
    let relative = path.strip_prefix(root.as_str()).unwrap_or(path);
    std::path::Path::new(&mount_point).join(relative.trim_start_matches('/'))
}

#[test]
fn a_module_that_answers_garbage_is_a_bad_response() {
    let home = home_with(Fixture::Garbage, "garbage");
    let error = home
        .invoke("garbage", "garbage.run", &json!({}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "bad_response", "{error:#}");
    home.assert_no_module_processes();
    assert_host_goes_on(&home);
}

#[test]
fn a_huge_answer_hits_the_output_limit() {
    let home = home_with(Fixture::Huge, "huge");
    let run = home.invoke(
        "huge",
        "huge.run",
        &json!({}),
        &["--max-output-bytes", "65536"],
    );
    let error = run.invoke_error();
    assert_eq!(error["kind"], "output_limit", "{error:#}");
    assert!(
        run.stdout.len() < 65536,
        "the oversized output was passed on ({} bytes)",
        run.stdout.len()
    );
    home.assert_no_module_processes();

    // The default cap (1 MiB) is also below the fixture's 4 MiB.
    let error = home
        .invoke("huge", "huge.run", &json!({}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "output_limit", "{error:#}");
    home.assert_no_module_processes();
    assert_host_goes_on(&home);
}

#[test]
fn a_grandchild_holding_stdout_neither_hangs_the_call_nor_survives_it() {
    let home = home_with(Fixture::Grandchild, "grandchild");
    // Discovery runs describe, which leaves a grandchild too.
    let entry = home.entry("grandchild");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    home.assert_no_module_processes();

    let result = home
        .invoke("grandchild", "grandchild.run", &json!({}), &[])
        .invoke_result();
    let pid = pid_field(&result["output"], "pid");
    let grandchild_pid = pid_field(&result["output"], "grandchild_pid");
    // The module led its own process group; nothing in it may be left.
    let left = wait_until_empty(|| live_group_members(pid));
    assert!(
        left.is_empty(),
        "processes of the call's group survived: {left:#?}"
    );
    assert!(
        !is_alive(grandchild_pid),
        "grandchild {grandchild_pid} survived the call"
    );
    home.assert_no_module_processes();
    assert_host_goes_on(&home);
}

fn pid_field(output: &Value, key: &str) -> u32 {
    output[key]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or_else(|| panic!("no {key} in {output:#}"))
}

#[test]
fn a_module_that_violates_its_output_schema_is_invalid_output() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let run = home.invoke("echo", "echo.bad_output", &json!({}), &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "invalid_output", "{error:#}");
    assert!(
        !run.stdout.contains("not an integer\"}"),
        "the invalid output was passed on: {}",
        run.stdout
    );
    assert_host_goes_on(&home);
}

#[test]
fn an_unknown_capability_is_refused() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let run = home.invoke("echo", "echo.nope", &json!({}), &[]);
    assert_eq!(run.refused_kind(), "unknown_capability");
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("echo.nope")
    );
}

/// The process checks above only mean something if the scan sees a module
/// that is alive: run one directly (no host), find it, kill it, lose it.
#[test]
fn the_process_scan_sees_a_live_module_and_its_group() {
    let home = Home::new();
    let exe = home.install(Fixture::Hang, "hang");
    let mut child = std::process::Command::new(&exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn the hang fixture");
    if let Some(stdin) = child.stdin.as_mut() {
        use std::io::Write;
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"invoke","params":{}}"#;
        writeln!(stdin, "{request}").expect("write request");
    }
    let pid = child.id();
    // `spawn` returns once the child is past exec's point of no return, which
    // is before the kernel has mapped the new image's argv: for a moment its
    // `/proc/<pid>/cmdline` can still be empty. Wait for it to name itself.
    let started = std::time::Instant::now();
    let seen = loop {
        let seen = home.live_module_processes();
        if seen.iter().any(|p| p.pid == pid) || started.elapsed().as_secs() >= 5 {
            break seen;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(
        seen.iter().any(|p| p.pid == pid),
        "scan missed pid {pid}: {seen:#?}"
    );
    assert!(live_group_members(pid).iter().any(|p| p.pid == pid));
    assert!(is_alive(pid));
    child.kill().expect("kill");
    child.wait().expect("reap");
    home.assert_no_module_processes();
    assert!(!is_alive(pid));
}
