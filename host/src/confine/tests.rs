//! These tests spawn real `/bin/sh` children under confinement and check what
//! the kernel lets them do. Where the running kernel lacks landlock (or the
//! ABI a check needs), the check says so on stdout and is skipped rather than
//! passing vacuously.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use super::*;

fn grant(name: &str, host: &Path, access: Access) -> Grant {
    Grant {
        name: name.into(),
        host: host.to_path_buf(),
        guest: host.to_string_lossy().into_owned(),
        access,
    }
}

/// Run `script` with `program` under confinement; (success, stdout+stderr).
async fn run_confined(
    program: &str,
    script: &str,
    grants: &[Grant],
    network: bool,
) -> (bool, String) {
    // The tools the scripts run, granted as a capability's `spawns` would.
    let tools: Vec<std::path::PathBuf> = [
        "cat", "ls", "touch", "rm", "ln", "cp", "kill", "mkdir", "mv", "mknod", "mkfifo",
    ]
    .iter()
    .map(|t| Path::new("/usr/bin").join(t))
    .filter(|p| p.exists())
    .collect();
    let confinement = prepare(
        Path::new(program),
        grants,
        &tools,
        network,
        ConfinementMode::BestEffort,
    )
    .unwrap();
    let mut command = std::process::Command::new(program);
    command
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    confinement.apply_to(&mut command);
    let output = tokio::process::Command::from(command)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

async fn sh(script: &str, grants: &[Grant], network: bool) -> (bool, String) {
    run_confined("/bin/sh", script, grants, network).await
}

fn landlock_or_skip(what: &str) -> bool {
    if probe().abi.is_none() {
        println!("skipped {what}: landlock is not available in this kernel");
        return false;
    }
    true
}

#[tokio::test]
async fn reading_outside_the_grants_is_denied() {
    if !landlock_or_skip("reading_outside_the_grants_is_denied") {
        return;
    }
    let granted = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("ok.txt"), "granted-content").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret-content").unwrap();
    let grants = [grant("data", granted.path(), Access::Read)];

    let (ok, out) = sh(
        &format!("cat {}/ok.txt", granted.path().display()),
        &grants,
        false,
    )
    .await;
    assert!(
        ok && out.contains("granted-content"),
        "a granted read must work: {out}"
    );

    let (ok, out) = sh(
        &format!("cat {}/secret.txt", outside.path().display()),
        &grants,
        false,
    )
    .await;
    assert!(!ok, "reading outside the grants succeeded: {out}");
    assert!(!out.contains("secret-content"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
}

#[tokio::test]
async fn writing_to_a_read_grant_is_denied_and_to_a_write_grant_works() {
    if !landlock_or_skip("writing_to_a_read_grant_is_denied") {
        return;
    }
    let read_root = tempfile::tempdir().unwrap();
    let write_root = tempfile::tempdir().unwrap();
    std::fs::write(read_root.path().join("existing.txt"), "original").unwrap();
    let grants = [
        grant("source", read_root.path(), Access::Read),
        grant("state", write_root.path(), Access::ReadWrite),
    ];

    let (ok, out) = sh(
        &format!("echo new > {}/created.txt", read_root.path().display()),
        &grants,
        false,
    )
    .await;
    assert!(!ok, "creating a file in a read grant succeeded: {out}");
    assert!(!read_root.path().join("created.txt").exists());

    let (ok, out) = sh(
        &format!("echo changed > {}/existing.txt", read_root.path().display()),
        &grants,
        false,
    )
    .await;
    assert!(!ok, "overwriting a file in a read grant succeeded: {out}");
    assert_eq!(
        std::fs::read_to_string(read_root.path().join("existing.txt")).unwrap(),
        "original"
    );

    let (ok, out) = sh(
        &format!(
            "mkdir {0}/sub && echo written > {0}/sub/file.txt && cat {0}/sub/file.txt",
            write_root.path().display()
        ),
        &grants,
        false,
    )
    .await;
    assert!(
        ok && out.contains("written"),
        "writing to a write grant must work: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(write_root.path().join("sub/file.txt")).unwrap(),
        "written\n"
    );
}

#[tokio::test]
async fn a_symlink_in_a_grant_does_not_reach_outside() {
    if !landlock_or_skip("a_symlink_in_a_grant_does_not_reach_outside") {
        return;
    }
    let granted = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret-content").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        granted.path().join("link"),
    )
    .unwrap();
    let grants = [grant("data", granted.path(), Access::Read)];
    let (ok, out) = sh(
        &format!("cat {}/link", granted.path().display()),
        &grants,
        false,
    )
    .await;
    assert!(
        !ok && !out.contains("secret-content"),
        "the planted symlink was followed: {out}"
    );
}

#[tokio::test]
async fn executing_from_a_write_grant_is_denied() {
    if !landlock_or_skip("executing_from_a_write_grant_is_denied") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let tool = state.path().join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let grants = [grant("state", state.path(), Access::ReadWrite)];
    let (ok, out) = sh(&tool.display().to_string(), &grants, false).await;
    assert!(
        !ok && !out.contains("ran"),
        "a file in a write grant was executed: {out}"
    );
}

#[tokio::test]
async fn tcp_connect_is_denied_without_network_and_allowed_with_it() {
    if !landlock_or_skip("tcp_connect_is_denied_without_network") {
        return;
    }
    if !probe().landlock_tcp() {
        println!(
            "skipped tcp_connect_is_denied_without_network: landlock ABI {:?} has no network rules (needs 4)",
            probe().abi
        );
        return;
    }
    if !Path::new("/bin/bash").exists() {
        println!("skipped tcp_connect_is_denied_without_network: needs /bin/bash for /dev/tcp");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let (ok, out) = run_confined("/bin/bash", &script, &[], false).await;
    assert!(
        !ok && !out.contains("connected"),
        "TCP connect without network succeeded: {out}"
    );

    let (ok, out) = run_confined("/bin/bash", &script, &[], true).await;
    assert!(
        ok && out.contains("connected"),
        "TCP connect with network failed: {out}"
    );
}

#[tokio::test]
async fn signalling_the_host_is_denied() {
    if !probe().landlock_scopes() {
        println!(
            "skipped signalling_the_host_is_denied: landlock ABI {:?} has no scopes (needs 6)",
            probe().abi
        );
        return;
    }
    // The test process is outside the module's domain: kill -0 must fail.
    let (ok, out) = sh(&format!("kill -0 {}", std::process::id()), &[], false).await;
    assert!(!ok, "the module could signal the host: {out}");
}

#[tokio::test]
async fn resource_limits_apply() {
    let (ok, out) = sh("ulimit -c; ulimit -f", &[], false).await;
    assert!(ok, "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("0"), "core dumps must be off: {out}");
    // `ulimit -f` reports 512-byte blocks.
    assert_eq!(
        lines.next(),
        Some((MAX_FILE_SIZE / 512).to_string().as_str()),
        "{out}"
    );
}

#[tokio::test]
async fn off_applies_nothing_and_says_so() {
    let confinement = prepare(Path::new("/bin/sh"), &[], &[], false, ConfinementMode::Off).unwrap();
    assert!(!confinement.is_landlocked());
    assert!(confinement.warning().unwrap().contains("off"));
}

/// The attack: a module that may write its state root makes a character
/// device there (`/dev/kmsg`'s numbers) to read the kernel log through it.
/// Landlock grants no MAKE_CHAR or MAKE_BLOCK right on any root; a FIFO,
/// which reaches nothing outside, still can be made.
#[tokio::test]
async fn no_device_node_can_be_made_in_a_write_grant() {
    if !landlock_or_skip("no_device_node_can_be_made_in_a_write_grant") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let grants = [grant("state", state.path(), Access::ReadWrite)];
    let dir = state.path().display();
    let (ok, out) = sh(
        &format!("mknod {dir}/kmsg c 1 11 && echo made-char; mknod {dir}/disk b 8 0 && echo made-block; mkfifo {dir}/fifo && echo made-fifo"),
        &grants,
        false,
    )
    .await;
    assert!(ok, "{out}");
    assert!(
        !out.contains("made-char") && !out.contains("made-block"),
        "{out}"
    );
    assert!(!state.path().join("kmsg").exists() && !state.path().join("disk").exists());
    assert!(out.contains("made-fifo"), "the root is writable: {out}");
}

#[test]
fn required_refuses_exactly_when_a_part_is_not_enforced() {
    let result = prepare(
        Path::new("/bin/sh"),
        &[],
        &[],
        false,
        ConfinementMode::Required,
    );
    let unenforced = probe().unenforced(false);
    if unenforced.is_empty() {
        assert!(result.is_ok_and(|c| c.warning().is_none() && c.is_landlocked()));
    } else {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), "unconfined");
        assert!(err.remedy().contains("best-effort"));
        assert!(err.to_string().contains(unenforced[0].label));
    }
}

#[test]
fn rules_follow_the_grants_and_nothing_else() {
    let grants = [
        grant("src", Path::new("/data/src"), Access::Read),
        grant("state", Path::new("/home/h/state/m"), Access::ReadWrite),
    ];
    let rules = path_rules(Path::new("/home/h/modules/m/m"), &grants, &[], false);
    let find = |p: &str| {
        rules
            .iter()
            .find(|r| r.path == Path::new(p))
            .map(|r| r.access)
    };
    assert_eq!(find("/data/src"), Some(PathAccess::Read));
    assert_eq!(find("/home/h/state/m"), Some(PathAccess::ReadWrite));
    assert_eq!(find("/home/h/modules/m"), Some(PathAccess::Read));
    assert_eq!(find("/home/h/modules/m/m"), Some(PathAccess::ReadExecute));
    assert_eq!(
        find("/usr"),
        Some(PathAccess::Read),
        "system folders: read only"
    );
    assert_eq!(find("/dev/null"), Some(PathAccess::ReadWrite));
    assert_eq!(
        find("/etc/resolv.conf"),
        None,
        "resolver config only with network"
    );
    assert!(
        rules
            .iter()
            .all(|r| r.path != Path::new("/etc") && r.path != Path::new("/"))
    );
    assert!(rules.iter().all(|r| r.access != PathAccess::ReadWrite
        || r.path == Path::new("/dev/null")
        || r.path == Path::new("/home/h/state/m")));

    let with_network = path_rules(Path::new("/m/m"), &[], &[], true);
    assert!(
        with_network
            .iter()
            .any(|r| r.path == Path::new("/etc/resolv.conf"))
    );
}

#[test]
fn a_bare_module_gets_only_itself() {
    assert_eq!(
        module_root(Path::new("/h/modules/tool")),
        Path::new("/h/modules/tool")
    );
    assert_eq!(
        module_root(Path::new("/h/modules/tool/tool")),
        Path::new("/h/modules/tool")
    );
}

#[tokio::test]
async fn a_confined_module_cannot_leave_its_process_group() {
    if !landlock_or_skip("a_confined_module_cannot_leave_its_process_group") || !STAYS_IN_GROUP {
        return;
    }
    if !Path::new("/usr/bin/setsid").exists() {
        println!("skipped a_confined_module_cannot_leave_its_process_group: needs /usr/bin/setsid");
        return;
    }
    let (ok, out) = sh("/usr/bin/setsid -w /bin/true && echo left", &[], false).await;
    assert!(!ok && !out.contains("left"), "setsid succeeded: {out}");
    let (ok, out) = sh("echo still-here", &[], false).await;
    assert!(ok && out.contains("still-here"), "{out}");
}

/// A granted binary outside the system folders (`[binaries]` in config.toml)
/// can be run, and only the granted one.
#[tokio::test]
async fn only_granted_binaries_outside_system_folders_run() {
    if !landlock_or_skip("only_granted_binaries_outside_system_folders_run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tool = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name}-ran\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let (granted, other) = (tool("granted"), tool("other"));
    let run = |path: &Path| {
        let confinement = prepare(
            Path::new("/bin/sh"),
            &[],
            std::slice::from_ref(&granted),
            false,
            ConfinementMode::BestEffort,
        )
        .unwrap();
        let mut command = std::process::Command::new("/bin/sh");
        command.arg("-c").arg(path).env_clear().stdin(Stdio::null());
        confinement.apply_to(&mut command);
        command.output().unwrap()
    };
    let ran = run(&granted);
    assert!(ran.status.success(), "{ran:?}");
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "granted-ran\n");
    let refused = run(&other);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("other-ran"));
}
