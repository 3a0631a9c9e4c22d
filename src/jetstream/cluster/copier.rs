//! Mirrors and sources of replicated streams. The origin may live on other nodes, so the
//! following stream's leader reads it as any client would — `$JS.API.STREAM.MSG.GET` with
//! `next_by_subj`, answered by the origin's leader wherever it is — and proposes what it
//! read to its own stream's log as one `$NATSD.JS.COPY` entry per batch ([`Copies`]).
//! A batch is [`BATCH`] reads sent at once, for the sequences `at .. at + BATCH`: each
//! answers the first message at or after its sequence, so together, as long as every read
//! is answered, they name every message from `at` up to the highest one found, with none
//! missing in between ([`batch_of`]). Every
//! replica applies the entry through the single-server copy (`mirror::copy`): a mirror keeps
//! the origin's sequences and timestamps, a source appends with `Nats-Stream-Source`. An
//! entry names the cursor it continues from; a copy whose cursor does not match what the
//! replicas have applied (a batch read by a leader that lost its place) is ignored, so a
//! message is never copied twice or skipped. The cursors are the applied ones, so a new
//! leader goes on where the log left off.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::entry::Entry;
use crate::account::Handler;
use crate::deliver::Msg;
use crate::jetstream::mirror::Origin;
use crate::jetstream::types::{now_nanos, parse_time};
use crate::jetstream::JetStream;
use crate::raft::Group;
use crate::server::ServerShared;

/// The subject of the log entries that carry copies.
pub const COPY: &str = "$NATSD.JS.COPY";
/// Reads sent at once per origin (one batch, one log entry).
const BATCH: usize = 64;
/// How long one read may take.
const READ_WAIT: Duration = Duration::from_secs(2);
/// The pause when no origin has anything new.
const IDLE: Duration = Duration::from_millis(250);

/// One batch of copies from one origin.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Copies {
    pub origin: String,
    /// The origin cursor (next sequence) the batch continues from (0: the start).
    pub from: u64,
    pub msgs: Vec<Copied>,
}

/// One origin message, as MSG.GET gives it (`hdrs` and `data` base64).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Copied {
    pub seq: u64,
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdrs: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    pub ts: i64,
}

impl Copied {
    /// The message to store, or why it cannot be read.
    pub fn decode(&self) -> Result<crate::jetstream::store::StoredMsg, String> {
        let b64 = |s: &Option<String>| -> Result<Option<Bytes>, String> {
            s.as_deref()
                .map(|s| {
                    data_encoding::BASE64
                        .decode(s.as_bytes())
                        .map(Bytes::from)
                        .map_err(|e| format!("copy of {}: {e}", self.seq))
                })
                .transpose()
        };
        Ok(crate::jetstream::store::StoredMsg {
            subject: self.subject.clone(),
            seq: self.seq,
            ts: self.ts,
            header: b64(&self.hdrs)?.filter(|h| !h.is_empty()),
            data: b64(&self.data)?.unwrap_or_default(),
        })
    }
}

/// What one read's answer says.
#[derive(Debug, PartialEq)]
enum Read {
    Msg(Copied),
    /// Nothing at or after that sequence (yet): 404 10037.
    NoMore,
    /// No answer, another error or garbage: nothing can be said from it.
    Unknown,
}

fn read_of(body: Option<&[u8]>) -> Read {
    let Some(v) = body.and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok()) else {
        return Read::Unknown;
    };
    if v["error"]["err_code"] == 10037 {
        return Read::NoMore;
    }
    match parse_answer(&v) {
        Some(m) => Read::Msg(m),
        None => Read::Unknown,
    }
}

/// The messages a batch of reads found, in order, with no message of the origin missing
/// between them: `reads[i]` answered the read of sequence `at + i`. Only what lies below the
/// first read without a usable answer counts (a message there may have been skipped).
fn batch_of(at: u64, reads: Vec<Read>) -> Vec<Copied> {
    let mut cut = u64::MAX;
    let mut found = std::collections::BTreeMap::new();
    for (i, r) in reads.into_iter().enumerate() {
        match r {
            Read::Msg(m) if m.seq >= at + i as u64 => {
                found.insert(m.seq, m);
            }
            Read::NoMore => {}
            Read::Msg(_) | Read::Unknown => cut = cut.min(at + i as u64),
        }
    }
    found.into_values().take_while(|m| m.seq < cut).collect()
}

/// A MSG.GET answer's message, if it has one.
fn parse_answer(v: &serde_json::Value) -> Option<Copied> {
    let m = v.get("message")?;
    Some(Copied {
        seq: m["seq"].as_u64()?,
        subject: m["subject"].as_str()?.to_string(),
        hdrs: m["hdrs"].as_str().map(str::to_string),
        data: m["data"].as_str().map(str::to_string),
        ts: m["time"].as_str().and_then(parse_time).unwrap_or(0),
    })
}

/// Where the copier of one stream reads and writes.
pub(super) struct Copier {
    pub srv: std::sync::Weak<ServerShared>,
    pub js: std::sync::Weak<JetStream>,
    pub account: String,
    pub stream: String,
    pub group: Group,
    pub session: u64,
    pub stop: CancellationToken,
}

impl Copier {
    /// The origins and their applied cursors.
    fn cursors(&self) -> Vec<(Origin, u64)> {
        let Some(js) = self.js.upgrade() else {
            return Vec::new();
        };
        let e = js.engine();
        e.accounts
            .get(&self.account)
            .and_then(|ja| ja.follows.get(&self.stream))
            .map(|fl| fl.list.iter().map(|f| (f.origin.clone(), f.next)).collect())
            .unwrap_or_default()
    }

    /// Runs until stopped (this node no longer leads the stream).
    pub async fn run(self) {
        let Some(srv) = self.srv.upgrade() else {
            return;
        };
        let Some(acc) = srv.accounts.get(&self.account) else {
            return;
        };
        let inbox = format!("_NATSD.CP.{}", crate::jetstream::engine::random_name());
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Bytes)>();
        let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
            let n = std::str::from_utf8(m.subject)
                .ok()
                .and_then(|s| s.rsplit('.').next())
                .and_then(|n| n.parse().ok());
            if let Some(n) = n {
                let _ = tx.send((n, Bytes::copy_from_slice(m.payload)));
            }
        });
        let sub = match srv.subscribe_internal(&acc, &format!("{inbox}.*"), None, h) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("JetStream: stream {:?} copier: {e}", self.stream);
                return;
            }
        };
        drop(srv);
        let mut n = 0u64;
        'run: while !self.stop.is_cancelled() {
            let mut copied = false;
            for (o, next) in self.cursors() {
                let at = if next == 0 { o.start_seq.max(1) } else { next };
                let Some(srv) = self.srv.upgrade() else {
                    break 'run;
                };
                let first = n + 1;
                let subject = format!("$JS.API.STREAM.MSG.GET.{}", o.name);
                for i in 0..BATCH as u64 {
                    n += 1;
                    let body = serde_json::json!({
                        "seq": at + i,
                        "next_by_subj": o.filter.as_deref().unwrap_or(">"),
                    })
                    .to_string();
                    let reply = format!("{inbox}.{n}");
                    srv.publish_internal(
                        &acc,
                        &Msg {
                            subject: subject.as_bytes(),
                            reply: Some(reply.as_bytes()),
                            header: None,
                            payload: body.as_bytes(),
                        },
                    );
                }
                drop(srv);
                let reads = tokio::select! {
                    r = answers(&mut rx, first, n) => r,
                    _ = self.stop.cancelled() => break 'run,
                };
                let msgs = batch_of(at, reads);
                if msgs.is_empty() {
                    continue;
                }
                copied = true;
                let copies = Copies {
                    origin: o.name.clone(),
                    from: next,
                    msgs,
                };
                let entry = Entry::Api {
                    proposer: self.session,
                    ts: now_nanos(),
                    subject: COPY.to_string(),
                    reply: String::new(),
                    payload: serde_json::to_vec(&copies).unwrap_or_default().into(),
                };
                if let Err(e) = self.group.propose(entry.encode()).await {
                    tracing::debug!("JetStream: stream {:?} copies: {e}", self.stream);
                    copied = false;
                    break;
                }
            }
            if !copied {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE) => {}
                    _ = self.stop.cancelled() => break,
                }
            }
        }
        if let Some(srv) = self.srv.upgrade() {
            srv.unsubscribe_internal(&acc, &sub);
        }
    }
}

/// The answers to reads `first..=last` that come within [`READ_WAIT`], in order (older
/// answers are dropped).
async fn answers(
    rx: &mut mpsc::UnboundedReceiver<(u64, Bytes)>,
    first: u64,
    last: u64,
) -> Vec<Read> {
    let deadline = tokio::time::Instant::now() + READ_WAIT;
    let mut got: Vec<Option<Bytes>> = vec![None; (last + 1 - first) as usize];
    let mut left = got.len();
    while left > 0 {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((k, body))) if (first..=last).contains(&k) => {
                let slot = &mut got[(k - first) as usize];
                if slot.is_none() {
                    left -= 1;
                }
                *slot = Some(body);
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    got.iter().map(|b| read_of(b.as_deref())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(seq: u64) -> Read {
        Read::Msg(Copied {
            seq,
            subject: format!("o.{seq}"),
            hdrs: None,
            data: None,
            ts: 1,
        })
    }

    fn seqs(v: &[Copied]) -> Vec<u64> {
        v.iter().map(|m| m.seq).collect()
    }

    #[test]
    fn a_msg_get_answer_becomes_a_copy_and_back() {
        let body = br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"o.a","seq":7,"hdrs":"TkFUUy8xLjANCkE6IGINCg0K","data":"aGk=","time":"2026-12-02T10:00:00.5Z"}}"#;
        let Read::Msg(c) = read_of(Some(body)) else {
            panic!("a message");
        };
        assert_eq!((c.seq, c.subject.as_str()), (7, "o.a"));
        let m = c.decode().expect("decodes");
        assert_eq!(&m.data[..], b"hi");
        assert_eq!(m.header.as_deref(), Some(&b"NATS/1.0\r\nA: b\r\n\r\n"[..]));
        assert!(m.ts > 0);
        let none = br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}"#;
        assert_eq!(read_of(Some(none)), Read::NoMore);
        let busy = br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}"#;
        assert_eq!(read_of(Some(busy)), Read::Unknown);
        assert_eq!(read_of(Some(b"garbage")), Read::Unknown);
        assert_eq!(read_of(None), Read::Unknown);
        let bad = Copied {
            data: Some("!!".into()),
            ..c
        };
        assert!(bad.decode().is_err());
    }

    /// Reads of `at..at+n` each answer the first message at or after their sequence: the
    /// batch is every message from `at` to the highest found, and a read left unanswered
    /// (or answered with an error) cuts the batch before its sequence, so a message there
    /// is never skipped.
    #[test]
    fn a_batch_of_reads_names_every_message_up_to_the_highest_found() {
        // Messages 10, 11, 14, 20 (12, 13, 15..19 deleted or filtered out).
        let first_at = |k: u64| match [10, 11, 14, 20].into_iter().find(|s| *s >= k) {
            Some(s) => msg(s),
            None => Read::NoMore,
        };
        let reads = |at: u64, n: u64| (at..at + n).map(first_at).collect::<Vec<_>>();
        assert_eq!(seqs(&batch_of(10, reads(10, 4))), [10, 11, 14]);
        assert_eq!(seqs(&batch_of(10, reads(10, 8))), [10, 11, 14, 20]);
        assert_eq!(seqs(&batch_of(12, reads(12, 2))), [14]);
        assert_eq!(seqs(&batch_of(21, reads(21, 8))), Vec::<u64>::new());
        // Read 14 unanswered: 20 (found by read 15) must wait, 14 may not be skipped.
        let mut r = reads(10, 8);
        r[4] = Read::Unknown;
        assert_eq!(seqs(&batch_of(10, r)), [10, 11]);
        // The first read unanswered: nothing.
        let mut r = reads(10, 8);
        r[0] = Read::Unknown;
        assert!(batch_of(10, r).is_empty());
        // An answer below the sequence asked for is not believed.
        let mut r = reads(10, 8);
        r[3] = msg(11);
        assert_eq!(seqs(&batch_of(10, r)), [10, 11]);
    }
}
