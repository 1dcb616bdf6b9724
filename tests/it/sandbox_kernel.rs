//! The kernel surface of the native sandbox, attacked from inside by a
//! module (`tests/fixtures/attacker.py`, run by the system Python, confined
//! as any script module is), with the host running as root as it does in
//! CI and containers. Each attack must be refused and leave no trace
//! outside: no device node, no process beyond the bound, no namespace, no
//! datagram or connection at the test's listeners, no byte through an
//! inherited descriptor. A kernel without landlock or seccomp fails these
//! tests instead of skipping them.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};

use crate::python_attacker::{EACCES, EBADF, EPERM, KERNEL_ATTACKER, assert_refused};
use crate::support::{Home, binaries};

fn installed() -> Home {
    KERNEL_ATTACKER.install()
}

#[track_caller]
fn attack(home: &Home, verb: &str, input: &Value) -> Value {
    KERNEL_ATTACKER.attack(home, verb, input)
}

#[test]
fn a_character_device_node_cannot_be_made_in_a_state_root() {
    let home = installed();
    let report = attack(&home, "mknod", &json!({}));
    assert_refused(&report["mknod"], &[EPERM], "mknod of /dev/kmsg's 1:11");
    assert_eq!(report["read"]["ok"], false, "{report:#}");
    assert_eq!(
        report["fifo"]["ok"], true,
        "a FIFO stays allowed: {report:#}"
    );
    let state = home.path().join("state").join("attacker");
    assert!(
        !state.join("kmsg").exists(),
        "a device node was left behind"
    );
}

#[test]
fn four_hundred_forks_stay_bounded() {
    let home = installed();
    let report = attack(&home, "forks", &json!({}));
    let started = report["started"].as_u64().unwrap();
    assert!(
        started < 300,
        "{started} of 400 forks succeeded: the process count is not bounded"
    );
}

#[test]
fn user_and_mount_namespaces_and_chroot_are_refused() {
    let home = installed();
    let report = attack(&home, "namespaces", &json!({}));
    assert_refused(&report["unshare_user"], &[EPERM], "unshare(CLONE_NEWUSER)");
    assert_refused(&report["unshare_mount"], &[EPERM], "unshare(CLONE_NEWNS)");
    assert_refused(&report["chroot"], &[EPERM], "chroot");
}

#[test]
fn without_network_no_socket_reaches_a_local_listener() {
    let home = installed();
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let report = attack(&home, "sockets", &json!({"port": port}));
    for family in ["udp", "udp6", "raw", "packet", "netlink"] {
        assert_refused(&report[family], &[EACCES], family);
    }
    listener
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 64];
    let received = listener.recv(&mut buf);
    assert!(
        received.is_err(),
        "the listener received {:?}",
        received.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );
}

#[test]
fn a_pathname_unix_socket_outside_the_grants_is_not_reached() {
    let home = installed();
    let path = home.outside().join("listener.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    // A datagram socket from a pair could still name any datagram socket.
    let dgram_path = home.outside().join("dgram.sock");
    let dgram = std::os::unix::net::UnixDatagram::bind(&dgram_path).unwrap();
    dgram.set_nonblocking(true).unwrap();
    let report = attack(
        &home,
        "unix_socket",
        &json!({"path": path, "dgram": dgram_path}),
    );
    assert_refused(
        &report["connect"],
        &[EACCES],
        "a UNIX connect outside the grants",
    );
    assert_refused(
        &report["datagram_pair"],
        &[EACCES],
        "a datagram socketpair sending to a path",
    );
    assert_refused(
        &report["raw_pair"],
        &[EACCES],
        "a SOCK_RAW socketpair (a datagram pair to AF_UNIX) sending to a path",
    );
    let mut buf = [0u8; 32];
    assert!(dgram.recv(&mut buf).is_err(), "a datagram arrived");
    assert_eq!(
        report["socketpair"]["got"], "x",
        "socketpair stays allowed: {report:#}"
    );
    assert!(
        listener.accept().is_err(),
        "the module's connection was accepted"
    );
}

/// `modhost invoke … 5<secret 7>>outside.txt`, as a shell, an MCP client
/// or a job server leaves descriptors to the host: the module gets none.
#[test]
fn descriptors_inherited_by_the_host_do_not_reach_the_module() {
    let home = installed();
    let secret = home.outside().join("secret.txt");
    std::fs::write(&secret, "top-secret").unwrap();
    let outside = home.outside().join("outside.txt");
    std::fs::write(&outside, "").unwrap();
    let script = "exec \"$0\" --home \"$1\" --workspace \"$2\" invoke attacker attacker.descriptors --json --input '{}' 5<\"$3\" 7>>\"$4\"";
    let output = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg(&binaries().modhost)
        .arg(home.path())
        .arg(home.workspace())
        .arg(&secret)
        .arg(&outside)
        .current_dir(home.workspace())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(&stdout).unwrap();
    let report = &result["output"];
    // EBADF: not even open in the module.
    for probe in ["read_5", "write_7", "fstat_5", "fstat_7"] {
        assert_refused(&report[probe], &[EBADF], probe);
    }
    assert!(!stdout.contains("top-secret"));
    let mut written = String::new();
    std::fs::File::open(&outside)
        .unwrap()
        .read_to_string(&mut written)
        .unwrap();
    assert_eq!(written, "", "the module wrote through descriptor 7");
}

/// The attack: a capability that declares network opens sockets of its own
/// to the operator's loopback services, TCP and UDP, past its egress proxy.
/// Both are refused in the kernel, and the services see no one.
#[test]
fn a_capability_that_declares_network_gets_no_socket_past_its_proxy() {
    let home = installed();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let input = json!({
        "port": tcp.local_addr().unwrap().port(),
        "udp_port": udp.local_addr().unwrap().port(),
    });
    let run = home.invoke("attacker", "attacker.network", &input, &["--approve"]);
    let report = run.invoke_result()["output"].clone();
    assert_refused(&report["tcp"], &[EACCES], "a TCP connect past the proxy");
    assert_refused(&report["udp"], &[EACCES], "a UDP socket past the proxy");
    tcp.set_nonblocking(true).unwrap();
    assert!(
        tcp.accept().is_err(),
        "the loopback TCP service was reached"
    );
    udp.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        udp.recv(&mut buf).is_err(),
        "the loopback UDP service got a datagram"
    );
}

const ENOSYS: i64 = 38;

/// The refused system calls through the raw `syscall` instruction with edge
/// arguments, with and without network (two programs): garbage in the high
/// word of 32-bit arguments (the kernel reads the low word, so must the
/// filter), a `utimensat` path mapped at 4 GiB (a pointer whose low word is
/// zero is not `futimens`' null path), x32 numbers, numbers beyond the
/// table and with the high bit set; `setpgid` with guesses of the host's
/// key. Each is refused and nothing happened outside: no device node, the
/// victim's times unchanged.
#[test]
fn refused_calls_with_edge_arguments_stay_refused() {
    use std::os::unix::fs::MetadataExt;
    let home = installed();
    let victim = home.outside().join("victim.txt");
    std::fs::write(&victim, "victim").unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    for (verb, extra) in [("edges", &[][..]), ("network_edges", &["--approve"][..])] {
        let input = json!({"victim": victim});
        let run = home.invoke("attacker", &format!("attacker.{verb}"), &input, extra);
        let report = run.invoke_result()["output"].clone();
        home.assert_no_module_processes();
        let refused = [
            ("utimensat_path_at_4_gib", EPERM),
            ("mknod_chr_high", EPERM),
            ("mknodat_blk_high", EPERM),
            ("clone_newuser_high", EPERM),
            ("unshare_newuser_high", EPERM),
            ("netlink_high", EACCES),
            ("raw_type_high", EACCES),
            ("socketpair_dgram_high", EACCES),
            ("clone3", ENOSYS),
            ("x32_mount", ENOSYS),
            ("x32_unshare", ENOSYS),
            ("x32_clone", ENOSYS),
            ("beyond_the_table", ENOSYS),
            ("high_bit", ENOSYS),
            ("minus_one", ENOSYS),
        ];
        for (probe, errno) in refused {
            assert_refused(&report[probe], &[errno], &format!("{verb}: {probe}"));
        }
        // Guesses of the host's key, which alone lets `setpgid` through the
        // filter a module inherits from its spawner thread.
        for guess in 0..12 {
            let probe = format!("setpgid_guess_{guess}");
            assert_refused(&report[&probe], &[EPERM], &format!("{verb}: {probe}"));
        }
        assert_eq!(report["still_alive"]["ok"], true, "{report:#}");
        let state = home.path().join("state").join("attacker");
        for node in ["kmsg", "sda"] {
            assert!(!state.join(node).exists(), "{verb}: a {node} node was made");
        }
        let after = std::fs::metadata(&victim).unwrap();
        assert_eq!(
            (after.mtime(), after.atime()),
            (before.mtime(), before.atime()),
            "{verb}: utimensat reached outside: {report:#}"
        );
    }
}
