//! A replicated stream's copy in natsd's snapshot format (`jetstream/snapshot.rs`): the
//! group's Raft snapshot is the whole copy ([`Engine::replica_snapshot_piece`]) and replaces a
//! copy that is too far behind or restarting ([`Engine::replica_restore`]).
//!
//! A STREAM.RESTORE in a cluster (`cluster/restore.rs`) goes through the stream's log as
//! fragments: each `$NATSD.JS.RESTORE` entry is a whole small snapshot (head, messages,
//! end) added to the copy, and the `$NATSD.JS.RESTORE.END` entry carries the restored
//! stream's last sequence and its consumers. Every fragment stands alone, so a group
//! snapshot taken between two of them, or a replay after a restart, gives the same copy.

use super::*;
use crate::jetstream::snapshot::{self as snap, Decoder, Head, Item};
use crate::jetstream::store::StoreError;
use std::io::{self, Read};

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

/// How a snapshot's records change a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The group's snapshot: the copy is replaced, configuration included.
    Replace,
    /// A restore's fragment: added to the copy, which keeps its configuration; a message
    /// must land at its own sequence.
    Add,
    /// A restore's last fragment: its consumers and last sequence, then the copy's
    /// deduplication and mirror cursors as after a replacement.
    AddLast,
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

    /// Replaces the copy's messages with a snapshot's (a follower too far behind, or a
    /// restart). Bad bytes are an error, never a panic.
    pub fn replica_restore(
        &mut self,
        srv: &ServerShared,
        account: &str,
        name: &str,
        input: &mut dyn Read,
    ) -> Result<(), String> {
        self.apply_snapshot(srv, account, name, input, Mode::Replace)
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
        // Consumers run in groups of their own (`replica_consumers.rs`): a copy delivers
        // only once its group says it leads, and one this node already runs keeps its
        // progress (its group's, newer than the stream snapshot's).
        let passive = st.replica.is_some();
        let mut kept = BTreeMap::new();
        if mode == Mode::Replace {
            kept = std::mem::take(&mut st.consumers);
            st.store
                .purge(&Purge::default())
                .map_err(|e| format!("stream {name:?}: {e}"))?;
        }
        let mut head: Option<Head> = None;
        let mut restored = Vec::new();
        while let Some(item) = next_item(&mut dec, input, &mut piece)? {
            match item {
                Item::Head(h) => {
                    if mode == Mode::Replace {
                        st.cfg = h.config.clone();
                        st.store
                            .update_limits(stream::limits_of(&st.cfg))
                            .map_err(|e| e.to_string())?;
                    } else if h.stream != name {
                        return Err("stream names do not match".into());
                    }
                    st.store
                        .skip_to(h.first_seq, h.last_ts)
                        .map_err(|e| e.to_string())?;
                    head = Some(*h);
                }
                Item::Msg(m) => {
                    st.store.skip_to(m.seq, m.ts).map_err(|e| e.to_string())?;
                    let want = m.seq;
                    let seq = st
                        .store
                        .store_owned(&m.subject, m.header, m.data, m.ts)
                        .map_err(|e| e.to_string())?;
                    if mode != Mode::Replace && seq != want {
                        return Err(format!("message {want} stored at sequence {seq}"));
                    }
                }
                Item::Consumer(c) => {
                    let c = *c;
                    let mut con = super::consumers::revive_consumer(
                        st,
                        srv,
                        c.name.clone(),
                        c.config,
                        c.created,
                        None,
                    );
                    // Its progress once the messages are in (`restore` clamps to them).
                    con.passive = passive;
                    con.origin = c.origin;
                    st.consumers.insert(c.name.clone(), con);
                    restored.push((c.name, c.state));
                }
                Item::End => break,
            }
        }
        dec.finish()?;
        if let Some(h) = head {
            st.store
                .skip_to(h.last_seq + 1, h.last_ts)
                .map_err(|e| e.to_string())?;
        }
        for (n, state) in restored {
            let Some(c) = st.consumers.get_mut(&n) else {
                continue;
            };
            match kept.remove(&n).filter(|k| k.created == c.created) {
                Some(mut k) => {
                    k.applied = Some(state);
                    *c = k;
                }
                None => {
                    c.restore(&state, st.store.as_ref());
                    c.applied = Some(state);
                }
            }
        }
        if mode == Mode::Add {
            return Ok(());
        }
        st.rebuild_dedupe(now_nanos());
        // A mirror's or a source's cursors from what the copy now holds.
        if let Ok(Some(mut f)) = crate::jetstream::mirror::parse(&st.cfg) {
            f.recover(st);
            if let Some(ja) = self.accounts.get_mut(account) {
                ja.follows.insert(name.to_string(), f);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::store::file::{FileStore, FileStoreOptions};
    use crate::jetstream::store::{StoreLimits, SyncPolicy};
    use std::path::Path;

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
        let dir = std::env::temp_dir().join(format!(
            "natsd-replica-snap-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
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
}
