//! The process-wide background syncer of file stores with a sync interval.

use super::write::fsync_files;
use super::Inner;
use crate::jetstream::store::StoreError;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

/// The one background thread that fsyncs every store opened with a non-zero
/// `SyncPolicy::interval` (started with the first such store, named `natsd-fs-sync`, idle
/// when no store is dirty). Stores are held weakly: dropping a store unregisters it.
pub(super) struct Syncer {
    state: Mutex<SyncerState>,
    cv: Condvar,
}

struct SyncerState {
    stores: Vec<Weak<Mutex<Inner>>>,
    /// A store became dirty: recompute the deadlines.
    wake: bool,
}

static SYNCER: OnceLock<Result<Arc<Syncer>, String>> = OnceLock::new();

impl Syncer {
    pub(super) fn get() -> Result<Arc<Syncer>, StoreError> {
        SYNCER
            .get_or_init(|| {
                let syncer = Arc::new(Syncer {
                    state: Mutex::new(SyncerState {
                        stores: Vec::new(),
                        wake: false,
                    }),
                    cv: Condvar::new(),
                });
                let s2 = syncer.clone();
                std::thread::Builder::new()
                    .name("natsd-fs-sync".into())
                    .spawn(move || s2.run())
                    .map(|_| syncer)
                    .map_err(|e| format!("spawn the file store sync thread: {e}"))
            })
            .clone()
            .map_err(StoreError::Io)
    }

    fn lock(&self) -> MutexGuard<'_, SyncerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn register(&self, store: Weak<Mutex<Inner>>) {
        let mut g = self.lock();
        g.stores.retain(|w| w.strong_count() > 0);
        g.stores.push(store);
        g.wake = true;
        self.cv.notify_one();
    }

    pub(super) fn wake(&self) {
        self.lock().wake = true;
        self.cv.notify_one();
    }

    /// Never holds its own lock while locking a store (stores call `wake` under theirs).
    fn run(&self) {
        loop {
            let stores = {
                let mut g = self.lock();
                g.stores.retain(|w| w.strong_count() > 0);
                g.stores.clone()
            };
            let mut next: Option<Instant> = None;
            for w in stores {
                let Some(inner) = w.upgrade() else { continue };
                let mut g = inner.lock().unwrap_or_else(|e| e.into_inner());
                let Some(t) = g.dirty_since.filter(|_| !g.closed) else {
                    continue;
                };
                let due = t + g.policy.interval;
                if due <= Instant::now() {
                    // Flush under the lock, fsync without it: appends are not held up.
                    let prepared = g.prepare_sync();
                    let dir = g.dir.clone();
                    drop(g);
                    let result = prepared
                        .and_then(|(files, gen)| fsync_files(&files).map(|()| (files, gen)));
                    let mut g = inner.lock().unwrap_or_else(|e| e.into_inner());
                    match result {
                        Ok((files, gen)) => g.sync_done(&files, gen),
                        Err(e) => {
                            tracing::warn!(
                                "JetStream file store {}: background sync: {e}",
                                dir.display()
                            );
                            g.sync_failed();
                        }
                    }
                } else {
                    next = Some(next.map_or(due, |n: Instant| n.min(due)));
                }
            }
            let mut g = self.lock();
            if !g.wake {
                g = match next {
                    Some(d) => {
                        let wait = d.saturating_duration_since(Instant::now());
                        self.cv
                            .wait_timeout(g, wait)
                            .map(|(g, _)| g)
                            .unwrap_or_else(|e| e.into_inner().0)
                    }
                    None => self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                };
            }
            g.wake = false;
        }
    }
}
