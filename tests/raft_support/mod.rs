//! Harness for the raft group tests: N members of one group over `MemNet`, each with a
//! state machine that records every payload it applies, in order; kill, restart and
//! partition helpers; and polls with deadlines (never bare sleeps) for what tests wait on.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use natsd::raft::mem_transport::MemNet;
use natsd::raft::{Group, GroupConfig, NodeId, ProposeError, StateMachine};

pub const WAIT: Duration = Duration::from_secs(20);

/// Records applied payloads; the snapshot is the whole record as JSON. A restore takes
/// at least `restore_delay` (a large stream's restore, in small).
pub struct Recorder {
    pub log: Arc<Mutex<Vec<Vec<u8>>>>,
    pub restore_delay: Duration,
}

impl Recorder {
    pub fn new(log: Arc<Mutex<Vec<Vec<u8>>>>) -> Recorder {
        Recorder {
            log,
            restore_delay: Duration::ZERO,
        }
    }
}

impl StateMachine for Recorder {
    fn apply(&mut self, index: u64, data: &[u8]) -> Vec<u8> {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.push(data.to_vec());
        format!("{index}:{}", log.len()).into_bytes()
    }

    fn snapshot(&self) -> Vec<u8> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        serde_json::to_vec(&*log).unwrap_or_default()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let v: Vec<Vec<u8>> = serde_json::from_slice(snapshot).map_err(|e| e.to_string())?;
        std::thread::sleep(self.restore_delay);
        *self.log.lock().unwrap_or_else(|p| p.into_inner()) = v;
        Ok(())
    }
}

pub fn tmp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "raft-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create tmp dir");
    d
}

/// Quick timings for tests; generous enough for a loaded 2-core CI machine.
pub fn test_config(name: &str, id: NodeId, dir: &Path) -> GroupConfig {
    let mut c = GroupConfig::new(name, id, dir.join(format!("n{id}")));
    c.heartbeat = Duration::from_millis(50);
    c.election_timeout_min = Duration::from_millis(300);
    c.election_timeout_max = Duration::from_millis(600);
    c.propose_timeout = Duration::from_secs(3);
    // Even members fsync their log at most every 20 ms (JetStream's `sync_interval`; most
    // appends are written without a trip to the blocking pool), odd ones on every append:
    // a group of two or more runs both.
    if id % 2 == 0 {
        c.sync_every = Some(Duration::from_millis(20));
    } else {
        // Odd members keep almost none of their log in memory: what they apply and send
        // to followers is read back from the log file.
        c.log_cache_bytes = 64;
    }
    c
}

pub struct Member {
    pub group: Group,
    pub log: Arc<Mutex<Vec<Vec<u8>>>>,
}

pub struct Cluster {
    pub name: String,
    pub dir: PathBuf,
    pub net: Arc<MemNet>,
    pub live: BTreeMap<NodeId, Member>,
    pub tweak: fn(&mut GroupConfig),
    /// How long members opened from now on take to restore a snapshot.
    pub restore_delay: Duration,
}

fn no_tweak(_: &mut GroupConfig) {}

pub fn server_name(id: NodeId) -> String {
    format!("s{id}")
}

impl Cluster {
    /// `n` members (ids 1..=n), bootstrapped together.
    pub async fn start(name: &str, n: u64, seed: u64) -> Cluster {
        Cluster::start_with(name, n, seed, no_tweak).await
    }

    pub async fn start_with(name: &str, n: u64, seed: u64, tweak: fn(&mut GroupConfig)) -> Cluster {
        let mut c = Cluster {
            name: name.to_string(),
            dir: tmp_dir(name),
            net: MemNet::new(seed),
            live: BTreeMap::new(),
            tweak,
            restore_delay: Duration::ZERO,
        };
        for id in 1..=n {
            c.open(id).await;
        }
        let members: Vec<(NodeId, String)> = (1..=n).map(|i| (i, server_name(i))).collect();
        for m in c.live.values() {
            m.group.bootstrap(&members).await.expect("bootstrap");
        }
        c
    }

    /// Opens member `id` from its directory (new or existing) and puts it on the network.
    pub async fn open(&mut self, id: NodeId) {
        let mut cfg = test_config(&self.name, id, &self.dir);
        (self.tweak)(&mut cfg);
        let log = Arc::new(Mutex::new(Vec::new()));
        let sm = Box::new(Recorder {
            log: log.clone(),
            restore_delay: self.restore_delay,
        });
        let group = Group::open(cfg, sm, self.net.clone())
            .await
            .expect("open group");
        self.net.register(&group);
        self.live.insert(id, Member { group, log });
    }

    /// Stops member `id` (its files stay).
    pub async fn kill(&mut self, id: NodeId) {
        if let Some(m) = self.live.remove(&id) {
            self.net.unregister(&self.name, id);
            m.group.shutdown().await;
        }
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.live.keys().copied().collect()
    }

    pub fn group(&self, id: NodeId) -> &Group {
        &self.live[&id].group
    }

    pub fn applied(&self, id: NodeId) -> Vec<Vec<u8>> {
        self.live[&id]
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits for one leader among `among` that all of them agree on.
    pub async fn leader_among(&self, among: &[NodeId], timeout: Duration) -> NodeId {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let leaders: Vec<Option<NodeId>> =
                among.iter().map(|i| self.group(*i).leader()).collect();
            if let Some(Some(l)) = leaders.first() {
                if among.contains(l)
                    && leaders.iter().all(|x| *x == Some(*l))
                    && self.group(*l).is_leader()
                {
                    return *l;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agreed leader among {among:?}: {leaders:?}"
            );
            // Wake on any metrics change of the first member, or after a heartbeat.
            let _ = self
                .group(among[0])
                .wait_for(Duration::from_millis(50), |_| false)
                .await;
        }
    }

    /// Some live member that leads (agreement not required), waiting up to `timeout`.
    pub async fn try_leader(&self, timeout: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(l) = self.ids().into_iter().find(|i| self.group(*i).is_leader()) {
                return Some(l);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            let first = *self.live.keys().next()?;
            let _ = self
                .group(first)
                .wait_for(Duration::from_millis(50), |m| m.leader.is_some())
                .await;
        }
    }

    pub async fn leader(&self) -> NodeId {
        self.leader_among(&self.ids(), WAIT).await
    }

    /// Proposes through whoever leads, following NotLeader hints, until `timeout`.
    pub async fn propose(&self, data: &[u8], timeout: Duration) -> Result<Vec<u8>, ProposeError> {
        let live: Vec<&Group> = self.live.values().map(|m| &m.group).collect();
        propose_among(&live, data, timeout).await
    }

    /// Waits until every member in `ids` has applied exactly `want`.
    pub async fn wait_applied(&self, ids: &[NodeId], want: &[Vec<u8>], timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        for id in ids {
            loop {
                let got = self.applied(*id);
                if got == want {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "member {id} applied {} entries, want {}: got {:?}",
                    got.len(),
                    want.len(),
                    got.iter()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .collect::<Vec<_>>()
                );
                let _ = self
                    .group(*id)
                    .wait_for(Duration::from_millis(50), |_| false)
                    .await;
            }
        }
    }

    pub async fn shutdown(mut self) {
        for id in self.ids() {
            self.kill(id).await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn msg(i: usize) -> Vec<u8> {
    format!("m{i}").into_bytes()
}

/// Proposes `data` to whichever of `groups` leads, following `NotLeader` hints and
/// retrying through elections until `timeout`. Only what was surely not proposed is
/// retried: a `Timeout` may still commit, so it is returned.
pub async fn propose_among(
    groups: &[&Group],
    data: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, ProposeError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let find = |id: NodeId| groups.iter().position(|g| g.id() == id);
    let mut target = groups
        .iter()
        .position(|g| g.is_leader())
        .unwrap_or_default();
    loop {
        match groups[target].propose(data.to_vec()).await {
            Ok(r) => return Ok(r),
            Err(ProposeError::NotLeader { leader: Some(l) })
                if find(l).is_some_and(|i| i != target) =>
            {
                target = find(l).unwrap_or(target)
            }
            Err(e @ (ProposeError::NotLeader { .. } | ProposeError::NoQuorum)) => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(e);
                }
                let _ = groups[target]
                    .wait_for(Duration::from_millis(50), |_| false)
                    .await;
                target = groups
                    .iter()
                    .position(|g| g.is_leader())
                    .unwrap_or_default();
            }
            Err(e) => return Err(e),
        }
    }
}
