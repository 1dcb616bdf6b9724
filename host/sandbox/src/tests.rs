//! These tests start real `/bin/sh` children through the production spawner
//! (`runner::native::spawn`, the `clone(CLONE_VM | CLONE_VFORK)` path every
//! module takes) under confinement, and check what the kernel lets them do.
//! A kernel that lacks what a check needs fails the check, with the reason:
//! nothing passes vacuously.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;
use crate::spawn;

/// [`path_rules_with`] after resolving the chain, as [`prepare`] does.
fn path_rules(
    program: &Path,
    grants: &[Grant],
    executables: &[PathBuf],
    network: bool,
) -> Vec<PathRule> {
    let chain = interpreter::resolve_cached(program, executables);
    path_rules_with(program, grants, &chain, network)
}

fn grant(name: &str, host: &Path, access: Access) -> Grant {
    Grant {
        name: name.into(),
        host: host.to_path_buf(),
        guest: host.to_string_lossy().into_owned(),
        access,
    }
}

/// Start `program` (a shell) confined as production does, feed it `script`
/// on stdin; (exited with 0, stdout+stderr).
pub(crate) fn run_confined_blocking(
    program: &str,
    script: &str,
    grants: &[Grant],
    executables: &[std::path::PathBuf],
    network: NetworkAccess,
) -> (bool, String) {
    run_confined_from(
        StartedFrom::Spawner,
        program,
        script,
        grants,
        executables,
        network,
    )
}

/// Which thread prepares and starts the child.
#[derive(Debug, Clone, Copy)]
enum StartedFrom {
    /// A spawner thread, as production starts every confined module
    /// (`spawner_pool`): the child inherits what it carries.
    Spawner,
    /// The calling thread, an ordinary one (the conformance kit's path):
    /// the child enters the whole confinement itself.
    Caller,
}

fn run_confined_from(
    from: StartedFrom,
    program: &str,
    script: &str,
    grants: &[Grant],
    executables: &[std::path::PathBuf],
    network: NetworkAccess,
) -> (bool, String) {
    let flavour = Flavour::of(network.is_used(), executables);
    let (program, grants, executables) =
        (program.to_owned(), grants.to_vec(), executables.to_vec());
    let start = move || {
        prepare(
            Path::new(&program),
            &grants,
            &executables,
            &[],
            network,
            ConfinementMode::BestEffort,
        )
        .map_err(|e| e.to_string())
        .and_then(|confinement| {
            spawn::spawn(
                Path::new(&program),
                std::iter::once(("PATH".into(), "/usr/bin:/bin".into())),
                None,
                confinement.into_child().as_ref(),
            )
            .map_err(|e| e.to_string())
        })
    };
    let child = match from {
        StartedFrom::Caller => start(),
        StartedFrom::Spawner => {
            // Some tests call this from the runtime's thread: the child
            // comes back on a channel that may block it.
            let (started, child) = std::sync::mpsc::channel();
            crate::spawner_pool::run(flavour, move || {
                let _ = started.send(start());
            })
            .unwrap();
            child.recv().unwrap()
        }
    };
    let child = child.unwrap();
    let pid = rustix::process::Pid::from_raw(child.pid).unwrap();
    let mut stdin = std::fs::File::from(child.stdin);
    let script = format!("{script}\n");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(script.as_bytes());
    });
    let read = |fd: std::os::fd::OwnedFd| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::fs::File::from(fd).read_to_string(&mut text);
            text
        })
    };
    let (stdout, stderr) = (read(child.stdout), read(child.stderr));
    // The pidfd turns readable once the shell has exited; then its whole
    // group is killed (whatever it left running) and it is reaped.
    let mut exited = [rustix::event::PollFd::new(
        &child.pidfd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: 30,
        tv_nsec: 0,
    };
    assert_eq!(
        rustix::event::poll(&mut exited, Some(&timeout)).unwrap(),
        1,
        "the confined shell did not exit"
    );
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    let (_, status) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
        .unwrap()
        .unwrap();
    let _ = writer.join();
    let text = format!("{}{}", stdout.join().unwrap(), stderr.join().unwrap());
    (status.exit_status() == Some(0), text)
}

fn run_confined(
    program: &str,
    script: &str,
    grants: &[Grant],
    network: NetworkAccess,
) -> (bool, String) {
    // The tools the scripts run, granted as a capability's `spawns` would.
    let tools: Vec<std::path::PathBuf> = [
        "cat", "ls", "grep", "touch", "rm", "ln", "cp", "kill", "mkdir", "mv", "mknod", "mkfifo",
    ]
    .iter()
    .map(|t| Path::new("/usr/bin").join(t))
    .filter(|p| p.exists())
    .collect();
    run_confined_blocking(program, script, grants, &tools, network)
}

fn sh(script: &str, grants: &[Grant], network: NetworkAccess) -> (bool, String) {
    run_confined("/bin/sh", script, grants, network)
}

/// Fails the test, naming what is missing, when the kernel has no landlock
/// or a landlock ABI below `abi`.
fn require_landlock(abi: u32, what: &str) {
    let have = probe().abi;
    assert!(
        have.is_some_and(|a| a >= abi),
        "{what} needs landlock ABI {abi}; this kernel has {have:?}: run on a kernel with landlock enabled (lsm=...,landlock)"
    );
}

/// `.ci/run` sets MODHOST_EXPECT_LANDLOCK=1 when the machine has landlock:
/// then a suite that somehow ran without it fails here.
#[test]
fn landlock_is_present_when_the_machine_has_it() {
    if std::env::var_os("MODHOST_EXPECT_LANDLOCK").is_some_and(|v| v == "1") {
        assert!(
            probe().abi.is_some(),
            "the machine supports landlock (MODHOST_EXPECT_LANDLOCK=1) but the host found none"
        );
        let filters = seccomp::programs(Flavour::of(false, &[]));
        assert!(filters.is_ok(), "{filters:?}");
    }
}

#[test]
fn reading_outside_the_grants_is_denied() {
    require_landlock(1, "reading_outside_the_grants_is_denied");
    let granted = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("ok.txt"), "granted-content").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret-content").unwrap();
    let grants = [grant("data", granted.path(), Access::Read)];

    let (ok, out) = sh(
        &format!("cat {}/ok.txt", granted.path().display()),
        &grants,
        NetworkAccess::None,
    );
    assert!(
        ok && out.contains("granted-content"),
        "a granted read must work: {out}"
    );

    let (ok, out) = sh(
        &format!("cat {}/secret.txt", outside.path().display()),
        &grants,
        NetworkAccess::None,
    );
    assert!(!ok, "reading outside the grants succeeded: {out}");
    assert!(!out.contains("secret-content"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
}

#[test]
fn writing_to_a_read_grant_is_denied_and_to_a_write_grant_works() {
    require_landlock(1, "writing_to_a_read_grant_is_denied");
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
        NetworkAccess::None,
    );
    assert!(!ok, "creating a file in a read grant succeeded: {out}");
    assert!(!read_root.path().join("created.txt").exists());

    let (ok, out) = sh(
        &format!("echo changed > {}/existing.txt", read_root.path().display()),
        &grants,
        NetworkAccess::None,
    );
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
        NetworkAccess::None,
    );
    assert!(
        ok && out.contains("written"),
        "writing to a write grant must work: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(write_root.path().join("sub/file.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn a_symlink_in_a_grant_does_not_reach_outside() {
    require_landlock(1, "a_symlink_in_a_grant_does_not_reach_outside");
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
        NetworkAccess::None,
    );
    assert!(
        !ok && !out.contains("secret-content"),
        "the planted symlink was followed: {out}"
    );
}

#[test]
fn executing_from_a_write_grant_is_denied() {
    require_landlock(1, "executing_from_a_write_grant_is_denied");
    let state = tempfile::tempdir().unwrap();
    let tool = state.path().join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let grants = [grant("state", state.path(), Access::ReadWrite)];
    let (ok, out) = sh(&tool.display().to_string(), &grants, NetworkAccess::None);
    assert!(
        !ok && !out.contains("ran"),
        "a file in a write grant was executed: {out}"
    );
}

#[test]
fn tcp_connect_is_denied_without_network() {
    require_landlock(4, "tcp_connect_is_denied_without_network");
    assert!(
        Path::new("/bin/bash").exists(),
        "needs /bin/bash for /dev/tcp"
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let (ok, out) = run_confined("/bin/bash", &script, &[], NetworkAccess::None);
    assert!(
        !ok && !out.contains("connected"),
        "TCP connect without network succeeded: {out}"
    );
}

/// The attack: a module granted network tries every way past its egress
/// proxy. It reaches the proxy's port and nothing else: not another
/// listener in the egress namespace (another call's proxy), not the host's
/// loopback (a service there on the very port number of its proxy gets
/// nothing), not an outside address, not IPv6 loopback, not UDP (its own
/// DNS), not a listening socket of its own.
#[test]
fn a_call_with_network_reaches_its_proxy_and_nothing_else() {
    require_landlock(4, "a_call_with_network_reaches_its_proxy_and_nothing_else");
    assert!(
        Path::new("/bin/bash").exists(),
        "needs /bin/bash for /dev/tcp"
    );
    let proxy = crate::egress_listener().unwrap();
    assert!(proxy.isolated, "a root host makes the egress namespace");
    let port = proxy.listener.local_addr().unwrap().port();
    let other = crate::egress_listener().unwrap();
    let other_port = other.listener.local_addr().unwrap().port();
    // The host's loopback, on the proxy's port number: the module's
    // connect to 127.0.0.1:<port> must land in its own namespace instead.
    let host_service = TcpListener::bind(("127.0.0.1", port))
        .expect("the proxy's port number is free on the host's loopback");
    for listener in [&proxy.listener, &other.listener, &host_service] {
        listener.set_nonblocking(true).unwrap();
    }
    let try_it = |name: &str, open: &str| {
        format!("if exec {open} 2>/dev/null; then echo {name}-open; else echo {name}-refused; fi")
    };
    let script = [
        try_it("proxy", &format!("3<>/dev/tcp/127.0.0.1/{port}")),
        try_it("other", &format!("4<>/dev/tcp/127.0.0.1/{other_port}")),
        try_it("outside", "5<>/dev/tcp/198.51.100.1/80"),
        try_it(
            "outside-on-proxy-port",
            &format!("5<>/dev/tcp/198.51.100.1/{port}"),
        ),
        try_it("ipv6-loopback", &format!("6<>/dev/tcp/::1/{port}")),
        try_it("udp", "7<>/dev/udp/127.0.0.1/53"),
        try_it("udp-outside", "7<>/dev/udp/198.51.100.1/53"),
    ]
    .join("\n");
    let (ok, out) = run_confined("/bin/bash", &script, &[], NetworkAccess::Proxy { port });
    assert!(ok, "{out}");
    for expected in [
        "proxy-open",
        "other-refused",
        "outside-refused",
        "outside-on-proxy-port-refused",
        "ipv6-loopback-refused",
        "udp-refused",
        "udp-outside-refused",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    assert!(
        proxy.listener.accept().is_ok(),
        "the proxy saw no connection"
    );
    assert!(
        other.listener.accept().is_err(),
        "another call's proxy was reached"
    );
    assert!(
        host_service.accept().is_err(),
        "a service on the host's loopback was reached"
    );
}

/// The attack: the module makes its own listening socket (to receive, to
/// masquerade as a proxy for another call, or, unbound, to take the egress
/// namespace's ports), or a stream socket of a
/// protocol landlock's TCP rules do not see (SCTP, MPTCP). Bind is denied,
/// the sockets refused.
#[test]
fn a_call_with_network_cannot_listen_or_use_other_stream_protocols() {
    require_landlock(4, "a_call_with_network_cannot_listen");
    let proxy = crate::egress_listener().unwrap();
    let port = proxy.listener.local_addr().unwrap().port();
    let python = Path::new("/usr/bin/python3");
    assert!(python.exists(), "needs /usr/bin/python3");
    // `listen` without `bind` picks a port itself, past landlock's bind
    // rule: a module doing it in a loop would take every port of the
    // egress namespace.
    let script = "import socket\ns = socket.socket()\ntry:\n    s.bind(('127.0.0.1', 0)); s.listen(); print('listening')\nexcept OSError as e:\n    print('bind-refused', e.errno)\ns = socket.socket()\ntry:\n    s.listen(); print('autobound', s.getsockname())\nexcept OSError as e:\n    print('listen-refused', e.errno)\nfor name, proto in [('sctp', 132), ('mptcp', 262)]:\n    try:\n        socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto); print(name, 'open')\n    except OSError as e:\n        print(name, 'refused', e.errno)";
    let (_, out) = run_confined_blocking(
        "/usr/bin/python3",
        script,
        &[],
        &[],
        NetworkAccess::Proxy { port },
    );
    for refused in [
        "bind-refused",
        "listen-refused",
        "sctp refused",
        "mptcp refused",
    ] {
        assert!(
            out.contains(&format!("{refused} {}", libc::EACCES)),
            "{refused}: {out}"
        );
    }
}

/// A call with network started from an ordinary thread (not a spawner
/// thread sitting in the egress namespace) joins the namespace itself:
/// its connect to 127.0.0.1 on its proxy's port reaches the proxy, never
/// the host's loopback service on the same port number.
#[test]
fn a_child_started_from_an_ordinary_thread_joins_the_egress_namespace() {
    require_landlock(4, "a_child_started_from_an_ordinary_thread_joins");
    let proxy = crate::egress_listener().unwrap();
    let port = proxy.listener.local_addr().unwrap().port();
    let host_service = TcpListener::bind(("127.0.0.1", port)).unwrap();
    host_service.set_nonblocking(true).unwrap();
    proxy.listener.set_nonblocking(true).unwrap();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let (ok, out) = run_confined_from(
        StartedFrom::Caller,
        "/bin/bash",
        &script,
        &[],
        &[],
        NetworkAccess::Proxy { port },
    );
    assert!(ok && out.contains("connected"), "{out}");
    assert!(
        proxy.listener.accept().is_ok(),
        "the proxy saw no connection"
    );
    assert!(
        host_service.accept().is_err(),
        "the host's service was reached"
    );
}

#[test]
fn signalling_the_host_is_denied() {
    require_landlock(6, "signalling_the_host_is_denied");
    // The test process is outside the module's domain: kill -0 must fail.
    let (ok, out) = sh(
        &format!("kill -0 {}", std::process::id()),
        &[],
        NetworkAccess::None,
    );
    assert!(!ok, "the module could signal the host: {out}");
}

#[test]
fn resource_limits_apply() {
    let (ok, out) = sh("ulimit -c; ulimit -f", &[], NetworkAccess::None);
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

#[test]
fn off_applies_nothing_and_says_so() {
    let confinement = prepare(
        Path::new("/bin/sh"),
        &[],
        &[],
        &[],
        NetworkAccess::None,
        ConfinementMode::Off,
    )
    .unwrap();
    assert!(!confinement.is_landlocked());
    assert!(confinement.warning().unwrap().contains("off"));
}

/// The attack: a module that may write its state root makes a character
/// device there (`/dev/kmsg`'s numbers) to read the kernel log through it.
/// Landlock grants no MAKE_CHAR or MAKE_BLOCK right on any root; a FIFO,
/// which reaches nothing outside, still can be made.
#[test]
fn no_device_node_can_be_made_in_a_write_grant() {
    require_landlock(1, "no_device_node_can_be_made_in_a_write_grant");
    let state = tempfile::tempdir().unwrap();
    let grants = [grant("state", state.path(), Access::ReadWrite)];
    let dir = state.path().display();
    let (ok, out) = sh(
        &format!(
            "mknod {dir}/kmsg c 1 11 && echo made-char; mknod {dir}/disk b 8 0 && echo made-block; mkfifo {dir}/fifo && echo made-fifo"
        ),
        &grants,
        NetworkAccess::None,
    );
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
        &[],
        NetworkAccess::None,
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

#[test]
fn only_a_program_in_a_host_owned_read_only_snapshot_may_execute_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let digest = "ab".repeat(32);
    let snapshot = home.join("cache/snapshots").join(&digest);
    std::fs::create_dir_all(&snapshot).unwrap();
    let program = snapshot.join("m");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    let mode =
        |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(&snapshot, 0o555);
    assert_eq!(
        approved_snapshot_root(&program, &[]),
        Some(snapshot.clone())
    );
    let rules = path_rules(&program, &[], &[], false);
    assert!(
        rules
            .iter()
            .any(|r| r.path == snapshot && r.access == PathAccess::ReadExecute),
        "{rules:?}"
    );

    // A read-write grant over it: never.
    let over = [grant("h", &home, Access::ReadWrite)];
    assert_eq!(approved_snapshot_root(&program, &over), None);
    // A look-alike folder someone can write: never.
    mode(&snapshot, 0o755);
    assert_eq!(approved_snapshot_root(&program, &[]), None);
    mode(&snapshot, 0o555);
    // A module run from its folder, or bare in `modules/`: never.
    let folder = home.join("modules/m");
    std::fs::create_dir_all(&folder).unwrap();
    mode(&folder, 0o555);
    assert_eq!(approved_snapshot_root(&folder.join("m"), &[]), None);
    assert_eq!(
        approved_snapshot_root(&home.join("modules/tool"), &[]),
        None
    );
    let rules = path_rules(&folder.join("m"), &[], &[], false);
    assert!(
        rules
            .iter()
            .all(|r| r.access != PathAccess::ReadExecute || r.path != folder),
        "{rules:?}"
    );
    assert_eq!(
        approved_snapshot_root(&home.join("cache/snapshots/not-a-digest/m"), &[]),
        None
    );
}

#[test]
fn a_confined_module_cannot_leave_its_process_group() {
    let filters = seccomp::programs(Flavour::of(false, &[]));
    assert!(filters.is_ok(), "no seccomp filter: {filters:?}");
    assert!(
        Path::new("/usr/bin/setsid").exists(),
        "needs /usr/bin/setsid (util-linux)"
    );
    let (ok, out) = sh(
        "/usr/bin/setsid -w /bin/true && echo left",
        &[],
        NetworkAccess::None,
    );
    assert!(!ok && !out.contains("left"), "setsid succeeded: {out}");
    let (ok, out) = sh("echo still-here", &[], NetworkAccess::None);
    assert!(ok && out.contains("still-here"), "{out}");
}

/// A granted binary outside the system folders (`[binaries]` in config.toml)
/// can be run, and only the granted one.
#[test]
fn only_granted_binaries_outside_system_folders_run() {
    require_landlock(1, "only_granted_binaries_outside_system_folders_run");
    let dir = tempfile::tempdir().unwrap();
    let tool = |name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {name}-ran\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let (granted, other) = (tool("granted"), tool("other"));
    let run = |path: &Path| {
        run_confined_blocking(
            "/bin/sh",
            &path.display().to_string(),
            &[],
            std::slice::from_ref(&granted),
            NetworkAccess::None,
        )
    };
    let (ok, out) = run(&granted);
    assert!(ok, "{out}");
    assert_eq!(out, "granted-ran\n");
    let (ok, out) = run(&other);
    assert!(!ok, "{out}");
    assert!(!out.contains("other-ran"));
}

/// The ELF loader `/bin/sh` is started through (its `PT_INTERP`, which
/// landlock lets a shell module execute).
fn shell_loader() -> PathBuf {
    let chain = interpreter::resolve(Path::new("/bin/sh"), &[], &|| None);
    chain
        .executables
        .into_iter()
        .find(|p| p.to_string_lossy().contains("ld-"))
        .expect("/bin/sh is dynamically linked: its chain names an ELF loader")
}

/// The attack `spawns: []` must stop: a module granted no executables runs
/// `id` through the ELF loader (executable, as the shell's own loader), by
/// path, by a shell, and `exec`s the loader. Every exec is refused with
/// `EACCES` and no `uid=` gets out, while the shell itself (the module's
/// own start, the one exec with the host's key) ran. Started from a
/// spawner thread (whose base carries the gate) and from an ordinary
/// thread (the child installs the whole filter).
#[test]
fn a_module_granted_no_executables_executes_nothing_after_its_start() {
    require_landlock(
        1,
        "the exec gate (its key is safe in a landlock domain only)",
    );
    let loader = shell_loader().display().to_string();
    let script = format!(
        "echo started; {loader} /usr/bin/id; /usr/bin/id; {loader} /bin/sh -c id; (exec {loader} /usr/bin/id); echo done"
    );
    for from in [StartedFrom::Spawner, StartedFrom::Caller] {
        let (ok, out) = run_confined_from(from, "/bin/sh", &script, &[], &[], NetworkAccess::None);
        assert!(ok, "{from:?}: {out}");
        assert!(
            out.starts_with("started\n") && out.contains("done"),
            "{from:?}: {out}"
        );
        assert!(!out.contains("uid="), "{from:?}: id ran: {out}");
        assert_eq!(
            out.matches("Permission denied").count(),
            4,
            "{from:?}: every exec refused with EACCES: {out}"
        );
    }
}

/// A module granted a binary keeps today's rules: it runs exactly that
/// binary (its exec is no longer gated), and landlock still refuses one it
/// was not granted.
#[test]
fn a_module_granted_a_binary_runs_that_binary_and_no_other() {
    require_landlock(1, "execute rules");
    let id = PathBuf::from("/usr/bin/id");
    let (ok, out) = run_confined_blocking(
        "/bin/sh",
        "/usr/bin/id -u; /usr/bin/whoami || echo whoami-refused",
        &[],
        std::slice::from_ref(&id),
        NetworkAccess::None,
    );
    assert!(ok, "{out}");
    assert!(
        out.starts_with(&format!("{}\n", rustix::process::geteuid().as_raw())),
        "{out}"
    );
    assert!(
        out.contains("whoami-refused") && out.contains("Permission denied"),
        "{out}"
    );
}

/// A confined module holds no capability, cannot regain any, runs under
/// the seccomp filters, and sees only descriptors 0 to 2 (the test process
/// has a descriptor open without close-on-exec while it spawns).
#[test]
fn a_confined_module_holds_no_capability_and_no_inherited_descriptor() {
    // Not close-on-exec, as a shell's `5<secret` would leave it.
    let secret = tempfile::NamedTempFile::new().unwrap();
    let leaked = rustix::io::dup(std::fs::File::open(secret.path()).unwrap()).unwrap();
    // Landlock grants no /proc by default; this test reads its own.
    let proc = [grant("proc", Path::new("/proc"), Access::Read)];
    let (ok, out) = sh(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status; ls /proc/self/fd",
        &proc,
        NetworkAccess::None,
    );
    drop(leaked);
    assert!(ok, "{out}");
    assert_no_privilege_and_filtered(&out);
    // `ls` itself opens one descriptor (3) for the directory it lists.
    let fds: Vec<&str> = out
        .lines()
        .filter(|l| l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
}

/// `out` holds a `/proc/self/status` grep of the capability sets,
/// `NoNewPrivs` and `Seccomp`: every set empty, `no_new_privs` on, a filter.
#[track_caller]
fn assert_no_privilege_and_filtered(out: &str) {
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            out.contains(&format!("{set}:\t0000000000000000")),
            "{set} is not empty: {out}"
        );
    }
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
}

/// The attack, on the path that takes nothing from a spawner thread (a
/// module started from an ordinary thread, as the conformance kit does):
/// the child must enter the whole confinement itself, so it holds no
/// capability, has `no_new_privs` and a filter, cannot leave its process
/// group, and reads nothing outside its grants.
#[test]
fn a_module_started_from_an_ordinary_thread_is_confined_the_same() {
    require_landlock(
        1,
        "a_module_started_from_an_ordinary_thread_is_confined_the_same",
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret-content").unwrap();
    let proc = [grant("proc", Path::new("/proc"), Access::Read)];
    let tools: Vec<std::path::PathBuf> = ["cat", "grep", "setsid"]
        .iter()
        .map(|t| Path::new("/usr/bin").join(t))
        .collect();
    let script = format!(
        "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; \
         cat {}/secret.txt; /usr/bin/setsid -w /bin/true && echo left-the-group; echo done",
        outside.path().display()
    );
    let (ok, out) = run_confined_from(
        StartedFrom::Caller,
        "/bin/sh",
        &script,
        &proc,
        &tools,
        NetworkAccess::None,
    );
    assert!(ok && out.contains("done"), "{out}");
    assert_no_privilege_and_filtered(&out);
    assert!(
        !out.contains("secret-content"),
        "read outside its grants: {out}"
    );
    assert!(
        !out.contains("left-the-group"),
        "left its process group: {out}"
    );
}

/// The kernel surface a module never needs is refused with an errno, not
/// a kill: the shell goes on and reports the failure.
#[test]
fn device_nodes_namespaces_and_chroot_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let grants = [grant("state", state.path(), Access::ReadWrite)];
    let dir = state.path().display();
    let (ok, out) = sh(
        &format!(
            "mknod {dir}/kmsg c 1 11 && echo made-char; mknod {dir}/disk b 8 0 && echo made-block; \
             mkfifo {dir}/fifo && echo made-fifo; unshare -U true && echo unshared; \
             chroot {dir} /bin/true && echo chrooted; echo done"
        ),
        &grants,
        NetworkAccess::None,
    );
    assert!(ok && out.contains("done"), "{out}");
    for forbidden in ["made-char", "made-block", "unshared", "chrooted"] {
        assert!(!out.contains(forbidden), "{forbidden}: {out}");
    }
    assert!(out.contains("made-fifo"), "a FIFO stays allowed: {out}");
    assert!(!state.path().join("kmsg").exists());
}

/// The attack on a cached ruleset (`ruleset.rs`): a granted folder is
/// replaced between two calls with the same grants (renamed away, a new one
/// made at its path). A ruleset bound to the old inode would still grant the
/// old folder where it went, and deny the new one at the granted path.
#[test]
fn a_replaced_grant_is_the_new_folder_not_the_old_one() {
    require_landlock(1, "a_replaced_grant_is_the_new_folder_not_the_old_one");
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    let moved = dir.path().join("moved-away");
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("f.txt"), "old-content").unwrap();
    let grants = [grant("data", &granted, Access::Read)];
    let cat = |path: &Path| format!("cat {}/f.txt", path.display());

    let (ok, out) = sh(&cat(&granted), &grants, NetworkAccess::None);
    assert!(ok && out.contains("old-content"), "{out}");
    // The same call again (the cached ruleset) still reads it.
    let (ok, out) = sh(&cat(&granted), &grants, NetworkAccess::None);
    assert!(ok && out.contains("old-content"), "{out}");

    std::fs::rename(&granted, &moved).unwrap();
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("f.txt"), "new-content").unwrap();

    let (ok, out) = sh(&cat(&granted), &grants, NetworkAccess::None);
    assert!(
        ok && out.contains("new-content"),
        "the folder now at the granted path must be readable: {out}"
    );
    let (ok, out) = sh(&cat(&moved), &grants, NetworkAccess::None);
    assert!(
        !ok,
        "the replaced folder is still granted where it went: {out}"
    );
    assert!(!out.contains("old-content"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
}

/// `/proc/thread-self/status` lines of the calling thread.
fn thread_status(field: &str) -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/thread-self/status"))
}

/// The misuse a spawner thread must not allow: its state reaching the rest
/// of the host. The spawner thread carries the shared confinement (so each
/// child inherits it), while the host's other threads keep no filter, no
/// `no_new_privs` and (as root) their bounding set.
#[test]
fn a_spawner_thread_carries_the_shared_confinement_and_the_host_does_not() {
    let (ok, out) = sh("echo ran", &[], NetworkAccess::None);
    assert!(ok && out == "ran\n", "{out}");
    let (sent, carried) = std::sync::mpsc::channel();
    crate::spawner_pool::run(Flavour::of(false, &[]), move || {
        let status = ["Seccomp", "NoNewPrivs", "CapBnd", "CapEff"].map(thread_status);
        let _ = sent.send(status);
    })
    .unwrap();
    let [seccomp, no_new_privs, bounding, effective] = carried.recv().unwrap();
    assert_eq!(seccomp, "2", "the spawner thread carries no filter");
    assert_eq!(no_new_privs, "1");
    if rustix::process::geteuid().is_root() {
        assert_eq!(
            bounding, "0000000000000000",
            "its bounding set is not empty"
        );
        assert_ne!(
            effective, "0000000000000000",
            "it keeps its own capabilities (to open granted paths of other users)"
        );
    }
    let here = std::thread::spawn(|| ["Seccomp", "NoNewPrivs", "CapBnd"].map(thread_status))
        .join()
        .unwrap();
    assert_eq!(here[0], "0", "a host thread is filtered");
    assert_eq!(here[1], "0", "a host thread has no_new_privs");
    if rustix::process::geteuid().is_root() {
        assert_ne!(
            here[2], "0000000000000000",
            "a host thread lost its bounding set"
        );
    }
}

/// The attack on the split: a confinement prepared on a spawner thread
/// leaves out what the thread carries, so started from any other thread the
/// child would run without its base filter, with the host's bounding set,
/// outside the pids cgroup. The spawn refuses it before the clone.
#[test]
fn a_confinement_prepared_on_a_spawner_thread_is_not_started_from_another() {
    let (sent, prepared) = std::sync::mpsc::channel();
    crate::spawner_pool::run(Flavour::of(false, &[]), move || {
        let confinement = prepare(
            Path::new("/bin/sh"),
            &[],
            &[],
            &[],
            NetworkAccess::None,
            ConfinementMode::BestEffort,
        );
        let _ = sent.send(confinement.map_err(|e| e.to_string()));
    })
    .unwrap();
    let confinement = prepared.recv().unwrap().unwrap().into_child();
    let child = spawn::spawn(
        Path::new("/bin/sh"),
        std::iter::once(("PATH".into(), "/usr/bin:/bin".into())),
        None,
        confinement.as_ref(),
    );
    let err = child.expect_err("started from another thread than its spawner");
    assert!(err.to_string().contains("another thread"), "{err}");
}

/// The attack: a file the call would execute (a granted binary, or the
/// interpreter a script names) lies in a root the call may write. The module
/// would rewrite it and then run any program in its place, or another
/// module writing that root would have this call run its bytes with this
/// call's grants. The call is refused before anything starts, in every mode
/// but `off`; with the root read-only it is prepared as usual.
#[test]
fn a_file_to_execute_inside_a_writable_root_is_refused() {
    require_landlock(1, "execute rules");
    let (root, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let (tool, script) = tool_and_script(&root_path, elsewhere.path());
    let writable = [grant("workspace", &root_path, Access::ReadWrite)];
    let read_only = [grant("workspace", &root_path, Access::Read)];
    let spawned = (Path::new("/bin/sh"), std::slice::from_ref(&tool));
    let interpreted = (script.as_path(), &[][..]);
    for (program, executables) in [spawned, interpreted] {
        for mode in [ConfinementMode::BestEffort, ConfinementMode::Required] {
            let err = prepare(
                program,
                &writable,
                executables,
                &[],
                NetworkAccess::None,
                mode,
            )
            .unwrap_err();
            assert_eq!(err.kind(), "unconfined", "{err}");
            assert!(
                err.to_string().contains(&tool.display().to_string())
                    && err.to_string().contains("`workspace`"),
                "{err}"
            );
        }
        prepare(
            program,
            &read_only,
            executables,
            &[],
            NetworkAccess::None,
            ConfinementMode::BestEffort,
        )
        .unwrap();
        prepare(
            program,
            &writable,
            executables,
            &[],
            NetworkAccess::None,
            ConfinementMode::Off,
        )
        .unwrap();
    }
}

/// The attack across calls: a file this call executes (the interpreter its
/// `env` finds first on PATH, as an activated virtual environment in the
/// workspace puts it; a granted binary) lies where modules write, though
/// this call only reads there or is granted nothing there. Another call's
/// module writing that place would have this call run its bytes with this
/// call's grants. Refused in every mode but `off`; the same file elsewhere
/// is not. The module's own entry is exempt (the pins policy decides on
/// it).
#[test]
fn a_file_to_execute_where_other_modules_write_is_refused() {
    require_landlock(1, "execute rules");
    let workspace = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(workspace.path()).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(elsewhere.path()).unwrap();
    let (tool, script) = tool_and_script(&workspace, &elsewhere);
    let module_writes = [workspace.clone()];
    let read_only = [grant("workspace", &workspace, Access::Read)];
    let spawned = (Path::new("/bin/sh"), std::slice::from_ref(&tool));
    let interpreted = (script.as_path(), &[][..]);
    for (program, executables) in [spawned, interpreted] {
        for grants in [&read_only[..], &[]] {
            let err = prepare(
                program,
                grants,
                executables,
                &module_writes,
                NetworkAccess::None,
                ConfinementMode::BestEffort,
            )
            .unwrap_err();
            assert_eq!(err.kind(), "unconfined", "{err}");
            assert!(
                err.to_string().contains(&tool.display().to_string())
                    && err.to_string().contains("where modules write"),
                "{err}"
            );
        }
        prepare(
            program,
            &[],
            executables,
            std::slice::from_ref(&elsewhere),
            NetworkAccess::None,
            ConfinementMode::BestEffort,
        )
        .unwrap();
    }
    // The module's own entry, run from where modules write (`pins = "off"`).
    let own = script_run_by(&workspace.join("own"), Path::new("/bin/sh"));
    prepare(
        &own,
        &[],
        &[],
        &module_writes,
        NetworkAccess::None,
        ConfinementMode::BestEffort,
    )
    .unwrap();
}

/// The attack through an installation: a virtual environment in the
/// workspace (activated when modhost started, or named by a shebang) whose
/// interpreter is the system's own, but whose `site-packages` any module
/// writing the workspace can fill: this call's interpreter would import
/// that module's code. Refused like an executable there; the same venv
/// outside every place modules write is not.
#[test]
fn an_installation_where_other_modules_write_is_refused() {
    require_landlock(1, "execute rules");
    let python = std::fs::canonicalize("/usr/bin/python3").expect("the system python3");
    let venv_in = |root: &Path| {
        let venv = root.join(".venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(venv.join("lib/python3/site-packages")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::os::unix::fs::symlink(&python, venv.join("bin/python3")).unwrap();
        venv.join("bin/python3")
    };
    let workspace = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(workspace.path()).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(elsewhere.path()).unwrap();
    let module_writes = [workspace.clone()];
    for (root, refused) in [(&workspace, true), (&elsewhere, false)] {
        let interpreter = venv_in(root);
        let script = script_run_by(&elsewhere.join(format!("m{refused}")), &interpreter);
        let prepared = prepare(
            &script,
            &[],
            &[],
            &module_writes,
            NetworkAccess::None,
            ConfinementMode::BestEffort,
        );
        match prepared {
            Err(err) if refused => assert!(
                err.to_string()
                    .contains(&root.join(".venv").display().to_string())
                    && err.to_string().contains("where modules write"),
                "{err}"
            ),
            Ok(_) if !refused => {}
            other => panic!(
                "venv in {}: {:?}",
                root.display(),
                other.map(|_| ()).map_err(|e| e.to_string())
            ),
        }
    }
}

/// What the host resolved (grants, the interpreter chain, its prefixes) is
/// bound through no link, so a link swapped in after the host looked (at
/// the home) refuses the call rather than bind there; fixed system paths,
/// some of them links on many systems, are followed.
#[test]
fn resolved_paths_are_bound_through_no_link_and_system_paths_follow_theirs() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let grants = [grant("workspace", &root, Access::ReadWrite)];
    let chain = interpreter::resolve_cached(Path::new("/bin/sh"), &[]);
    assert!(!chain.executables.is_empty(), "{chain:?}");
    let rules = path_rules_with(Path::new("/bin/sh"), &grants, &chain, false);
    let opening = |path: &Path| {
        rules
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.opening)
            .collect::<Vec<_>>()
    };
    assert_eq!(opening(&root), [Opening::NoLinks]);
    for file in chain.executables.iter().chain(&chain.read) {
        assert!(
            opening(file).contains(&Opening::NoLinks),
            "{}: {:?}",
            file.display(),
            opening(file)
        );
    }
    for system in ["/usr", "/lib64", "/etc/localtime"] {
        assert_eq!(
            opening(Path::new(system)),
            [Opening::FollowingLinks],
            "{system}"
        );
    }
}

/// The attacks above under another name: the file to execute reached
/// through a bind mount of where modules write (a view of the workspace
/// elsewhere), or the workspace itself a bind mount of the folder holding
/// it. By name neither lies in the other; through the mount table both
/// do, so both are refused. Needs root, as CI runs: it fails rather than
/// skip without.
#[test]
fn a_file_to_execute_reached_through_a_bind_mount_is_refused() {
    require_landlock(1, "execute rules");
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    let (workspace, view, elsewhere) = (dir.join("ws"), dir.join("view"), dir.join("elsewhere"));
    for folder in [&workspace, &view, &elsewhere] {
        std::fs::create_dir(folder).unwrap();
    }
    tool_and_script(&workspace, &elsewhere);
    let _view = modhost_test_support::mounts::bind(&workspace, &view);
    // Why preparing `script` with `grants` and `module_writes` is refused.
    let refusal = |script: &Path, grants: &[Grant], module_writes: &[PathBuf]| {
        prepare(
            script,
            grants,
            &[],
            module_writes,
            NetworkAccess::None,
            ConfinementMode::BestEffort,
        )
        .unwrap_err()
        .to_string()
    };
    let tool = view.join("bin/tool");
    let script = script_run_by(&elsewhere.join("through_view"), &tool);
    let err = refusal(&script, &[], std::slice::from_ref(&workspace));
    assert!(err.contains("where modules write"), "{err}");
    let writable = [grant("workspace", &workspace, Access::ReadWrite)];
    let err = refusal(&script, &writable, &[]);
    assert!(err.contains("`workspace`"), "{err}");
    // The workspace is the view; the tool is run by its real name.
    let real_tool = workspace.join("bin/tool");
    let script = script_run_by(&elsewhere.join("by_real_name"), &real_tool);
    let err = refusal(&script, &[], std::slice::from_ref(&view));
    assert!(err.contains("where modules write"), "{err}");
    let writable = [grant("workspace", &view, Access::ReadWrite)];
    let err = refusal(&script, &writable, &[]);
    assert!(err.contains("`workspace`"), "{err}");
    // A folder beside the view is not where modules write.
    prepare(
        &script,
        &[],
        &[],
        &[elsewhere.join("none")],
        NetworkAccess::None,
        ConfinementMode::BestEffort,
    )
    .unwrap();
}

/// An executable script at `path` whose shebang names `interpreter`.
fn script_run_by(path: &Path, interpreter: &Path) -> PathBuf {
    std::fs::write(path, format!("#!{}\n", interpreter.display())).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

/// A program `root/bin/tool` (a copy of `/bin/true`) and a script
/// `elsewhere/m` run by it.
fn tool_and_script(root: &Path, elsewhere: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir(root.join("bin")).unwrap();
    let tool = root.join("bin/tool");
    std::fs::copy("/bin/true", &tool).unwrap();
    let script = script_run_by(&elsewhere.join("m"), &tool);
    (tool, script)
}
