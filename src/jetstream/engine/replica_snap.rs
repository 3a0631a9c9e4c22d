//! A replicated stream's copy in natsd's snapshot format (`jetstream/snapshot.rs`): the
//! group's Raft snapshot is the whole copy ([`Engine::replica_snapshot_piece`]) and replaces a
//! copy that is too far behind or restarting ([`restore_replica`]): read into a store of
//! its own without the engine ([`stage`]), then put in place ([`Engine::replica_install`]).
//!
//! A STREAM.RESTORE in a cluster (`cluster/restore.rs`) goes through the stream's log as
//! fragments: each `$NATSD.JS.RESTORE` entry is a whole small snapshot (head, messages,
//! end) added to the copy, and the `$NATSD.JS.RESTORE.END` entry carries the restored
//! stream's last sequence and its consumers. Every fragment stands alone, so a group
//! snapshot taken between two of them, or a replay after a restart, gives the same copy.

use super::*;
use crate::jetstream::snapshot::{self as snap, Decoder, Head, Item};
use crate::jetstream::store::file::FileStore;
use crate::jetstream::store::{StoreError, StoredMsg, SyncPolicy};
use crate::jetstream::JetStream;
use std::io::{self, Read};
use std::path::PathBuf;

/// The log entries that carry a restore's fragments, and its last one.
pub const RESTORE: &str = "$NATSD.JS.RESTORE";
pub const RESTORE_END: &str = "$NATSD.JS.RESTORE.END";

/// A snapshot is written and read this many bytes at a time.
pub const SNAP_PIECE: usize = 256 << 10;

/// How far [`Engine::replica_snapshot_piece`] has got.
#[derive(Default)]
pub struct SnapCursor {
    started: bool,
    /// The stream's creation time (a stream deleted and made again is another).
    created: i64,
    /// The next sequence to write, and the head's last.
    next: u64,
    last: u64,
    msgs: u64,
    consumers: u32,
}

/// Reads the next piece of `input` into `dec`: `false` at its end.
fn feed(dec: &mut Decoder, input: &mut dyn Read, piece: &mut [u8]) -> Result<bool, String> {
    loop {
        match input.read(piece) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                dec.feed(&piece[..n]);
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading the snapshot: {e}")),
        }
    }
}

/// The next record, reading more of `input` as it takes; `None` at the end of the input.
fn next_item(
    dec: &mut Decoder,
    input: &mut dyn Read,
    piece: &mut [u8],
) -> Result<Option<Item>, String> {
    loop {
        if let Some(item) = dec.next_item()? {
            return Ok(Some(item));
        }
        if !feed(dec, input, piece)? {
            return Ok(None);
        }
    }
}

/// How a restore's fragment changes a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Added to the copy, which keeps its configuration; a message must land at its own
    /// sequence.
    Add,
    /// The last fragment: its consumers and last sequence, then the copy's deduplication
    /// and mirror cursors as after a replacement.
    AddLast,
}

/// A group's snapshot read into a store of its own ([`stage`], without the engine), to be
/// put in place of the copy's store ([`Engine::replica_install`]).
pub struct Staged {
    created: i64,
    head: Head,
    store: StagedStore,
    consumers: Vec<snap::ConsumerRec>,
}

enum StagedStore {
    Mem(MemStore),
    /// Filled in `<stream dir>/msgs.restoring`, moved to `<stream dir>/msgs` at the end.
    File(FileStore, PathBuf),
}

impl StagedStore {
    fn get(&self) -> &dyn MsgStore {
        match self {
            StagedStore::Mem(m) => m,
            StagedStore::File(f, _) => f,
        }
    }
}

impl Staged {
    /// Gone, files and all (a failed or abandoned restore).
    fn discard(self) {
        if let Err(e) = self.store.get().delete() {
            tracing::warn!("JetStream: dropping a staged snapshot: {e}");
        }
    }
}

/// What [`stage`] needs to know of the copy it rebuilds.
pub struct StageAt {
    /// The copy's creation (a stream made again meanwhile is another).
    created: i64,
    /// The copy's directory (file streams).
    dir: Option<PathBuf>,
    sync: SyncPolicy,
}

/// Reads a group's snapshot into a store of its own, the engine not held: the copy goes on
/// serving (its group applies nothing meanwhile) and so does the rest of JetStream on the
/// node, however large the stream. `None` for an empty snapshot (nothing to replace).
pub fn stage(at: &StageAt, name: &str, input: &mut dyn Read) -> Result<Option<Staged>, String> {
    let mut piece = vec![0u8; SNAP_PIECE];
    let mut dec = Decoder::new();
    if !feed(&mut dec, input, &mut piece)? {
        return Ok(None);
    }
    let mut staged = None;
    let filled = fill(at, name, &mut staged, &mut dec, input, &mut piece);
    match (filled, staged) {
        (Ok(()), Some(s)) => Ok(Some(s)),
        (Ok(()), None) => Err("the snapshot has no head record".into()),
        (Err(e), s) => {
            if let Some(s) = s {
                s.discard();
            }
            Err(e)
        }
    }
}

/// Stores a snapshot's message at its own sequence (after any gap before it).
fn land(store: &dyn MsgStore, m: StoredMsg) -> Result<(), String> {
    store.skip_to(m.seq, m.ts).map_err(|e| e.to_string())?;
    let want = m.seq;
    let seq = store
        .store_owned(&m.subject, m.header, m.data, m.ts)
        .map_err(|e| e.to_string())?;
    if seq != want {
        return Err(format!("message {want} stored at sequence {seq}"));
    }
    Ok(())
}

fn fill(
    at: &StageAt,
    name: &str,
    staged: &mut Option<Staged>,
    dec: &mut Decoder,
    input: &mut dyn Read,
    piece: &mut [u8],
) -> Result<(), String> {
    let err = |e: StoreError| format!("stream {name:?}: {e}");
    while let Some(item) = next_item(dec, input, piece)? {
        match item {
            Item::Head(h) => {
                if staged.is_some() {
                    return Err("a second head record".into());
                }
                if h.stream != name {
                    return Err(format!("the snapshot is of stream {:?}", h.stream));
                }
                let limits = stream::limits_of(&h.config);
                let store = match &at.dir {
                    None => StagedStore::Mem(MemStore::new(limits)),
                    Some(dir) => {
                        let tmp = dir.join("msgs.restoring");
                        persist::remove_dir(&tmp);
                        let fs = FileStore::open(&tmp, limits, at.sync).map_err(err)?;
                        StagedStore::File(fs, dir.join("msgs"))
                    }
                };
                let s = staged.insert(Staged {
                    created: at.created,
                    head: *h,
                    store,
                    consumers: Vec::new(),
                });
                s.store
                    .get()
                    .skip_to(s.head.first_seq, s.head.last_ts)
                    .map_err(err)?;
            }
            Item::Msg(m) => {
                let s = staged.as_ref().ok_or("a message before the head record")?;
                land(s.store.get(), m).map_err(|e| format!("stream {name:?}: {e}"))?;
            }
            Item::Consumer(c) => {
                let s = staged.as_mut().ok_or("a consumer before the head record")?;
                s.consumers.push(*c);
            }
            Item::End => break,
        }
    }
    dec.finish()?;
    if let Some(s) = staged {
        let store = s.store.get();
        store
            .skip_to(s.head.last_seq + 1, s.head.last_ts)
            .map_err(err)?;
        store.sync().map_err(err)?;
    }
    Ok(())
}

/// Replaces a copy's messages, consumers and configuration with a snapshot's (a follower
/// too far behind, or a restart): read into a store of its own without the engine, then
/// put in place with the engine held for that step only. Bad bytes are an error, never a
/// panic.
pub fn restore_replica(
    js: &JetStream,
    srv: &ServerShared,
    account: &str,
    name: &str,
    input: &mut dyn Read,
) -> Result<(), String> {
    let at = js.engine().replica_stage_at(account, name)?;
    match stage(&at, name, input)? {
        Some(staged) => js.engine().replica_install(srv, account, name, staged),
        None => Ok(()),
    }
}

/// A snapshot's (or a fragment's) consumers into the copy once its messages are in: one
/// this node already runs keeps its progress (its group's, newer than the snapshot's).
fn install_consumers(
    st: &mut Stream,
    srv: &ServerShared,
    recs: Vec<snap::ConsumerRec>,
    mut kept: BTreeMap<String, Consumer>,
) {
    // Consumers run in groups of their own (`replica_consumers.rs`): a copy delivers
    // only once its group says it leads.
    let passive = st.replica.is_some();
    for c in recs {
        let mut con =
            super::consumers::revive_consumer(st, srv, c.name.clone(), c.config, c.created, None);
        con.passive = passive;
        con.origin = c.origin;
        let con = match kept.remove(&c.name).filter(|k| k.created == con.created) {
            Some(mut k) => {
                k.applied = Some(c.state);
                k
            }
            None => {
                con.restore(&c.state, st.store.as_ref());
                con.applied = Some(c.state);
                con
            }
        };
        st.consumers.insert(c.name, con);
    }
}

/// After a replacement or a restore's last fragment: deduplication from what the copy now
/// holds, and a mirror's or a source's cursors.
fn after_replace(engine: &mut Engine, account: &str, name: &str) {
    let Some(ja) = engine.accounts.get_mut(account) else {
        return;
    };
    let Some(st) = ja.streams.get_mut(name) else {
        return;
    };
    st.rebuild_dedupe(now_nanos());
    if let Ok(Some(mut f)) = crate::jetstream::mirror::parse(&st.cfg) {
        f.recover(st);
        ja.follows.insert(name.to_string(), f);
    }
}

/// The messages from the cursor on into `buf` until it holds a piece, then past the head's
/// last sequence the end record: `Ok(true)` once that is written. Only "no more messages"
/// ends the snapshot: a message that cannot be read is an error, never a shorter snapshot
/// (a member restored from one would lack the messages after it).
fn write_msgs(
    store: &dyn MsgStore,
    cur: &mut SnapCursor,
    buf: &mut Vec<u8>,
) -> Result<bool, StoreError> {
    while buf.len() < SNAP_PIECE {
        match store.load_next(None, cur.next) {
            Ok(m) if m.seq <= cur.last => {
                cur.next = m.seq + 1;
                snap::encode_msg(buf, &m);
                cur.msgs += 1;
            }
            Ok(_) | Err(StoreError::NotFound) => {
                snap::encode_end(buf, cur.msgs, cur.consumers);
                return Ok(true);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

impl Engine {
    /// The next piece of the copy's snapshot, natsd's snapshot format, into `buf`: the
    /// head and the consumers first, then messages (about [`SNAP_PIECE`] bytes a piece) up
    /// to the head's last sequence, then the end record: `Ok(true)` once that is written. A
    /// stream that is not here is an error.
    ///
    /// The caller takes the engine for one piece at a time, so a large stream's snapshot
    /// does not hold up the rest of JetStream. Meanwhile the group applies nothing (its
    /// state machine is held for the snapshot), so the copy does not change.
    pub fn replica_snapshot_piece(
        &self,
        account: &str,
        name: &str,
        cur: &mut SnapCursor,
        buf: &mut Vec<u8>,
    ) -> io::Result<bool> {
        let st = self
            .accounts
            .get(account)
            .and_then(|ja| ja.streams.get(name));
        // Never an empty snapshot for a stream that is not here: the group would take it
        // for the copy's state, and a member restored from it would lack every message.
        let Some(st) = st else {
            return Err(io::Error::other(format!(
                "stream {name:?} is not here (or went away during its snapshot)"
            )));
        };
        if cur.started && st.created != cur.created {
            return Err(io::Error::other(format!(
                "stream {name:?} was replaced during its snapshot"
            )));
        }
        let fail = |e: String| io::Error::other(format!("stream {name:?} snapshot: {e}"));
        if !cur.started {
            cur.started = true;
            cur.created = st.created;
            snap::encode_magic(buf);
            let head = st.snapshot_head();
            snap::encode_head(buf, &head).map_err(fail)?;
            (cur.next, cur.last) = (head.first_seq, head.last_seq);
            for c in st.consumers.values() {
                let rec = snap::ConsumerRec {
                    name: c.name.clone(),
                    config: c.cfg.clone(),
                    created: c.created,
                    state: c.state(),
                    origin: c.origin,
                };
                snap::encode_consumer(buf, &rec).map_err(fail)?;
                cur.consumers += 1;
            }
        }
        write_msgs(st.store.as_ref(), cur, buf).map_err(|e| {
            io::Error::other(format!(
                "stream {name:?} snapshot: reading message {}: {e}",
                cur.next
            ))
        })
    }

    /// What [`stage`] needs to rebuild the copy of `name`.
    pub fn replica_stage_at(&self, account: &str, name: &str) -> Result<StageAt, String> {
        let st = self
            .accounts
            .get(account)
            .and_then(|ja| ja.streams.get(name))
            .ok_or_else(|| format!("stream {name:?} is not here"))?;
        Ok(StageAt {
            created: st.created,
            dir: st.dir.clone(),
            sync: self.config.sync,
        })
    }

    /// Puts a staged snapshot in place of the copy's store, and its consumers and
    /// configuration in place of the copy's.
    pub fn replica_install(
        &mut self,
        srv: &ServerShared,
        account: &str,
        name: &str,
        staged: Staged,
    ) -> Result<(), String> {
        let st = self
            .accounts
            .get_mut(account)
            .and_then(|ja| ja.streams.get_mut(name))
            .filter(|st| st.created == staged.created);
        let Some(st) = st else {
            staged.discard();
            return Err(format!(
                "stream {name:?} went away (or was made again) during its restore"
            ));
        };
        let Staged {
            head,
            store,
            consumers,
            ..
        } = staged;
        let store: Box<dyn MsgStore> = match store {
            StagedStore::Mem(m) => Box::new(m),
            StagedStore::File(fs, to) => {
                if let Err(e) = st.store.delete() {
                    tracing::warn!("JetStream: stream {name:?}: dropping its old copy: {e}");
                }
                persist::remove_dir(&to);
                if let Err(e) = fs.move_to(&to) {
                    let _ = fs.delete();
                    return Err(format!("stream {name:?}: {e}"));
                }
                Box::new(fs)
            }
        };
        drop(std::mem::replace(&mut st.store, store));
        st.cfg = head.config;
        let kept = std::mem::take(&mut st.consumers);
        install_consumers(st, srv, consumers, kept);
        after_replace(self, account, name);
        Ok(())
    }

    /// A restore's fragment from the stream's log (`last`: the `RESTORE_END` one). The
    /// node that proposed it answers the chunk it came from: empty, or at the end the
    /// stream's info (a `stream_create_response`, as a single server's restore ends) or
    /// the error.
    pub fn apply_restore(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        name: &str,
        data: &[u8],
        last: bool,
        reply: Option<&str>,
    ) {
        let mode = if last { Mode::AddLast } else { Mode::Add };
        let res = self.apply_snapshot(srv, account, name, &mut &data[..], mode);
        let Some(ja) = self.accounts.get(account) else {
            return;
        };
        let cx = Cx::new(srv, &ja.acc);
        if let Err(e) = &res {
            tracing::warn!("Restore failed for stream '{} > {name}': {e}", ja.acc.name);
        }
        let Some(reply) = reply else {
            return;
        };
        match res {
            Ok(()) if !last => {
                cx.send(reply, None, None, b"");
            }
            Ok(()) => {
                let mut o = Obj::typed("stream_create_response");
                if let Some(st) = ja.streams.get(name) {
                    st.info_fields(&mut o, None);
                    tracing::info!("Completed restore for stream '{} > {name}'", ja.acc.name);
                }
                cx.send(reply, None, None, o.done().as_bytes());
            }
            Err(e) => {
                let e = ApiError::new(500, 10062, format!("restore failed: {e}"));
                let mut o = Obj::typed("stream_create_response");
                o.field("error", &e);
                cx.send(reply, None, None, o.done().as_bytes());
                crate::jetstream::cluster::restore::drop_stream(&cx, name);
            }
        }
    }

    fn apply_snapshot(
        &mut self,
        srv: &ServerShared,
        account: &str,
        name: &str,
        input: &mut dyn Read,
        mode: Mode,
    ) -> Result<(), String> {
        let st = self
            .accounts
            .get_mut(account)
            .and_then(|ja| ja.streams.get_mut(name))
            .ok_or_else(|| format!("stream {name:?} is not here"))?;
        let mut piece = vec![0u8; SNAP_PIECE];
        let mut dec = Decoder::new();
        if !feed(&mut dec, input, &mut piece)? {
            return Ok(());
        }
        let mut head: Option<Head> = None;
        let mut recs = Vec::new();
        while let Some(item) = next_item(&mut dec, input, &mut piece)? {
            match item {
                Item::Head(h) => {
                    if h.stream != name {
                        return Err("stream names do not match".into());
                    }
                    st.store
                        .skip_to(h.first_seq, h.last_ts)
                        .map_err(|e| e.to_string())?;
                    head = Some(*h);
                }
                Item::Msg(m) => land(st.store.as_ref(), m)?,
                Item::Consumer(c) => recs.push(*c),
                Item::End => break,
            }
        }
        dec.finish()?;
        if let Some(h) = head {
            st.store
                .skip_to(h.last_seq + 1, h.last_ts)
                .map_err(|e| e.to_string())?;
        }
        install_consumers(st, srv, recs, BTreeMap::new());
        if mode == Mode::AddLast {
            after_replace(self, account, name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::store::file::{FileStore, FileStoreOptions};
    use crate::jetstream::store::{StoreLimits, SyncPolicy};
    use bytes::Bytes;
    use std::path::Path;

    /// A directory of this test's own (not made yet).
    fn temp_dir(what: &str) -> std::path::PathBuf {
        let (pid, r) = (std::process::id(), rand::random::<u32>());
        std::env::temp_dir().join(format!("natsd-replica-{what}-{pid}-{r}"))
    }

    fn open(dir: &Path) -> FileStore {
        let opts = FileStoreOptions { segment_size: 4096 };
        FileStore::open_with(dir, StoreLimits::default(), SyncPolicy::default(), opts)
            .expect("open the store")
    }

    /// The whole snapshot of messages 1..=40, a piece at a time.
    fn whole(store: &dyn MsgStore) -> (Result<Vec<u8>, StoreError>, SnapCursor) {
        let mut cur = SnapCursor {
            started: true,
            next: 1,
            last: 40,
            ..SnapCursor::default()
        };
        let mut out = Vec::new();
        loop {
            let mut buf = Vec::new();
            match write_msgs(store, &mut cur, &mut buf) {
                Ok(done) => {
                    out.extend_from_slice(&buf);
                    if done {
                        return (Ok(out), cur);
                    }
                }
                Err(e) => return (Err(e), cur),
            }
        }
    }

    #[test]
    fn a_message_that_cannot_be_read_fails_the_snapshot_instead_of_ending_it() {
        let dir = temp_dir("snap");
        {
            let fs = open(&dir);
            for i in 0..40u8 {
                fs.store("s", None, &[i; 300], 1).expect("store");
            }
            fs.sync().expect("sync");
        }
        // Whole, every message is in it.
        let fs = open(&dir);
        let (all, cur) = whole(&fs);
        let all = all.expect("a whole snapshot");
        assert_eq!((cur.msgs, cur.next), (40, 41));
        assert!(all.len() > 40 * 300, "{} bytes", all.len());
        drop(fs);

        // A segment in the middle that cannot be read (gone from the disk before it was
        // opened): the snapshot fails instead of ending before it.
        let mut segs: Vec<_> = std::fs::read_dir(&dir)
            .expect("the store's dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "blk"))
            .collect();
        segs.sort();
        assert!(segs.len() > 2, "{segs:?}");
        let fs = open(&dir);
        std::fs::remove_file(&segs[1]).expect("remove a segment");
        let (res, cur) = whole(&fs);
        let Err(err) = res else {
            panic!("a snapshot missing messages ended with {} of 40", cur.msgs);
        };
        assert!(!matches!(err, StoreError::NotFound), "{err}");
        assert!(
            cur.msgs > 0 && cur.msgs < 40,
            "{} messages before it",
            cur.msgs
        );
        drop(fs);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A snapshot of stream `S`: messages 3, 4 and 6 (5 deleted), last sequence 8.
    fn snapshot_of_s() -> Vec<u8> {
        let mut b = Vec::new();
        snap::encode_magic(&mut b);
        let head = Head {
            stream: "S".into(),
            config: StreamConfig {
                name: "S".into(),
                max_msgs: -1,
                max_bytes: -1,
                max_msgs_per_subject: -1,
                ..Default::default()
            },
            created: 7,
            first_seq: 3,
            last_seq: 8,
            last_ts: 80,
            messages: 3,
        };
        snap::encode_head(&mut b, &head).expect("head");
        for seq in [3u64, 4, 6] {
            let m = StoredMsg {
                subject: format!("s.{seq}"),
                seq,
                ts: seq as i64 * 10,
                header: (seq == 4).then(|| Bytes::from_static(b"NATS/1.0\r\nA: b\r\n\r\n")),
                data: Bytes::from(vec![seq as u8; 100 * seq as usize]),
            };
            snap::encode_msg(&mut b, &m);
        }
        snap::encode_end(&mut b, 3, 0);
        b
    }

    #[test]
    fn a_snapshot_is_staged_whole_in_a_store_of_its_own_and_nothing_is_left_of_a_bad_one() {
        let dir = temp_dir("stage");
        std::fs::create_dir_all(&dir).expect("dir");
        let snapshot = snapshot_of_s();
        for file in [false, true] {
            let at = StageAt {
                created: 7,
                dir: file.then(|| dir.clone()),
                sync: SyncPolicy::default(),
            };
            let staged = stage(&at, "S", &mut &snapshot[..])
                .expect("staged")
                .expect("not empty");
            let store = staged.store.get();
            let st = store.state();
            assert_eq!(
                (st.first_seq, st.last_seq, st.msgs),
                (3, 8, 3),
                "file {file}"
            );
            let m = store.load(4).expect("message 4");
            assert_eq!(m.subject, "s.4");
            assert_eq!(m.data.len(), 400);
            assert!(m.header.is_some());
            assert!(matches!(store.load(5), Err(StoreError::NotFound)));
            // The next message takes the snapshot's next sequence.
            assert_eq!(store.store("s.9", None, b"x", 90).expect("store"), 9);
            if file {
                assert!(dir.join("msgs.restoring").is_dir());
            }
            staged.discard();
            assert!(!dir.join("msgs.restoring").exists());

            // Cut short, of another stream, or empty.
            let cut = &snapshot[..snapshot.len() - 150];
            let e = stage(&at, "S", &mut &cut[..])
                .err()
                .expect("a cut snapshot fails");
            assert!(!e.is_empty());
            assert!(!dir.join("msgs.restoring").exists(), "left after {e}");
            assert!(stage(&at, "T", &mut &snapshot[..]).is_err());
            assert!(stage(&at, "S", &mut &b""[..]).expect("empty").is_none());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
