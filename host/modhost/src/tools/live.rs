//! A toolbox that follows the operator while it runs (`modhost mcp`).
//!
//! `install`, `remove`, `enable`, `disable`, `pin`, `unpin` and edits of
//! `config.toml`, done by another process, change what a running server
//! lists and runs, without a restart, and the server is told
//! ([`Live::changes`]) so it can announce a new list to its client.
//!
//! Design decisions:
//!
//! - **A cheap check per request, not the `notify` crate.** Every operator
//!   change replaces or creates a file in a handful of known places:
//!   `config.toml` and `pins.json` are replaced atomically (a new inode),
//!   `install` and `remove` rename an entry of `modules/` (its mtime moves),
//!   `enable`/`disable` create or delete `.disabled` in the module's folder
//!   (that folder's mtime moves). So the state that decides the tool list is
//!   the [`FileIdentity`](modhost_runner::file_identity::FileIdentity) of those few
//!   paths: one `stat` each, a few microseconds, taken before every
//!   `tools/list` and every call. A change
//!   of any of them rediscovers (describe answers come from the cache unless
//!   the bytes changed). `notify` was not chosen: its events arrive
//!   asynchronously, so a `tools/list` sent right after `modhost disable`
//!   returned could still see the old list, and the check per request would
//!   be needed anyway; it adds a dependency and a thread per watcher, must
//!   re-add a watch for every installed folder, and inotify misses changes
//!   on network filesystems.
//! - **An idle client is told too.** The same check runs on a timer
//!   ([`POLL_INTERVAL`]) on a thread of its own, so a client that sends
//!   nothing still gets `notifications/tools/list_changed` within about half
//!   a second. That thread holds only a weak reference and ends with the
//!   toolbox.
//! - **The per-call gate does not wait for this.** A module disabled or
//!   unpinned since discovery is refused by the invoke pipeline itself
//!   (`Host::invoke_module`: the `.disabled` marker, `pins::PinsWatch`), so no
//!   poll interval is ever a window in which it runs.
//! - **One `stat` per path per call.** The identities this check takes
//!   before a call are handed to that call ([`Glance`], through
//!   `InvokeCall`): the pipeline's own checks of `pins.json` and of the
//!   module's folder read them there instead of looking again. After a
//!   reload the call gets none and looks for itself.
//! - **A tool that went away says why.** A call of a tool an earlier load
//!   offered gets the reason it is gone (module disabled, unpinned, changed,
//!   removed, capability disabled by an override) with its remedy, never a
//!   bare "no such tool", and nothing runs.
//! - **A reload that fails refuses, it does not keep the old policy.** When
//!   `config.toml` no longer parses (or an override names nothing), every
//!   call is refused with that error until the file is fixed: an operator
//!   who was tightening a rule must not find the old, looser one still
//!   applied. The list stays the last good one.
//! - **Discovery runs off the server's runtime**, on a thread with a runtime
//!   of its own ([`ToolSource::load`] is blocking): the server's runtime is
//!   single-threaded, and a reload asked for from the synchronous
//!   `tools/list` path cannot await there. A call awaits a reload from the
//!   blocking pool; `tools/list` waits for it (only after a change).
//! - **A change is signalled only when the list changed**: the new
//!   [`ToolDef`]s (names, descriptions, schemas, approval verdicts) are
//!   compared with the old, and so are the approval rules when some name
//!   callers (a remote caller's list is decided from them, not read from
//!   the tools), so an unrelated touch of a folder announces nothing.
//! - **The racy second.** A path whose identity changed within
//!   [`modhost_runner::file_identity::RACY`] of the check could change again unseen
//!   within the same clock tick; such a check is not trusted and the timer
//!   reloads once more after it settled.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::{Invoker, Loaded};
use modhost_runner::file_identity::{Fingerprint, Glance};

/// How often an idle server looks for operator changes.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Where a live toolbox loads its tools from again.
pub(crate) trait ToolSource<I>: Send + Sync + 'static {
    /// Load the tools as they are now, knowing what `previous` offered (to
    /// say why a tool is gone). Blocking: runs discovery on a thread of its
    /// own. `Err` says what the operator must fix.
    fn load(&self, previous: &Loaded<I>) -> Result<Reloaded<I>, String>;
}

/// One load, and the paths whose change means the tool list may differ.
pub(crate) struct Reloaded<I> {
    pub loaded: Loaded<I>,
    pub watched: Vec<PathBuf>,
}

pub(crate) use super::withdrawn::{Why, Withdrawn};

/// What is being served now.
struct Current<I> {
    loaded: Arc<Loaded<I>>,
    watched: Arc<[PathBuf]>,
    seen: Fingerprint,
    /// The check that produced `seen` may have missed a change in the same tick.
    settled: bool,
    /// The last reload failed: why, and every call is refused with it.
    unreadable: Option<String>,
}

/// The state of a [`super::Toolbox`]: fixed, or reloaded from a source.
pub(crate) struct Live<I> {
    current: RwLock<Current<I>>,
    source: Option<Box<dyn ToolSource<I>>>,
    /// One reload at a time; whoever waited finds the work done.
    reloading: Mutex<()>,
    changes: watch::Sender<u64>,
}

impl<I> std::fmt::Debug for Live<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("live", &self.source.is_some())
            .field("changes", &*self.changes.borrow())
            .finish_non_exhaustive()
    }
}

impl<I: Invoker> Live<I> {
    pub(crate) fn fixed(loaded: Loaded<I>) -> Self {
        Live {
            current: RwLock::new(Current {
                loaded: Arc::new(loaded),
                watched: Arc::default(),
                seen: Fingerprint::default(),
                settled: true,
                unreadable: None,
            }),
            source: None,
            reloading: Mutex::new(()),
            changes: watch::Sender::new(0),
        }
    }

    /// Serve `first` and follow `source` from now on; a thread checks every
    /// [`POLL_INTERVAL`] while the returned value lives.
    pub(crate) fn following(first: Reloaded<I>, source: Box<dyn ToolSource<I>>) -> Arc<Self> {
        let checked_at = SystemTime::now();
        let seen = Fingerprint::of(&first.watched);
        let live = Arc::new(Live {
            current: RwLock::new(Current {
                loaded: Arc::new(first.loaded),
                settled: seen.settled_at(checked_at),
                seen,
                watched: first.watched.into(),
                unreadable: None,
            }),
            source: Some(source),
            reloading: Mutex::new(()),
            changes: watch::Sender::new(0),
        });
        let weak = Arc::downgrade(&live);
        let poll = std::thread::Builder::new()
            .name("modhost-live".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(POLL_INTERVAL);
                    let Some(live) = weak.upgrade() else { return };
                    live.refresh(true);
                }
            });
        if let Err(e) = poll {
            // Requests still check; only an idle client is told late.
            eprintln!(
                "warning: cannot start the thread that watches for module changes ({e}); changes are seen at the next request"
            );
        }
        live
    }

    pub(crate) fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.source.as_ref().map(|_| self.changes.subscribe())
    }

    /// The last load, without looking for changes: for what a reload does
    /// not change (the home) and for a look-up that the call after it
    /// checks again ([`Live::current_for_call`]). Never blocks for a reload.
    pub(crate) fn last_loaded(&self) -> Arc<Loaded<I>> {
        Arc::clone(&self.read().loaded)
    }

    /// The tools as they are now: reloaded first when a watched path changed.
    /// Blocks for the reload (only after an operator change).
    pub(crate) fn current(&self) -> Arc<Loaded<I>> {
        self.refresh(false);
        Arc::clone(&self.read().loaded)
    }

    /// [`Live::current`] for a call: the reload, if any, runs on the
    /// blocking pool. With it, the watched paths as this check saw them,
    /// for the call's own checks to share ([`Glance`]); empty after a
    /// reload (the call then looks for itself, after the reload rather than
    /// before it). `Err`: the last reload failed, and why.
    pub(crate) async fn current_for_call(
        live: &Arc<Self>,
    ) -> Result<(Arc<Loaded<I>>, Glance), String> {
        let glance = match live.unchanged(false) {
            Some(glance) => glance,
            None => {
                let again = Arc::clone(live);
                // A panic in discovery is a failed reload like any other.
                if tokio::task::spawn_blocking(move || again.refresh(false))
                    .await
                    .is_err()
                {
                    return Err(
                        "reloading the modules failed unexpectedly; restart the server".to_owned(),
                    );
                }
                Glance::default()
            }
        };
        let current = live.read();
        match &current.unreadable {
            Some(why) => Err(why.clone()),
            None => Ok((Arc::clone(&current.loaded), glance)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current<I>> {
        self.current.read().unwrap_or_else(|e| e.into_inner())
    }

    /// `None` when a watched path changed since the last load (or, for
    /// the timer, the last check could have missed one); else the watched
    /// paths as they are now, every one as last seen.
    fn unchanged(&self, unsettled_counts: bool) -> Option<Glance> {
        if self.source.is_none() {
            return Some(Glance::default());
        }
        let current = self.read();
        let stale =
            (unsettled_counts && !current.settled) || !current.seen.still_of(&current.watched);
        (!stale).then(|| Glance::new(Arc::clone(&current.watched), current.seen.identities()))
    }

    /// Reload when stale; signal when the tool list changed.
    fn refresh(&self, unsettled_counts: bool) {
        let Some(source) = &self.source else { return };
        if self.unchanged(unsettled_counts).is_some() {
            return;
        }
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        if self.unchanged(unsettled_counts).is_some() {
            return;
        }
        let previous = Arc::clone(&self.read().loaded);
        // Taken before loading, so a change made during the load is seen
        // by the next check.
        let checked_at = SystemTime::now();
        let watched_before = Arc::clone(&self.read().watched);
        let seen_before = Fingerprint::of(&watched_before);
        let reloaded = source.load(&previous);
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        match reloaded {
            Ok(next) => {
                // What the new load watches (a module installed meanwhile
                // adds a folder); its identities are read now, so a change
                // of an old path during the load still shows as stale.
                let seen = if *next.watched == *watched_before {
                    seen_before
                } else {
                    Fingerprint::of(&next.watched)
                };
                let changed = next.loaded.lists_differently_from(&previous);
                // The operator sees a new problem (a name clash) as at start.
                for problem in &next.loaded.registry.problems {
                    if !previous.registry.problems.contains(problem) {
                        eprintln!("warning: {problem}");
                    }
                }
                *current = Current {
                    loaded: Arc::new(next.loaded),
                    settled: seen.settled_at(checked_at),
                    seen,
                    watched: next.watched.into(),
                    unreadable: None,
                };
                drop(current);
                if changed {
                    self.changes.send_modify(|n| *n += 1);
                }
            }
            Err(why) => {
                eprintln!("warning: {why}");
                current.settled = seen_before.settled_at(checked_at);
                current.seen = seen_before;
                current.unreadable = Some(why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::ApprovalConfig;
    use crate::home::HomeLayout;
    use crate::tools::test_support::{RecordingInvoker, module};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// A source whose modules a test sets, watching one marker file.
    struct Scripted {
        marker: PathBuf,
        home: PathBuf,
        modules: Arc<Mutex<Vec<&'static str>>>,
    }

    impl ToolSource<RecordingInvoker> for Scripted {
        fn load(
            &self,
            _previous: &Loaded<RecordingInvoker>,
        ) -> Result<Reloaded<RecordingInvoker>, String> {
            let modules = self.modules.lock().unwrap().clone();
            if modules.contains(&"broken") {
                return Err("config.toml is broken".into());
            }
            let entries = modules
                .iter()
                .map(|id| module(id, &json!([{"id": "go", "description": "go", "input_schema": {"type": "object"}}])))
                .collect();
            Ok(Reloaded {
                loaded: Loaded::new(
                    entries,
                    &ApprovalConfig::default(),
                    &BTreeMap::new(),
                    &Default::default(),
                    RecordingInvoker::default(),
                    HomeLayout::new(&self.home),
                    None,
                ),
                watched: vec![self.marker.clone()],
            })
        }
    }

    fn names(live: &Live<RecordingInvoker>) -> Vec<String> {
        live.current()
            .registry
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    #[tokio::test]
    async fn a_watched_change_reloads_signals_and_a_failed_reload_refuses_calls() {
        let dir = tempfile::tempdir().unwrap();
        let modules = Arc::new(Mutex::new(vec!["a"]));
        let source = Scripted {
            marker: dir.path().join("marker"),
            home: dir.path().to_path_buf(),
            modules: Arc::clone(&modules),
        };
        let first = source.load(&Loaded::new(
            Vec::new(),
            &ApprovalConfig::default(),
            &BTreeMap::new(),
            &Default::default(),
            RecordingInvoker::default(),
            HomeLayout::new(dir.path()),
            None,
        ));
        let live = Live::following(first.unwrap(), Box::new(source));
        let mut changes = live.changes().expect("a live toolbox signals");
        assert_eq!(names(&live), ["a__go"]);

        // Nothing watched changed: the source is not asked again.
        *modules.lock().unwrap() = vec!["a", "b"];
        assert_eq!(names(&live), ["a__go"]);
        assert!(!changes.has_changed().unwrap());

        std::fs::write(dir.path().join("marker"), "1").unwrap();
        assert_eq!(names(&live), ["a__go", "b__go"]);
        assert!(changes.has_changed().unwrap(), "a new list is signalled");
        changes.mark_unchanged();

        *modules.lock().unwrap() = vec!["broken"];
        std::fs::remove_file(dir.path().join("marker")).unwrap();
        let refused = Live::current_for_call(&live).await.unwrap_err();
        assert!(refused.contains("config.toml is broken"), "{refused}");
        assert_eq!(
            names(&live),
            ["a__go", "b__go"],
            "the list stays the last good one"
        );
        assert!(!changes.has_changed().unwrap());
    }
}
