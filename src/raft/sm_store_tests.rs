//! Tests of sm_store.rs: the order of a follower's answer and its apply, the snapshot
//! files and their checks, and an apply waiting for a snapshot without holding a thread.

use super::*;
use openraft::CommittedLeaderId;
use std::sync::Mutex as StdMutex;

/// Records what it applied, in order, in a log shared with the test.
struct Recorder(Arc<StdMutex<Vec<String>>>);

impl StateMachine for Recorder {
    fn apply(&mut self, index: u64, _data: &[u8]) -> Vec<u8> {
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("apply {index}"));
        }
        Vec::new()
    }
    /// What it applied, joined by commas.
    fn snapshot(&self) -> Vec<u8> {
        self.0
            .lock()
            .map(|v| v.join(","))
            .unwrap_or_default()
            .into_bytes()
    }
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let s = String::from_utf8_lossy(snapshot).to_string();
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("restore {s}"));
        }
        Ok(())
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("natsd-smstore-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn data_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("snapshot") && n != "snapshot")
        .collect();
    v.sort();
    v
}

async fn read_all(snap: Snapshot<TypeConfig>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut f = snap.snapshot;
    let mut v = Vec::new();
    f.read_to_end(&mut v).await.expect("read snapshot data");
    v
}

fn opened(dir: &Path) -> (SmStore, Arc<StdMutex<Vec<String>>>) {
    let log = Arc::new(StdMutex::new(Vec::new()));
    let sm = SmStore::open(dir, 1, Box::new(Recorder(log.clone()))).expect("open");
    (sm, log)
}

fn logged(log: &Arc<StdMutex<Vec<String>>>) -> Vec<String> {
    log.lock().map(|v| v.clone()).unwrap_or_default()
}

/// The one data file left is the snapshot at index 9, and `sm` reopened restores `data`.
fn reopened_restores(sm: SmStore, dir: &Path, data: &str) {
    let files = data_files(dir);
    assert!(
        files.len() == 1 && files[0].starts_with("snapshot-9-"),
        "{files:?}"
    );
    drop(sm);
    let (_, log) = opened(dir);
    assert_eq!(logged(&log), [format!("restore {data}")]);
}

/// A snapshot's data is a file of its own, replaced with the next snapshot, restored
/// on open and checked against the record's length and crc; one received from a leader
/// becomes the current one; a record with inline data (written before data files) is
/// restored and rewritten with a file.
#[tokio::test(flavor = "current_thread")]
async fn a_snapshot_is_a_file_of_its_own_checked_on_open() {
    let dir = tmp("files");
    let (mut sm, _) = opened(&dir);
    sm.apply(vec![entry(1, 1), entry(1, 2)])
        .await
        .expect("apply");
    let first = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build");
    assert_eq!(read_all(first).await, b"apply 1,apply 2");
    sm.apply(vec![entry(1, 3)]).await.expect("apply");
    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build");
    assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(3));
    let files = data_files(&dir);
    assert_eq!(files.len(), 1, "only the newest data file stays: {files:?}");
    assert!(files[0].starts_with("snapshot-3-"), "{files:?}");
    let current = sm
        .get_current_snapshot()
        .await
        .expect("current")
        .expect("some");
    assert_eq!(read_all(current).await, b"apply 1,apply 2,apply 3");
    drop(sm);

    // What a crash leaves (a data file half written, an older one) goes on open.
    std::fs::write(dir.join("snapshot-4-1.data.building"), b"half").expect("write");
    std::fs::write(dir.join("snapshot-2-1.data"), b"old").expect("write");
    let (mut sm, log) = opened(&dir);
    assert_eq!(logged(&log), ["restore apply 1,apply 2,apply 3"]);
    assert_eq!(
        data_files(&dir),
        files,
        "only the current data file is left"
    );
    let (applied, _) = sm.applied_state().await.expect("applied");
    assert_eq!(applied.map(|l| l.index), Some(3));

    // Received from a leader.
    use tokio::io::AsyncWriteExt;
    // (A stream given up for a newer one writes into a file of its own.)
    let mut dropped = sm.begin_receiving_snapshot().await.expect("begin");
    let mut f = sm.begin_receiving_snapshot().await.expect("begin again");
    dropped
        .write_all(b"stale, longer than the new one")
        .await
        .expect("write");
    dropped.shutdown().await.expect("shutdown");
    f.write_all(b"from the leader").await.expect("write");
    f.shutdown().await.expect("shutdown");
    let meta = SnapshotMeta {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 2), 9)),
        last_membership: StoredMembership::default(),
        snapshot_id: "9-1".into(),
    };
    sm.install_snapshot(&meta, f).await.expect("install");
    assert_eq!(
        logged(&log).last().map(String::as_str),
        Some("restore from the leader")
    );
    reopened_restores(sm, &dir, "from the leader");

    // A damaged data file is an error naming it.
    let path = dir.join(&data_files(&dir)[0]);
    let mut b = std::fs::read(&path).expect("read");
    b[0] ^= 1;
    std::fs::write(&path, &b).expect("write");
    let log = Arc::new(StdMutex::new(Vec::new()));
    let err = SmStore::open(&dir, 1, Box::new(Recorder(log)))
        .err()
        .expect("damaged");
    assert!(err.to_string().contains("damaged"), "{err}");
    assert!(err.to_string().contains(&data_files(&dir)[0]), "{err}");

    // A record with the data inline.
    let inline = StoredSnapshot {
        meta,
        file: None,
        data: b"inline".to_vec(),
    };
    let json = serde_json::to_vec(&inline).expect("json");
    frame::write_atomic(&dir.join("snapshot"), &json).expect("write record");
    let (sm, log) = opened(&dir);
    assert_eq!(logged(&log), ["restore inline"]);
    reopened_restores(sm, &dir, "inline");
    let _ = std::fs::remove_dir_all(&dir);
}

fn entry(leader: NodeId, index: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, leader), index),
        payload: EntryPayload::Normal(super::super::Bin(bytes::Bytes::from_static(b"x"))),
    }
}

/// Writes its snapshot only once released; says when it has started.
struct Gate {
    started: Arc<std::sync::atomic::AtomicBool>,
    release: StdMutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl StateMachine for Gate {
    fn apply(&mut self, _index: u64, _data: &[u8]) -> Vec<u8> {
        Vec::new()
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), String> {
        Ok(())
    }
    fn snapshot_to(&self, out: &mut dyn Write) -> io::Result<()> {
        self.started
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let rx = self.release.lock().ok().and_then(|mut r| r.take());
        if let Some(rx) = rx {
            let _ = rx.recv();
        }
        out.write_all(b"gate")
    }
}

/// While a snapshot is written (a whole stream, for a stream's group) the group's
/// applies wait for it without holding a runtime thread: on a one-thread runtime, the
/// task that lets the snapshot finish still runs. (Held, the thread would wait for the
/// watchdog, which lets the snapshot finish after 10 s and says so.)
#[tokio::test(flavor = "current_thread")]
async fn an_apply_waiting_for_a_snapshot_does_not_hold_the_thread() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let dir = tmp("gate");
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Arc::new(AtomicBool::new(false));
    let gate = Gate {
        started: started.clone(),
        release: StdMutex::new(Some(rx)),
    };
    let mut sm = SmStore::open(&dir, 1, Box::new(gate)).expect("open");
    sm.apply(vec![entry(1, 1)]).await.expect("apply");
    let mut builder = sm.get_snapshot_builder().await;
    let build = tokio::spawn(async move { builder.build_snapshot().await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started.load(SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the snapshot never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let fired = Arc::new(AtomicBool::new(false));
    let (watchdog, f) = (tx.clone(), fired.clone());
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(10));
        f.store(true, SeqCst);
        let _ = watchdog.send(());
    });
    let mut other = sm.clone();
    let apply = tokio::spawn(async move { other.apply(vec![entry(1, 2)]).await });
    tokio::task::yield_now().await;
    let _ = tx.send(());
    build.await.expect("build task").expect("build");
    apply.await.expect("apply task").expect("apply");
    assert!(
        !fired.load(SeqCst),
        "the thread was held while the snapshot was written"
    );
    let (applied, _) = sm.applied_state().await.expect("applied");
    assert_eq!(applied.map(|l| l.index), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What runs first when the apply and another ready task (the append's answer) are
/// both queued on one thread, the apply ahead of the answer (as tokio's slot for the
/// task woken last puts it on a node).
async fn order(me: NodeId, leader: NodeId) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!(
        "natsd-smstore-{}-{me}-{leader}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let log = Arc::new(StdMutex::new(Vec::new()));
    let mut sm = SmStore::open(&dir, me, Box::new(Recorder(log.clone()))).expect("open");
    let apply = tokio::spawn(async move { sm.apply(vec![entry(leader, 7)]).await });
    let l2 = log.clone();
    let answer = tokio::spawn(async move {
        if let Ok(mut v) = l2.lock() {
            v.push("answer".to_string());
        }
    });
    apply.await.expect("apply task").expect("apply");
    answer.await.expect("answer task");
    let _ = std::fs::remove_dir_all(&dir);
    let v = log.lock().map(|v| v.clone()).unwrap_or_default();
    v
}

#[tokio::test(flavor = "current_thread")]
async fn a_follower_answers_the_leader_before_it_applies() {
    // Entries appended by node 2, applied on node 1 (a follower): the answer goes first.
    assert_eq!(order(1, 2).await, ["answer", "apply 7"]);
    // The leader's own entries are applied at once: its proposer waits for the result.
    assert_eq!(order(1, 1).await, ["apply 7", "answer"]);
}
