//! Message storage for JetStream streams: the contract both stores (memory and file) keep.
//! A store holds one stream's messages by sequence, enforces the stream's limits on append
//! (discard old / new), answers lookups by sequence, subject filter and time, and purges.
//! It knows nothing of consumers, the API or the server; the stream owner calls it from its
//! own task (calls are synchronous and short; a file store does buffered I/O).
//!
//! Durability: `store` may buffer. Data is safe against the process being killed once
//! `flush` has returned (it is in the OS), and against power loss once `sync` has returned.
//! The stream layer flushes after a batch of appends and before it acknowledges them.

pub mod file;

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// One stored message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMsg {
    pub subject: String,
    pub seq: u64,
    /// Unix nanoseconds when it was stored.
    pub ts: i64,
    /// The NATS header block (`NATS/1.0\r\n…\r\n\r\n`), if any.
    pub header: Option<Bytes>,
    pub data: Bytes,
}

impl StoredMsg {
    /// What the message counts for against `max_bytes` (nats-server: subject + header +
    /// payload + 16 bytes of per-message overhead).
    pub fn size(&self) -> u64 {
        msg_size(&self.subject, self.header.as_deref(), &self.data)
    }
}

/// The size a message counts for against `max_bytes` in a memory store (nats-server's
/// `memStoreMsgSize`).
pub fn msg_size(subject: &str, header: Option<&[u8]>, data: &[u8]) -> u64 {
    (subject.len() + header.map_or(0, <[u8]>::len) + data.len() + 16) as u64
}

/// The size a message counts for in a file store, as nats-server's `fileStoreMsgSize`
/// (its record: length, sequence, time, subject length, subject, [header length, header],
/// data, hash), so stream and account `bytes` match nats-server's.
pub fn file_msg_size(subject: &str, header: Option<&[u8]>, data: &[u8]) -> u64 {
    let hdr = header.map_or(0, <[u8]>::len);
    let framing = if hdr == 0 { 22 + 8 } else { 22 + 4 + 8 };
    (framing + subject.len() + hdr + data.len()) as u64
}

/// What a stream's `state` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    pub msgs: u64,
    pub bytes: u64,
    /// 0 when the stream has never held a message; after removals of the first messages,
    /// the sequence after the last removed one (as nats-server: `last_seq + 1` when empty).
    pub first_seq: u64,
    /// Unix nanos of the first message (0 when empty).
    pub first_ts: i64,
    pub last_seq: u64,
    pub last_ts: i64,
    /// Sequences between first and last that were removed (interior deletes).
    pub num_deleted: u64,
    pub num_subjects: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discard {
    #[default]
    Old,
    New,
}

/// The limits a store enforces on append. Negative or zero "max" values mean unlimited,
/// as in a stream config (`-1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    pub max_msgs: i64,
    pub max_bytes: i64,
    /// Zero: no age limit. Expiry happens in `expire`, which the owner calls on a timer.
    pub max_age: Duration,
    pub max_msgs_per_subject: i64,
    pub discard: Discard,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            max_msgs: -1,
            max_bytes: -1,
            max_age: Duration::ZERO,
            max_msgs_per_subject: -1,
            discard: Discard::Old,
        }
    }
}

/// A purge request (`$JS.API.STREAM.PURGE` body): everything, or only `filter`'s subjects;
/// `seq` purges below that sequence (exclusive); `keep` keeps the newest N. `seq` and
/// `keep` are exclusive of each other (the API layer rejects both).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Purge {
    pub filter: Option<String>,
    pub seq: Option<u64>,
    pub keep: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// No message at that sequence / matching that filter.
    NotFound,
    /// The append would exceed `max_msgs` with discard new.
    MaxMsgs,
    /// The append would exceed `max_bytes` with discard new.
    MaxBytes,
    /// The store was deleted or closed.
    Closed,
    /// An I/O error, with context.
    Io(String),
    /// Stored data that fails its checks and could not be recovered, with context.
    Corrupt(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound => f.write_str("no message found"),
            StoreError::MaxMsgs => f.write_str("maximum messages exceeded"),
            StoreError::MaxBytes => f.write_str("maximum bytes exceeded"),
            StoreError::Closed => f.write_str("store closed"),
            StoreError::Io(e) => write!(f, "store I/O error: {e}"),
            StoreError::Corrupt(e) => write!(f, "store corrupt: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// One stream's message store. Subject filters may hold wildcards (`*`, `>`); `None` means
/// every subject.
pub trait MsgStore: Send + Sync {
    /// What one message counts for in `bytes` and against `max_bytes` in this store.
    fn msg_size(&self, subject: &str, header: Option<&[u8]>, data: &[u8]) -> u64 {
        msg_size(subject, header, data)
    }

    /// Append a message at `ts` (unix nanos); the new sequence is last_seq + 1. Enforces the
    /// limits: with discard old, the oldest messages (per subject for `max_msgs_per_subject`)
    /// are removed to make room; with discard new, `MaxMsgs`/`MaxBytes` and nothing stored
    /// (`max_msgs_per_subject` always discards the subject's oldest). Returns the sequence.
    fn store(
        &self,
        subject: &str,
        header: Option<&[u8]>,
        data: &[u8],
        ts: i64,
    ) -> Result<u64, StoreError>;

    /// [`MsgStore::store`] of buffers the caller hands over: a store that keeps messages in
    /// memory keeps these (exactly sized, not slices of a larger buffer) instead of copying.
    fn store_owned(
        &self,
        subject: &str,
        header: Option<Bytes>,
        data: Bytes,
        ts: i64,
    ) -> Result<u64, StoreError> {
        self.store(subject, header.as_deref(), &data, ts)
    }

    /// The message at `seq`.
    fn load(&self, seq: u64) -> Result<StoredMsg, StoreError>;

    /// The first message at or after `start` whose subject matches `filter`.
    fn load_next(&self, filter: Option<&str>, start: u64) -> Result<StoredMsg, StoreError>;

    /// The newest message whose subject matches `filter`.
    fn load_last(&self, filter: Option<&str>) -> Result<StoredMsg, StoreError>;

    /// Remove one message; `erase` also overwrites its bytes in storage. False if it was
    /// not there.
    fn remove(&self, seq: u64, erase: bool) -> Result<bool, StoreError>;

    /// Purge as `p` says; returns how many messages went. A full purge (no filter, no seq,
    /// no keep) leaves `first_seq = last_seq + 1`.
    fn purge(&self, p: &Purge) -> Result<u64, StoreError>;

    fn state(&self) -> StreamState;

    /// Message counts by subject for the subjects matching `filter`.
    fn subjects(&self, filter: Option<&str>) -> BTreeMap<String, u64>;

    /// How many messages at or after `start` match `filter`; with `last_per_subject`, count
    /// only the newest message of each subject.
    fn num_pending(&self, filter: Option<&str>, start: u64, last_per_subject: bool) -> u64;

    /// The sequence of the first message stored at or after `ts` (last_seq + 1 if none).
    fn seq_for_time(&self, ts: i64) -> u64;

    /// Apply new limits (a stream update); messages over them go now (discard semantics
    /// do not matter here: the oldest go).
    fn update_limits(&self, limits: StoreLimits) -> Result<(), StoreError>;

    /// Remove messages older than `max_age` at `now` (unix nanos); returns how many went.
    fn expire(&self, now: i64) -> u64;

    /// Hand buffered appends to the OS (safe against a killed process afterwards).
    fn flush(&self) -> Result<(), StoreError>;

    /// Flush and fsync (safe against power loss afterwards).
    fn sync(&self) -> Result<(), StoreError>;

    /// Remove everything this store keeps, files included; the store is closed after.
    fn delete(&self) -> Result<(), StoreError>;

    /// Restoring a snapshot: the next append gets sequence `next` when that is above
    /// `last_seq + 1`; the sequences skipped are deleted ones (interior gaps, or the first
    /// sequence when the store is empty) and `last_ts` becomes the last timestamp.
    /// Nothing happens when `next <= last_seq + 1`. Persistent like an append.
    fn skip_to(&self, next: u64, last_ts: i64) -> Result<(), StoreError>;
}

/// When a file store fsyncs on its own (besides explicit `sync` calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncPolicy {
    /// fsync at most this long after an append (nats-server's `sync_interval`, 2 min).
    pub interval: Duration,
    /// fsync on every flush (`sync_always`).
    pub always: bool,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy {
            interval: Duration::from_secs(120),
            always: false,
        }
    }
}

pub mod memory;
pub mod open;
