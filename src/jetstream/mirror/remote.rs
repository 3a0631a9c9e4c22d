//! Mirrors and sources of an `external` origin — a stream in another JetStream domain (a hub
//! across a leaf link) or another account — copied through the origin's JetStream API, as
//! nats-server does it (`stream.go` `setupMirrorConsumer`, `processInboundMirrorMsg`; watched
//! on 2.15.1, docs/nats-server-behaviour.md §48):
//!
//! - the following stream asks `<api>.CONSUMER.CREATE.<origin>` for a push consumer on a
//!   fresh deliver subject (`$JS.M.<token>` for a mirror, `$JS.S.<token>` for a source, or
//!   `<deliver>.M|S.<token>` under the entry's `deliver` prefix): ack none, flow control,
//!   a 1 s idle heartbeat, a 10 s inactive threshold, starting after what it already holds;
//! - each delivery's `$JS.ACK.…` reply names the origin sequence, the delivery sequence, the
//!   timestamp and the origin's pending count (the info's `lag`);
//! - a flow-control request is answered at once; a delivery or heartbeat that shows a gap
//!   drops the consumer and asks for a new one from the next sequence it lacks (at most every
//!   2 s); an error answer or 10 s without contact does the same after a back-off of 10 s per
//!   failure in a row, at most 2 minutes, as nats-server.
//!
//! It all runs on the JetStream task: deliveries and answers arrive as
//! [`EventKind::Sync`] events and the engine's timer drives the retries.

use super::{copy, Follow, Origin};
use crate::account::{Account, Subscription};
use crate::jetstream::consumer::Cx;
use crate::jetstream::stream::Stream;
use crate::jetstream::types::{header, now_nanos, ApiError};
use crate::jetstream::{handler, subscribe, EventKind, Queue};
use crate::server::ServerShared;
use serde_json::{json, Value};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// The idle heartbeat asked of the origin (nats-server's `sourceHealthHB`).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// No contact for this long: the consumer is given up and asked for again (nats-server's
/// `sourceHealthCheckInterval`, also the consumer's inactive threshold on the origin).
const STALL: Duration = Duration::from_secs(10);
/// At most one create request per origin in this time (`sourceConsumerRetryThreshold`).
const RETRY: Duration = Duration::from_secs(2);

/// How long to wait after `fails` failed attempts in a row (nats-server's
/// `calculateRetryBackoff`: 5 s × 2 per failure, at most 2 minutes).
fn backoff(fails: u32) -> Duration {
    let most = Duration::from_secs(120);
    Duration::from_secs(10)
        .checked_mul(fails)
        .map_or(most, |d| d.clamp(RETRY, most))
}

/// An attempt failed (an error answer, no answer, silence): drop the consumer; the next
/// attempt waits longer.
fn failed(f: &mut Follow) {
    f.fails = f.fails.saturating_add(1);
    f.remote = None;
    f.retry_at = Some(Instant::now() + backoff(f.fails));
}

/// Where an external origin's JetStream API is and where its deliveries go.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct External {
    pub api: String,
    pub deliver: String,
}

impl External {
    /// A stream entry's `external` object: `None` when absent, null or without an `api`
    /// (nats-server treats that as a local origin).
    pub fn parse(o: &serde_json::Map<String, Value>) -> Option<External> {
        let e = o.get("external")?.as_object()?;
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let api = s("api");
        (!api.is_empty()).then(|| External {
            api,
            deliver: s("deliver"),
        })
    }
}

/// nats-server's checks of the external prefixes (`checkStreamCfg`): the error for the
/// first that fails.
pub fn check(ext: &External, subjects: &[String]) -> Result<(), ApiError> {
    let literal = |s: &str| crate::subject::is_valid_literal_subject(s.as_bytes());
    if !ext.deliver.is_empty() {
        if !literal(&ext.deliver) {
            return Err(ApiError::new(
                400,
                10024,
                format!(
                    "stream external delivery prefix {} must not contain wildcards",
                    ext.deliver
                ),
            ));
        }
        for s in subjects {
            let under = format!("{}.{s}", ext.deliver);
            if crate::subject::overlaps(s.as_bytes(), under.as_bytes()) {
                return Err(ApiError::new(
                    400,
                    10022,
                    format!(
                        "stream external delivery prefix {} overlaps with stream subject {s}",
                        ext.deliver
                    ),
                ));
            }
        }
    }
    if !literal(&ext.api) {
        return Err(ApiError::new(
            400,
            10052,
            format!(
                "stream external api prefix {:?} must be a valid subject without wildcards",
                ext.api
            ),
        ));
    }
    if crate::subject::overlaps(ext.api.as_bytes(), b"$JS.API") {
        return Err(ApiError::new(
            400,
            10021,
            format!(
                "stream external api prefix {} must not overlap with $JS.API",
                ext.api
            ),
        ));
    }
    Ok(())
}

/// The key an external origin's copies name it by in `Nats-Stream-Source`: its name and a
/// hash of its API prefix (nats-server's `iname`, `getHash`).
pub fn label(name: &str, ext: &External) -> String {
    format!(
        "{name}:{}",
        crate::util::ids::hash_str(ext.api.as_bytes(), 8)
    )
}

/// One live (or requested) consumer on the origin.
pub struct Remote {
    /// Where its deliveries come.
    deliver: String,
    /// Where the create answer comes.
    reply: String,
    subs: Vec<Arc<Subscription>>,
    acc: Arc<Account>,
    srv: Weak<ServerShared>,
    /// When the create request went out.
    asked: Instant,
    /// The origin answered with the consumer.
    created: bool,
    /// The delivery sequence expected next.
    dseq: u64,
    /// The last delivery, heartbeat or answer.
    contact: Instant,
    /// The origin's pending count at the last delivery (the info's `lag`).
    pub lag: u64,
    /// The origin as a source's copies name it (`Origin::label`), made once.
    label: String,
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Some(srv) = self.srv.upgrade() {
            for s in &self.subs {
                srv.unsubscribe_internal(&self.acc, s);
            }
        }
    }
}

/// What [`on_event`] did.
pub enum Outcome {
    /// Not this follow's subject.
    NotOurs,
    /// Nothing copied.
    Nothing,
    /// One message copied: the stream's consumers have work.
    Copied,
}

/// The timer's turn for one external follow of stream `stream`: ask for a consumer when
/// there is none (or the last one went quiet) and the retry threshold has passed.
pub fn tick(cx: &Cx<'_>, tx: &Queue, stream: &str, mirror: bool, f: &mut Follow) {
    let Some(ext) = f.origin.external.clone() else {
        return;
    };
    let now = Instant::now();
    if let Some(r) = &f.remote {
        let quiet = now.duration_since(if r.created { r.contact } else { r.asked });
        if quiet < STALL {
            return;
        }
        tracing::warn!(
            "JetStream: {} {stream:?}: no word from origin {:?} through {:?} for {quiet:?}; asking again",
            kind(mirror),
            f.origin.name,
            ext.api
        );
        failed(f);
    }
    if f.retry_at.is_some_and(|t| now < t) {
        return;
    }
    f.retry_at = Some(now + RETRY);
    f.remote = start(cx, tx, stream, mirror, &f.origin, &ext, f.next);
}

fn kind(mirror: bool) -> &'static str {
    if mirror {
        "mirror"
    } else {
        "source"
    }
}

/// Subscribe a deliver subject and an answer inbox, and send the create request.
fn start(
    cx: &Cx<'_>,
    tx: &Queue,
    stream: &str,
    mirror: bool,
    o: &Origin,
    ext: &External,
    next: u64,
) -> Option<Remote> {
    let token = crate::jetstream::engine::random_name();
    let tag = if mirror { "M" } else { "S" };
    let deliver = if ext.deliver.is_empty() {
        format!("$JS.{tag}.{token}")
    } else {
        format!("{}.{tag}.{token}", ext.deliver).replace("..", ".")
    };
    let reply = format!("$JSC.R.{}", crate::jetstream::engine::random_name());
    let acc_name: Arc<str> = Arc::from(cx.acc.name.as_str());
    let mut subs = Vec::with_capacity(2);
    for s in [&deliver, &reply] {
        let kind = EventKind::Sync(Arc::from(stream), Arc::from(s.as_str()));
        let h = handler(tx.clone(), acc_name.clone(), kind, None);
        subs.push(subscribe(cx.srv, cx.acc, s, None, h)?);
    }
    let mut config = json!({
        "deliver_policy": "all",
        "ack_policy": "none",
        "ack_wait": 22 * 3600 * 1_000_000_000i64,
        "max_deliver": 1,
        "replay_policy": "instant",
        "flow_control": true,
        "deliver_subject": deliver,
        "idle_heartbeat": HEARTBEAT.as_nanos() as i64,
        "inactive_threshold": STALL.as_nanos() as i64,
        "num_replicas": 0,
        "direct": true,
    });
    if next > 0 {
        config["deliver_policy"] = "by_start_sequence".into();
        config["opt_start_seq"] = next.into();
    } else if o.start_seq > 0 {
        config["deliver_policy"] = "by_start_sequence".into();
        config["opt_start_seq"] = o.start_seq.into();
    } else if let Some(t) = o.start_time {
        config["deliver_policy"] = "by_start_time".into();
        config["opt_start_time"] = crate::jetstream::types::time_str(t).into();
    }
    if let Some(fs) = &o.filter {
        config["filter_subject"] = fs.as_str().into();
    }
    let req = json!({"stream_name": o.name, "config": config});
    let subject = format!("{}.CONSUMER.CREATE.{}", ext.api, o.name).replace("..", ".");
    tracing::debug!(
        "JetStream: {} {stream:?} asks {subject:?} for a consumer from {next}",
        kind(mirror)
    );
    let sent = cx.send(&subject, Some(&reply), None, req.to_string().as_bytes());
    let now = Instant::now();
    let r = Remote {
        deliver,
        reply,
        subs,
        acc: cx.acc.clone(),
        srv: Arc::downgrade(cx.srv),
        asked: now,
        created: false,
        dseq: 1,
        contact: now,
        lag: 0,
        label: o.label(),
    };
    // Nobody took the request (the leaf link is not up yet): ask again after the retry
    // threshold rather than waiting out the answer.
    (sent > 0).then_some(r)
}

/// A message on one of `f`'s subjects: the create answer, a status (heartbeat, flow
/// control) or a delivery, which is copied into `st`. `room`: the account's room.
pub fn on_event(
    cx: &Cx<'_>,
    st: &mut Stream,
    mirror: bool,
    f: &mut Follow,
    key: &str,
    ev: &crate::jetstream::Event,
    room: Option<i64>,
) -> Outcome {
    let Some(r) = f.remote.as_mut() else {
        return Outcome::NotOurs;
    };
    let stream = st.cfg.name.clone();
    if key == r.reply {
        let v: Value = serde_json::from_slice(&ev.payload).unwrap_or(Value::Null);
        let err = match v.get("error").filter(|e| !e.is_null()) {
            Some(e) => Some(e.to_string()),
            None if v.get("config").is_none() => Some(format!(
                "not a consumer: {:?}",
                String::from_utf8_lossy(&ev.payload[..ev.payload.len().min(128)])
            )),
            None => None,
        };
        if let Some(e) = err {
            tracing::warn!(
                "JetStream error response for create {} consumer of stream {stream:?}: {e}",
                kind(mirror)
            );
            failed(f);
            return Outcome::Nothing;
        }
        f.fails = 0;
        let Some(r) = f.remote.as_mut() else {
            return Outcome::Nothing;
        };
        r.created = true;
        r.contact = Instant::now();
        return Outcome::Nothing;
    }
    if key != r.deliver {
        return Outcome::NotOurs;
    }
    r.contact = Instant::now();
    if let Some(status) = status(ev.header.as_deref()) {
        if status == 100 {
            match ev.reply.as_deref() {
                // Flow control: the origin waits for this answer.
                Some(to) if !to.is_empty() => {
                    cx.send(to, None, None, b"");
                }
                _ => {
                    let last = header(ev.header.as_deref(), "Nats-Last-Consumer")
                        .and_then(|v| v.parse::<u64>().ok());
                    if last.is_some_and(|l| l >= r.dseq) {
                        tracing::debug!(
                            "JetStream: {} {stream:?} missed deliveries; asking again",
                            kind(mirror)
                        );
                        gap(f);
                    }
                }
            }
        }
        return Outcome::Nothing;
    }
    let Some(a) = ev.reply.as_deref().and_then(ack_reply) else {
        return Outcome::Nothing;
    };
    if a.dseq < r.dseq {
        return Outcome::Nothing; // seen already
    }
    if a.dseq > r.dseq {
        gap(f);
        return Outcome::Nothing;
    }
    r.dseq += 1;
    r.lag = a.pending;
    if mirror && f.next > 0 && a.sseq < f.next {
        return Outcome::Nothing;
    }
    let m = crate::jetstream::store::StoredMsg {
        subject: ev.subject.clone(),
        seq: a.sseq,
        ts: a.ts,
        header: ev.header.clone(),
        data: ev.payload.clone(),
    };
    if !copy(st, mirror, &r.label, m, now_nanos(), room) {
        tracing::debug!("JetStream: stream {stream:?} waits: account over its limit");
        f.remote = None;
        return Outcome::Nothing;
    }
    f.next = a.sseq + 1;
    f.active = Some(Instant::now());
    Outcome::Copied
}

/// A gap in the deliveries: drop the consumer; the timer asks for one from `f.next`.
fn gap(f: &mut Follow) {
    f.remote = None;
    f.retry_at = None;
}

/// The status code of a status message (`NATS/1.0 100 Idle Heartbeat`).
fn status(hdr: Option<&[u8]>) -> Option<u16> {
    let first = hdr?.split(|b| *b == b'\r').next()?;
    let rest = first.strip_prefix(b"NATS/1.0 ")?;
    std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()
}

/// What a delivery's ack reply says.
#[derive(Debug, PartialEq)]
struct Ack {
    sseq: u64,
    dseq: u64,
    ts: i64,
    pending: u64,
}

/// `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>`, or the form
/// with `<domain>.<account hash>` before the stream and an optional token after.
fn ack_reply(reply: &str) -> Option<Ack> {
    let rest = reply.strip_prefix("$JS.ACK.")?;
    let t: Vec<&str> = rest.split('.').collect();
    let at = match t.len() {
        7 => 2,
        9 | 10 => 4,
        _ => return None,
    };
    let n = |i: usize| t.get(at + i)?.parse::<u64>().ok();
    Some(Ack {
        sseq: n(1)?,
        dseq: n(2)?,
        ts: i64::try_from(n(3)?).ok()?,
        pending: n(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_replies_of_both_forms() {
        let want = Ack {
            sseq: 7,
            dseq: 3,
            ts: 1796429291735169321,
            pending: 2,
        };
        let v1 = "$JS.ACK.O.JS_MIRROR_9OeaAlA0-wnH7mt55.1.7.3.1796429291735169321.2";
        assert_eq!(ack_reply(v1), Some(want));
        let v2 = "$JS.ACK.hub.ACCHASH.O.C.1.7.3.1796429291735169321.2.tok";
        assert_eq!(ack_reply(v2).map(|a| a.sseq), Some(7));
        assert_eq!(ack_reply("$JS.ACK.O.C.1.x.3.4.5"), None);
        assert_eq!(ack_reply("_INBOX.x"), None);
    }

    #[test]
    fn retries_back_off_as_nats_server() {
        let s = Duration::from_secs;
        assert_eq!(backoff(0), s(2));
        assert_eq!(backoff(1), s(10));
        assert_eq!(backoff(3), s(30));
        assert_eq!(backoff(12), s(120));
        assert_eq!(backoff(u32::MAX), s(120));
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            status(Some(
                b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\n\r\n"
            )),
            Some(100)
        );
        assert_eq!(status(Some(b"NATS/1.0\r\nA: b\r\n\r\n")), None);
        assert_eq!(status(None), None);
    }

    #[test]
    fn prefixes_are_checked_as_nats_server_checks_them() {
        let ext = |api: &str, deliver: &str| External {
            api: api.into(),
            deliver: deliver.into(),
        };
        assert!(check(&ext("$JS.hub.API", ""), &[]).is_ok());
        let code = |e: ApiError| e.err_code;
        assert_eq!(check(&ext("$JS.API", ""), &[]).map_err(code), Err(10021));
        assert_eq!(check(&ext("$JS.*.API", ""), &[]).map_err(code), Err(10052));
        assert_eq!(
            check(&ext("$JS.h.API", "d.*"), &[]).map_err(code),
            Err(10024)
        );
        let all = [">".to_string()];
        assert_eq!(
            check(&ext("$JS.h.API", "d"), &all).map_err(code),
            Err(10022)
        );
        assert!(check(&ext("$JS.h.API", "d"), &["o.x".to_string()]).is_ok());
    }

    #[test]
    fn the_label_hashes_the_api_prefix_as_nats_server() {
        // 2.15.1 wrote `Nats-Stream-Source: O:bTMUkJQk 1 …` for a source of O through
        // `$JS.hub.API`.
        let ext = External {
            api: "$JS.hub.API".into(),
            deliver: "dp".into(),
        };
        assert_eq!(label("O", &ext), "O:bTMUkJQk");
    }
}
