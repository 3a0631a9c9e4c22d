//! The meta group's state: which streams exist in the JetStream cluster and which nodes
//! hold them (nats-server's stream assignments). Every JetStream node is a member; the
//! leader decides, the log makes every node agree, and each node then creates or drops its
//! own copies (the cluster's reconcile, mod.rs).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::raft::{NodeId, StateMachine};

/// One stream's assignment.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct StreamAssignment {
    pub account: String,
    pub name: String,
    /// The stream's configuration (after defaults) as JSON, as its creation gave it.
    pub config: serde_json::Value,
    /// The nodes holding it: (node id, server name); the first `num_replicas` chosen.
    pub peers: Vec<(NodeId, String)>,
    /// Its Raft group's name (one subject token).
    pub group: String,
    /// Where the creation's answer goes (the stream's first leader sends it).
    #[serde(default)]
    pub reply: String,
    /// Unix nanos of the creation.
    pub created: i64,
    /// The members the group was bootstrapped with; `None` (older entries): `peers`. Empty
    /// once the peers changed: a node opening its copy after that never bootstraps the
    /// group (it would start a second history), the leader adds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<Vec<(NodeId, String)>>,
    /// The last change of peers or replica count (`StreamPeers`): the configuration the
    /// stream's leader applies through its log, and when (Unix nanos).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<serde_json::Value>,
    #[serde(default)]
    pub updated: i64,
    /// Created by STREAM.RESTORE: the first leader takes the data (`restore.rs`) instead of
    /// answering a creation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore: bool,
}

impl StreamAssignment {
    /// The members a node opening its copy bootstraps the group with (none: it waits to
    /// be added).
    pub fn bootstrap_members(&self) -> &[(NodeId, String)] {
        self.initial.as_deref().unwrap_or(&self.peers)
    }

    /// The replica count the assignment asks for.
    pub fn replicas(&self) -> usize {
        self.config
            .get("num_replicas")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(1)
            .max(1) as usize
    }
}

/// What the meta log holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "op")]
pub enum MetaEntry {
    StreamAdd(StreamAssignment),
    StreamDel {
        account: String,
        name: String,
    },
    /// New peers for a stream (a replica count changed, a peer removed), with the
    /// configuration its leader then applies (`update`) and who asked (`reply`).
    StreamPeers {
        account: String,
        name: String,
        group: String,
        peers: Vec<(NodeId, String)>,
        config: serde_json::Value,
        reply: String,
        at: i64,
    },
}

/// Every assignment, by (account, stream).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct MetaState {
    pub streams: BTreeMap<String, BTreeMap<String, StreamAssignment>>,
}

impl MetaState {
    pub fn stream(&self, account: &str, name: &str) -> Option<&StreamAssignment> {
        self.streams.get(account)?.get(name)
    }

    pub fn account_streams(&self, account: &str) -> impl Iterator<Item = &StreamAssignment> {
        self.streams
            .get(account)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// The account's streams but `name` as account limits count them: (storage,
    /// `max_bytes`, replicas).
    pub fn limit_view(
        &self,
        account: &str,
        name: &str,
    ) -> Vec<(crate::jetstream::types::Storage, i64, i64)> {
        self.account_streams(account)
            .filter(|sa| sa.name != name)
            .map(|sa| {
                let storage = match sa.config.get("storage").and_then(|v| v.as_str()) {
                    Some("memory") => crate::jetstream::types::Storage::Memory,
                    _ => crate::jetstream::types::Storage::File,
                };
                let max_bytes = sa
                    .config
                    .get("max_bytes")
                    .and_then(serde_json::Value::as_i64)
                    .unwrap_or(-1);
                (storage, max_bytes, sa.replicas() as i64)
            })
            .collect()
    }

    /// Applies one entry; the answer is `ok` or why not (for the proposer's log).
    pub fn apply(&mut self, e: MetaEntry) -> Result<(), String> {
        match e {
            MetaEntry::StreamAdd(sa) => {
                let acc = self.streams.entry(sa.account.clone()).or_default();
                if let Some(old) = acc.get(&sa.name) {
                    if old.config != sa.config {
                        return Err(format!("stream {:?} exists", sa.name));
                    }
                    return Ok(());
                }
                acc.insert(sa.name.clone(), sa);
                Ok(())
            }
            MetaEntry::StreamPeers {
                account,
                name,
                group,
                peers,
                config,
                reply,
                at,
            } => {
                let sa = self
                    .streams
                    .get_mut(&account)
                    .and_then(|a| a.get_mut(&name))
                    .filter(|sa| sa.group == group)
                    .ok_or(format!("stream {name:?} not found"))?;
                sa.peers = peers;
                sa.initial = Some(Vec::new());
                sa.config = config.clone();
                sa.update = Some(config);
                sa.reply = reply;
                sa.updated = at;
                Ok(())
            }
            MetaEntry::StreamDel { account, name } => {
                let acc = self.streams.get_mut(&account);
                let gone = acc.and_then(|a| a.remove(&name));
                self.streams.retain(|_, m| !m.is_empty());
                gone.map(|_| ()).ok_or(format!("stream {name:?} not found"))
            }
        }
    }
}

/// The meta group's state machine: the shared [`MetaState`], and a nudge to the cluster's
/// reconcile task after every change.
pub struct MetaSm {
    pub state: Arc<Mutex<MetaState>>,
    pub changed: mpsc::UnboundedSender<()>,
}

fn lock(m: &Mutex<MetaState>) -> std::sync::MutexGuard<'_, MetaState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StateMachine for MetaSm {
    fn apply(&mut self, index: u64, data: &[u8]) -> Vec<u8> {
        let res = match serde_json::from_slice::<MetaEntry>(data) {
            Ok(e) => lock(&self.state).apply(e),
            Err(e) => Err(format!("bad meta entry at {index}: {e}")),
        };
        let _ = self.changed.send(());
        match res {
            Ok(()) => b"+".to_vec(),
            Err(why) => {
                tracing::debug!("JetStream meta entry {index}: {why}");
                format!("-{why}").into_bytes()
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&*lock(&self.state)).unwrap_or_default()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let s: MetaState =
            serde_json::from_slice(snapshot).map_err(|e| format!("meta snapshot: {e}"))?;
        *lock(&self.state) = s;
        let _ = self.changed.send(());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(name: &str, cfg: u64) -> StreamAssignment {
        StreamAssignment {
            account: "$G".into(),
            name: name.into(),
            config: serde_json::json!({ "name": name, "max_msgs": cfg }),
            peers: vec![(1, "a".into())],
            group: format!("S-{name}"),
            reply: String::new(),
            created: 1,
            initial: None,
            update: None,
            updated: 0,
            restore: false,
        }
    }

    #[test]
    fn assignments_add_delete_and_survive_a_snapshot() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let state = Arc::new(Mutex::new(MetaState::default()));
        let mut sm = MetaSm {
            state: state.clone(),
            changed: tx,
        };
        let add = |s: &StreamAssignment| serde_json::to_vec(&MetaEntry::StreamAdd(s.clone()));
        assert_eq!(sm.apply(1, &add(&sa("A", 1)).unwrap_or_default()), b"+");
        // The same again: no change; another config under the name: refused.
        assert_eq!(sm.apply(2, &add(&sa("A", 1)).unwrap_or_default()), b"+");
        assert!(sm.apply(3, &add(&sa("A", 2)).unwrap_or_default())[0] == b'-');
        assert!(sm.apply(4, b"garbage")[0] == b'-');
        assert!(rx.try_recv().is_ok());
        let snap = sm.snapshot();
        let del = serde_json::to_vec(&MetaEntry::StreamDel {
            account: "$G".into(),
            name: "A".into(),
        })
        .unwrap_or_default();
        assert_eq!(sm.apply(5, &del), b"+");
        assert!(lock(&state).streams.is_empty());
        assert!(sm.restore(&snap).is_ok());
        assert_eq!(lock(&state).stream("$G", "A"), Some(&sa("A", 1)));
        assert!(sm.restore(b"{").is_err());
    }
}
