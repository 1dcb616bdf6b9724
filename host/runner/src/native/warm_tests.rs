//! The warm pool driven through [`super::run`], the way a long-running
//! host uses it. A file of its own, beside `warm.rs` rather than inside it:
//! the pool sits below `native.rs`, and these tests sit above both.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::warm::*;
use crate::Call;
use crate::native::tests::{REQ, call, is_dead, script, write_grant};
use crate::native::{SpawnSpec, run};
use modhost_sandbox::Grant;

/// A module that, before reading its request, records its pid in
/// `<out>/started.<pid>`, then answers with its pid.
fn pid_module(dir: &Path, out: &Path) -> PathBuf {
    script(
        dir,
        "pid",
        &format!(
            r#"touch {}/started.$$
read line
echo "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":$$}}""#,
            out.display()
        ),
    )
}

async fn pid_of_call(module: &Path, call: &Call<'_>, pool: &WarmPool) -> i64 {
    let exchange = run(module, call, None, Some(pool)).await.unwrap();
    exchange.response.outcome.unwrap().as_i64().unwrap()
}

/// The pids that have started (and recorded themselves) so far.
fn started_pids(out: &Path) -> Vec<i64> {
    let mut pids: Vec<i64> = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("started.")?.parse().ok()
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Wait until `count` processes have recorded their start.
async fn wait_for_starts(out: &Path, count: usize) -> Vec<i64> {
    for _ in 0..250 {
        let pids = started_pids(out);
        if pids.len() >= count {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("only {:?} started", started_pids(out));
}

/// A pid module granted `out`, called once through a fresh pool.
struct OneCallMade {
    _dir: tempfile::TempDir,
    out: tempfile::TempDir,
    module: PathBuf,
    grants: [Grant; 1],
    pool: WarmPool,
    /// The pid that answered the call.
    first: i64,
    /// The pids started ahead for the next calls, once they have started.
    warm: Vec<i64>,
}

async fn one_call_made() -> OneCallMade {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let module = pid_module(dir.path(), out.path());
    let grants = [write_grant(out.path())];
    let pool = WarmPool::new();
    let first = pid_of_call(&module, &with_grants(&grants), &pool).await;
    assert_eq!(pool.len(), DEPTH);
    let started = wait_for_starts(out.path(), 1 + DEPTH).await;
    let warm = started.into_iter().filter(|&p| p != first).collect();
    OneCallMade {
        _dir: dir,
        out,
        module,
        grants,
        pool,
        first,
        warm,
    }
}

/// A call with `grants` that the host allowed to start ahead.
fn with_grants<'a>(grants: &'a [Grant]) -> Call<'a> {
    Call {
        grants,
        start_ahead: true,
        ..call(REQ, 10_000, 1 << 20)
    }
}

/// SIGKILL each of `pids`.
fn kill_all(pids: &[i64]) {
    for &pid in pids {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    }
}

/// Whether `pid` is gone from the process table, zombie included (killed
/// and reaped), within `tries` looks 20 ms apart.
async fn is_reaped(pid: i64, tries: u32) -> bool {
    for _ in 0..tries {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_not_allowed_ahead_runs_cold_and_leaves_nothing_started() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let module = pid_module(dir.path(), out.path());
    let grants = [write_grant(out.path())];
    let pool = WarmPool::new();
    // An `ask` capability's call (approved, so it runs): the pool is
    // there, but the call is not allowed ahead.
    let asked = Call {
        start_ahead: false,
        ..with_grants(&grants)
    };
    for _ in 0..3 {
        pid_of_call(&module, &asked, &pool).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        started_pids(out.path()).len(),
        3,
        "three approved calls ran the module three times, nothing more"
    );
    assert!(pool.is_empty(), "and nothing waits for the next one");

    // Processes an allowed call of the same spec left waiting are not
    // used by such a call either: its process starts after its approval.
    let allowed = pid_of_call(&module, &with_grants(&grants), &pool).await;
    let waiting: Vec<i64> = wait_for_starts(out.path(), 4 + DEPTH)
        .await
        .into_iter()
        .filter(|&p| p != allowed)
        .collect();
    let cold = pid_of_call(&module, &asked, &pool).await;
    assert!(!waiting.contains(&cold), "{cold} was started ahead");
    assert_eq!(pool.len(), DEPTH, "nothing was taken or added");
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_no_call_came_for_within_the_idle_life_are_ended_and_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let module = pid_module(dir.path(), out.path());
    let grants = [write_grant(out.path())];
    let idle_life = Duration::from_millis(400);
    let pool = WarmPool::with_idle_life(idle_life);
    // Twice: once the pool has nothing left waiting its expiry stops, and
    // the next call must start it again.
    for round in 1..=2 {
        let before = started_pids(out.path());
        let answered = pid_of_call(&module, &with_grants(&grants), &pool).await;
        let warm: Vec<i64> = wait_for_starts(out.path(), round * (1 + DEPTH))
            .await
            .into_iter()
            .filter(|p| *p != answered && !before.contains(p))
            .collect();
        assert_eq!(warm.len(), DEPTH, "round {round}: {warm:?}");
        for &pid in &warm {
            assert!(!is_dead(pid as i32, 1).await, "{pid} waits for a call");
        }
        tokio::time::sleep(idle_life).await;
        for &pid in &warm {
            assert!(
                is_reaped(pid, 150).await,
                "round {round}: {pid} outlived the idle life"
            );
        }
        assert!(pool.is_empty(), "round {round}: the spec was dropped");
        tokio::time::sleep(idle_life).await;
        assert_eq!(
            started_pids(out.path()).len(),
            round * (1 + DEPTH),
            "round {round}: nothing was started in their place"
        );
    }
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_call_is_answered_by_the_process_started_after_the_last() {
    let OneCallMade {
        _dir,
        out,
        module,
        grants,
        pool,
        warm,
        ..
    } = one_call_made().await;
    assert_eq!(
        warm.len(),
        DEPTH,
        "processes are started for the next calls"
    );
    // They wait on stdin, confined like the first, until calls come.
    for &pid in &warm {
        assert!(!is_dead(pid as i32, 5).await, "{pid} is waiting");
    }
    let second = pid_of_call(&module, &with_grants(&grants), &pool).await;
    assert!(warm.contains(&second), "a waiting process answered");
    assert!(
        is_dead(second as i32, 100).await,
        "and is gone after its call"
    );
    assert_eq!(pool.len(), DEPTH, "and was replaced");

    // A call with other grants is never served by that spec's processes.
    let other = tempfile::tempdir().unwrap();
    let wider = [write_grant(out.path()), write_grant(other.path())];
    let waiting = wait_for_starts(out.path(), 2 + DEPTH).await;
    let third = pid_of_call(&module, &with_grants(&wider), &pool).await;
    assert!(!waiting.contains(&third), "a cold process for new grants");
    assert_eq!(pool.len(), 2 * DEPTH, "each spec keeps its own processes");
    pool.shutdown().await;
    assert!(pool.is_empty());
    for pid in started_pids(out.path()) {
        assert!(is_dead(pid as i32, 100).await, "{pid} outlived shutdown");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_process_that_died_is_replaced_by_a_cold_one() {
    let made = one_call_made().await;
    kill_all(&made.warm);
    for &pid in &made.warm {
        assert!(is_dead(pid as i32, 100).await);
    }
    answered_by_a_new_process(made).await;
}

/// The race: a waiting process dies, and the next call comes before the
/// runtime has run the task that learns of the exit (here the runtime's one
/// thread is held until the processes are zombies). The call must still
/// see that the process is gone and start a cold one, not fail on it.
#[tokio::test(flavor = "current_thread")]
async fn a_waiting_process_found_dead_before_its_exit_was_noticed_is_replaced_by_a_cold_one() {
    let made = one_call_made().await;
    kill_all(&made.warm);
    // Blocking, not awaiting: nothing else on this runtime runs meanwhile.
    for &pid in &made.warm {
        let gone = (0..500).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z ") || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(gone, "{pid} did not die");
    }
    answered_by_a_new_process(made).await;
}

/// The attack on processes started ahead: the granted folder is moved
/// away (where no grant reaches) and a new one made at its path while two
/// processes wait. Each was confined at its start, its landlock domain
/// bound to the moved folder; neither may serve a call, and the calls
/// write into the new folder.
#[tokio::test(flavor = "multi_thread")]
async fn a_granted_folder_replaced_while_processes_wait_is_not_reached_through_them() {
    let made = one_call_made().await;
    let granted = made.out.path().to_path_buf();
    let moved = tempfile::tempdir().unwrap();
    let moved = moved.path().join("moved");
    std::fs::rename(&granted, &moved).unwrap();
    std::fs::create_dir(&granted).unwrap();
    for _ in 0..DEPTH {
        let pid = pid_of_call(&made.module, &with_grants(&made.grants), &made.pool).await;
        assert!(
            pid != made.first && !made.warm.contains(&pid),
            "a process confined before the move answered"
        );
        assert!(
            granted.join(format!("started.{pid}")).exists(),
            "the call did not reach the new folder"
        );
    }
    for &pid in &made.warm {
        assert!(is_dead(pid as i32, 100).await, "{pid} was left waiting");
    }
    made.pool.shutdown().await;
}

/// The next call of `made`'s spec, its waiting processes dead: answered by
/// a process started for it, neither the first nor a waiting one.
async fn answered_by_a_new_process(made: OneCallMade) {
    let second = pid_of_call(&made.module, &with_grants(&made.grants), &made.pool).await;
    assert!(
        second != made.first && !made.warm.contains(&second),
        "answered by a new process"
    );
    made.pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answered_call_returns_at_once_and_shutdown_ends_its_process() {
    let dir = tempfile::tempdir().unwrap();
    // Answers, then lingers instead of exiting.
    let module = script(
        dir.path(),
        "linger",
        r#"read line
echo "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":$$}"
sleep 30"#,
    );
    let pool = WarmPool::new();
    let pid = pid_of_call(&module, &call(REQ, 10_000, 1 << 20), &pool).await;
    // The call did not wait out the exit grace: the process still runs,
    // its ending left to the background.
    assert!(!is_dead(pid as i32, 1).await, "{pid} was waited for");
    pool.shutdown().await;
    assert!(is_dead(pid as i32, 100).await, "{pid} outlived shutdown");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_spec_beyond_the_limit_evicts_the_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let module = pid_module(dir.path(), out.path());
    // One spec per extra root; every process may record itself in `out`.
    let roots: Vec<tempfile::TempDir> = (0..=MAX_SPECS)
        .map(|_| tempfile::tempdir().unwrap())
        .collect();
    let grants: Vec<[Grant; 2]> = roots
        .iter()
        .map(|r| {
            let spec_root = Grant {
                name: "spec".into(),
                ..write_grant(r.path())
            };
            [write_grant(out.path()), spec_root]
        })
        .collect();
    let pool = WarmPool::new();
    for grant in &grants {
        pid_of_call(&module, &with_grants(grant), &pool).await;
    }
    assert_eq!(pool.len(), MAX_WAITING, "bounded");
    // Every process ever started, and how many of them still live: the
    // evicted spec's were ended, not merely forgotten.
    let started = wait_for_starts(out.path(), (MAX_SPECS + 1) * (1 + DEPTH)).await;
    let mut alive = Vec::new();
    for _ in 0..250 {
        alive.clear();
        for &pid in &started {
            if !is_dead(pid as i32, 1).await {
                alive.push(pid);
            }
        }
        if alive.len() <= MAX_WAITING {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(alive.len(), MAX_WAITING, "live processes: {alive:?}");
    let first = SpawnSpec::of(&module, &with_grants(&grants[0]));
    assert!(
        pool.take(&first).await.is_none(),
        "the oldest spec was evicted"
    );
    let last = SpawnSpec::of(&module, &with_grants(&grants[MAX_SPECS]));
    assert!(
        pool.take(&last).await.is_some(),
        "the newest keeps its processes"
    );
    pool.shutdown().await;
}

/// A call granted secrets has them in its own process's environment, and
/// no process started ahead ever holds them: such a call neither takes a
/// waiting process nor leaves one started, and processes started ahead
/// for the same spec (by a call without secrets) carry none.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_with_secrets_starts_cold_with_them_and_none_is_started_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Records, as it starts, what it holds in WARM_SECRET.
    let module = script(
        dir.path(),
        "secretive",
        &format!(
            r#"printf '%s' "${{WARM_SECRET:-none}}" > {}/started.$$
read line
echo "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"pid\":$$,\"secret\":\"${{WARM_SECRET:-none}}\"}}}}""#,
            out.path().display()
        ),
    );
    let grants = [write_grant(out.path())];
    let secrets = [crate::CallSecret::new("WARM_SECRET", "s3cr3t-value-42")];
    let with_secret = Call {
        secrets: &secrets,
        ..with_grants(&grants)
    };
    let pool = WarmPool::new();
    let answer = |exchange: crate::Exchange| exchange.response.outcome.unwrap();
    let first = answer(run(&module, &with_secret, None, Some(&pool)).await.unwrap());
    assert_eq!(first["secret"], "s3cr3t-value-42");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        started_pids(out.path()).len(),
        1,
        "only the call's process started"
    );
    assert!(
        pool.is_empty(),
        "nothing started ahead for a call with secrets"
    );

    // An allowed call of the same spec without secrets leaves processes
    // waiting; none of them holds the secret, and the next call with
    // secrets does not take one.
    let plain = answer(
        run(&module, &with_grants(&grants), None, Some(&pool))
            .await
            .unwrap(),
    );
    assert_eq!(plain["secret"], "none");
    let waiting: Vec<i64> = wait_for_starts(out.path(), 2 + DEPTH)
        .await
        .into_iter()
        .filter(|&p| p != first["pid"].as_i64().unwrap() && p != plain["pid"].as_i64().unwrap())
        .collect();
    for pid in &waiting {
        let held = std::fs::read_to_string(out.path().join(format!("started.{pid}"))).unwrap();
        assert_eq!(held, "none", "process {pid} started ahead holds a secret");
    }
    let again = answer(run(&module, &with_secret, None, Some(&pool)).await.unwrap());
    assert_eq!(again["secret"], "s3cr3t-value-42");
    assert!(
        !waiting.contains(&again["pid"].as_i64().unwrap()),
        "a waiting process served it"
    );
    assert_eq!(pool.len(), DEPTH, "nothing was taken or added");
    pool.shutdown().await;
}

#[test]
fn a_calls_secret_never_shows_its_value_in_debug_output() {
    let secret = crate::CallSecret::new("GITHUB_TOKEN", "ghp_not-for-logs");
    let call = Call {
        secrets: std::slice::from_ref(&secret),
        ..call(REQ, 1000, 1024)
    };
    let shown = format!("{call:?}");
    assert!(shown.contains("GITHUB_TOKEN"), "{shown}");
    assert!(!shown.contains("ghp_not-for-logs"), "{shown}");
}

/// The memory cgroup `pid` sits in, from `/proc/<pid>/cgroup` (the suite
/// runs on cgroup v1, where the memory controller has a line of its own).
fn memory_cgroup_of(pid: i64) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then(|| path.to_owned())
        })
        .unwrap_or_else(|| panic!("no memory cgroup line for {pid}: {text}"))
}

/// Processes started ahead are each confined as a cold one is, memory
/// included: each sits in a memory cgroup of its own from the host's pool,
/// never one that another live process (the call that answered, the other
/// waiting one) holds, with its call's limit.
#[tokio::test(flavor = "multi_thread")]
async fn each_process_started_ahead_has_a_memory_cgroup_of_its_own() {
    let made = one_call_made().await;
    let pool_folder = format!("/modhost-{}/call-", std::process::id());
    let cgroups: Vec<String> = made.warm.iter().map(|&pid| memory_cgroup_of(pid)).collect();
    assert_eq!(cgroups.len(), DEPTH);
    for (pid, cgroup) in made.warm.iter().zip(&cgroups) {
        assert!(cgroup.contains(&pool_folder), "{pid} sits in {cgroup}");
        let limit = std::fs::read_to_string(format!(
            "/sys/fs/cgroup/memory{cgroup}/memory.limit_in_bytes"
        ))
        .unwrap();
        assert_eq!(
            limit.trim(),
            modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES.to_string()
        );
    }
    let mut distinct = cgroups.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        cgroups.len(),
        "two live processes share {cgroups:?}"
    );
    // The next call is served by one of them, in the cgroup it has held
    // since its start.
    let served = pid_of_call(&made.module, &with_grants(&made.grants), &made.pool).await;
    assert!(
        made.warm.contains(&served),
        "{served} was not started ahead"
    );
    made.pool.shutdown().await;
}
