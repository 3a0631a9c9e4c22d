//! Mirrors and sources of replicated streams. The origin may live on other nodes, so the
//! following stream's leader reads it as any client would — `$JS.API.STREAM.MSG.GET` with
//! `next_by_subj`, answered by the origin's leader wherever it is — and proposes what it
//! read to its own stream's log as one `$NATSD.JS.COPY` entry per batch ([`Copies`]). Every
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
/// Messages read per origin before they are proposed.
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

/// A MSG.GET answer: the message, or `None` (nothing at or after that sequence yet, no such
/// stream, another error).
fn parse_answer(body: &[u8]) -> Option<Copied> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
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
                let mut at = if next == 0 { o.start_seq.max(1) } else { next };
                let mut msgs = Vec::new();
                while msgs.len() < BATCH {
                    n += 1;
                    let Some(srv) = self.srv.upgrade() else {
                        break 'run;
                    };
                    let body = serde_json::json!({
                        "seq": at,
                        "next_by_subj": o.filter.as_deref().unwrap_or(">"),
                    })
                    .to_string();
                    let subject = format!("$JS.API.STREAM.MSG.GET.{}", o.name);
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
                    drop(srv);
                    let answer = tokio::select! {
                        a = answer(&mut rx, n) => a,
                        _ = self.stop.cancelled() => break 'run,
                    };
                    match answer.as_deref().and_then(parse_answer) {
                        Some(m) => {
                            at = m.seq + 1;
                            msgs.push(m);
                        }
                        None => break,
                    }
                }
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

/// The answer to read `n`, if it comes within [`READ_WAIT`] (older answers are dropped).
async fn answer(rx: &mut mpsc::UnboundedReceiver<(u64, Bytes)>, n: u64) -> Option<Bytes> {
    let deadline = tokio::time::Instant::now() + READ_WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((k, body))) if k == n => return Some(body),
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_msg_get_answer_becomes_a_copy_and_back() {
        let body = br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"o.a","seq":7,"hdrs":"TkFUUy8xLjANCkE6IGINCg0K","data":"aGk=","time":"2026-12-02T10:00:00.5Z"}}"#;
        let c = parse_answer(body).expect("a message");
        assert_eq!((c.seq, c.subject.as_str()), (7, "o.a"));
        let m = c.decode().expect("decodes");
        assert_eq!(&m.data[..], b"hi");
        assert_eq!(m.header.as_deref(), Some(&b"NATS/1.0\r\nA: b\r\n\r\n"[..]));
        assert!(m.ts > 0);
        let none = br#"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}"#;
        assert_eq!(parse_answer(none), None);
        assert_eq!(parse_answer(b"garbage"), None);
        let bad = Copied {
            data: Some("!!".into()),
            ..c
        };
        assert!(bad.decode().is_err());
    }
}
