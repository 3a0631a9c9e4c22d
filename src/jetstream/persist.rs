//! Stream and consumer metadata on disk, under `<store_dir>/jetstream/<account>/streams/
//! <stream>/`: `meta.json` (config, created), `msgs/` (the message store's own files) and
//! `obs/<consumer>/{meta.json,state.json}`. Every file is written whole to a temporary
//! file and renamed over the old one, so a crash leaves either the old or the new version.

use super::types::{ConsumerConfig, StreamConfig};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct StreamMeta {
    pub config: StreamConfig,
    pub created: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ConsumerMeta {
    pub name: String,
    pub config: ConsumerConfig,
    pub created: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// How a replicated stream's consumer was created: the stream's leader that appended its
/// creation to the stream's log, and the replica count it had then. Its group's first
/// members follow from these and the stream's peers, on every node alike
/// (`cluster/cgroups.rs`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub leader: u64,
    pub replicas: usize,
}

/// A consumer's progress: next stream and consumer sequences, unacknowledged deliveries
/// (`[stream seq, consumer seq, delivered at (unix nanos), delivery count]`) and delivery
/// counts of redelivered messages.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerState {
    pub sseq: u64,
    pub dseq: u64,
    #[serde(default)]
    pub pending: Vec<(u64, u64, i64, u64)>,
    #[serde(default)]
    pub redelivered: Vec<(u64, u64)>,
}

pub fn stream_dir(root: &Path, account: &str, stream: &str) -> PathBuf {
    root.join(account).join("streams").join(stream)
}

pub fn consumer_dir(stream_dir: &Path, consumer: &str) -> PathBuf {
    stream_dir.join("obs").join(consumer)
}

/// Write `data` to `path` atomically (temporary file + rename); `sync` also fsyncs.
pub fn write_atomic(path: &Path, data: &[u8], sync: bool) -> Result<(), String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{}: no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    f.write_all(data)
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    if sync {
        f.sync_all()
            .map_err(|e| format!("syncing {}: {e}", tmp.display()))?;
    }
    drop(f);
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("renaming {} to {}: {e}", tmp.display(), path.display()))?;
    if sync {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

pub fn write_json<T: Serialize>(path: &Path, v: &T, sync: bool) -> Result<(), String> {
    let data =
        serde_json::to_vec_pretty(v).map_err(|e| format!("encoding {}: {e}", path.display()))?;
    write_atomic(path, &data, sync)
}

pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    let data = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_slice(&data).map_err(|e| format!("decoding {}: {e}", path.display()))
}

/// The subdirectories of `dir` (names), sorted; none if it does not exist.
pub fn subdirs(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

pub fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("JetStream: removing {}: {e}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_json_round_trip() {
        let dir = std::env::temp_dir().join(format!("natsd-persist-{}", std::process::id()));
        let p = dir.join("a/b/state.json");
        let st = ConsumerState {
            sseq: 5,
            dseq: 7,
            pending: vec![(3, 4, 10, 2)],
            redelivered: vec![(3, 2)],
        };
        write_json(&p, &st, true).unwrap();
        assert_eq!(read_json::<ConsumerState>(&p).unwrap(), st);
        assert!(!p.with_extension("tmp").exists());
        assert_eq!(subdirs(&dir), vec!["a".to_string()]);
        remove_dir(&dir);
    }
}
