//! JetStream advisories and metrics (`$JS.EVENT.…`), published in the stream's account as
//! nats-server 2.9 publishes them: the same subjects, `type`s and fields in the same order
//! (`id` is a fresh 22-character id, `timestamp` RFC 3339 in UTC, `domain` only when one is
//! configured). Each one is built only when someone listens on its subject, so a server
//! nobody watches pays one sublist match per event.
//!
//! The `client` of an audit, snapshot or restore event carries the account and the server;
//! natsd does not pass the client's RTT to JetStream, and nats-server leaves `rtt` out when it
//! is zero, so the field is simply absent (docs/nats-server-behaviour.md).

use super::consumer::Cx;
use super::types::Obj;
use crate::util::time::rfc3339_nano;
use std::time::SystemTime;

/// Every API answer (`$JS.API.…` request and response).
const API: &str = "$JS.EVENT.ADVISORY.API";
const ADVISORY: &str = "$JS.EVENT.ADVISORY";
const V1: &str = "io.nats.jetstream.advisory.v1";

/// Stream and consumer life cycle (`action` of a stream or consumer action advisory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Create,
    Modify,
    Delete,
}

impl Action {
    fn word(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Modify => "modify",
            Action::Delete => "delete",
        }
    }
    fn subject_word(self) -> &'static str {
        match self {
            Action::Create => "CREATED",
            Action::Modify => "UPDATED",
            Action::Delete => "DELETED",
        }
    }
}

/// A 22-character base-62 id, as nats-server's NUIDs look.
fn id() -> String {
    crate::util::ids::alnum(22)
}

fn domain<'a>(cx: &Cx<'a>) -> Option<&'a str> {
    cx.srv
        .opts
        .jetstream
        .as_ref()
        .and_then(|j| j.domain.as_deref())
        .filter(|d| !d.is_empty())
}

/// Publish the event built by `fields` (after `type` — `<schema>.<kind>` —, `id` and
/// `timestamp`, before `domain`) on `subject`, if anyone listens there.
fn publish(cx: &Cx<'_>, subject: &str, schema: &str, kind: &str, fields: impl FnOnce(&mut Obj)) {
    if !cx.has_interest(subject) {
        return;
    }
    let mut o = Obj::new();
    o.field("type", &format!("{schema}.{kind}"))
        .field("id", &id())
        .field("timestamp", &rfc3339_nano(SystemTime::now()));
    fields(&mut o);
    if let Some(d) = domain(cx) {
        o.field("domain", d);
    }
    cx.send(subject, None, None, o.done().as_bytes());
}

/// The requesting client as nats-server describes it to JetStream: its account and the
/// server it is on.
fn client(cx: &Cx<'_>) -> String {
    let mut o = Obj::new();
    o.field("acc", cx.acc.name.as_str())
        .field("server", cx.srv.name.as_str());
    o.done()
}

/// `$JS.EVENT.ADVISORY.API`: an API request and the answer it got.
pub fn api_audit(cx: &Cx<'_>, subject: &str, request: &[u8], response: &str) {
    publish(cx, API, V1, "api_audit", |o| {
        o.field("server", cx.srv.name.as_str())
            .raw("client", &client(cx))
            .field("subject", subject);
        if !request.is_empty() {
            o.field("request", &String::from_utf8_lossy(request));
        }
        o.field("response", response);
    });
}

/// `$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<stream>`; the creation and the
/// deletion name the stream template that made the stream, if any.
pub fn stream_action(cx: &Cx<'_>, stream: &str, template: &str, action: Action) {
    let subject = format!("{ADVISORY}.STREAM.{}.{stream}", action.subject_word());
    publish(cx, &subject, V1, "stream_action", |o| {
        o.field("stream", stream).field("action", action.word());
        if !template.is_empty() && action != Action::Modify {
            o.field("template", template);
        }
    });
}

/// `$JS.EVENT.ADVISORY.CONSUMER.{CREATED,DELETED}.<stream>.<consumer>`.
pub fn consumer_action(cx: &Cx<'_>, stream: &str, consumer: &str, action: Action) {
    let subject = format!(
        "{ADVISORY}.CONSUMER.{}.{stream}.{consumer}",
        action.subject_word()
    );
    publish(cx, &subject, V1, "consumer_action", |o| {
        o.field("stream", stream)
            .field("consumer", consumer)
            .field("action", action.word());
    });
}

/// What a clustered leadership event says: the stream, the consumer (for a consumer's),
/// the leader's name (not for a lost quorum) and the replicas (`PeerInfo`s, JSON).
pub struct Leadership<'a> {
    pub stream: &'a str,
    pub consumer: Option<&'a str>,
    pub leader: Option<&'a str>,
    pub replicas: &'a str,
}

/// `$JS.EVENT.ADVISORY.{STREAM,CONSUMER}.{LEADER_ELECTED,QUORUM_LOST}.<stream>[.<consumer>]`,
/// as nats-server 2.15 sends them: in the stream's account without `account`, and in the
/// system account (`sys`) with it.
pub fn leadership(cx: &Cx<'_>, sys: Option<&Cx<'_>>, l: &Leadership<'_>, lost: bool) {
    let (what, kind_what) = match l.consumer {
        Some(_) => ("CONSUMER", "consumer"),
        None => ("STREAM", "stream"),
    };
    let (event, kind_event) = if lost {
        ("QUORUM_LOST", "quorum_lost")
    } else {
        ("LEADER_ELECTED", "leader_elected")
    };
    let mut subject = format!("{ADVISORY}.{what}.{event}.{}", l.stream);
    if let Some(c) = l.consumer {
        subject.push('.');
        subject.push_str(c);
    }
    let kind = format!("{kind_what}_{kind_event}");
    let body = |o: &mut Obj, account: Option<&str>| {
        if let Some(a) = account {
            o.field("account", a);
        }
        o.field("stream", l.stream);
        if let Some(c) = l.consumer {
            o.field("consumer", c);
        }
        if let Some(leader) = l.leader {
            o.field("leader", leader);
        }
        o.raw("replicas", l.replicas);
    };
    let account = cx.acc.name.to_string();
    match sys {
        Some(sys) if sys.acc.name != account => {
            publish(cx, &subject, V1, &kind, |o| body(o, None));
            publish(sys, &subject, V1, &kind, |o| body(o, Some(&account)));
        }
        _ => publish(cx, &subject, V1, &kind, |o| body(o, Some(&account))),
    }
}

/// One delivery of one message to a consumer, as the delivery advisories describe it.
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    pub stream: &'a str,
    pub consumer: &'a str,
    pub cseq: u64,
    pub sseq: u64,
    /// How many times it has been delivered.
    pub deliveries: u64,
}

impl Delivery<'_> {
    fn names(&self, o: &mut Obj) {
        o.field("stream", self.stream)
            .field("consumer", self.consumer);
    }
    fn seqs(&self, o: &mut Obj) {
        self.names(o);
        o.field("consumer_seq", &self.cseq)
            .field("stream_seq", &self.sseq);
    }
    fn subject(&self, what: &str) -> String {
        format!(
            "{ADVISORY}.CONSUMER.{what}.{}.{}",
            self.stream, self.consumer
        )
    }
}

/// `$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>`: a sampled acknowledgement,
/// `ack_time` nanoseconds after the delivery.
pub fn ack_metric(cx: &Cx<'_>, d: Delivery<'_>, ack_time: i64) {
    let subject = format!("$JS.EVENT.METRIC.CONSUMER.ACK.{}.{}", d.stream, d.consumer);
    publish(
        cx,
        &subject,
        "io.nats.jetstream.metric.v1",
        "consumer_ack",
        |o| {
            d.seqs(o);
            o.field("ack_time", &ack_time)
                .field("deliveries", &d.deliveries);
        },
    );
}

/// `…CONSUMER.MSG_NAKED.<stream>.<consumer>`.
pub fn nak(cx: &Cx<'_>, d: Delivery<'_>) {
    answered(cx, d, "MSG_NAKED", "nak");
}

/// `…CONSUMER.MSG_TERMINATED.<stream>.<consumer>`.
pub fn terminated(cx: &Cx<'_>, d: Delivery<'_>) {
    answered(cx, d, "MSG_TERMINATED", "terminated");
}

/// A delivery the client answered (`what` on the subject, `kind` in the type).
fn answered(cx: &Cx<'_>, d: Delivery<'_>, what: &str, kind: &str) {
    publish(cx, &d.subject(what), V1, kind, |o| {
        d.seqs(o);
        o.field("deliveries", &d.deliveries);
    });
}

/// `…CONSUMER.MAX_DELIVERIES.<stream>.<consumer>`: a message delivered `max_deliver` times
/// will not be sent again (no consumer sequence in this one).
pub fn max_deliveries(cx: &Cx<'_>, d: Delivery<'_>) {
    publish(cx, &d.subject("MAX_DELIVERIES"), V1, "max_deliver", |o| {
        d.names(o);
        o.field("stream_seq", &d.sseq)
            .field("deliveries", &d.deliveries);
    });
}

/// `…STREAM.SNAPSHOT_CREATE.<stream>`, with the stream's state (`state` JSON) at the start.
pub fn snapshot_create(cx: &Cx<'_>, stream: &str, state: &str) {
    let subject = format!("{ADVISORY}.STREAM.SNAPSHOT_CREATE.{stream}");
    publish(cx, &subject, V1, "snapshot_create", |o| {
        o.field("stream", stream)
            .raw("state", state)
            .raw("client", &client(cx));
    });
}

/// `…STREAM.SNAPSHOT_COMPLETE.<stream>`.
pub fn snapshot_complete(cx: &Cx<'_>, stream: &str, start: SystemTime) {
    let subject = format!("{ADVISORY}.STREAM.SNAPSHOT_COMPLETE.{stream}");
    publish(cx, &subject, V1, "snapshot_complete", |o| {
        o.field("stream", stream)
            .field("start", &rfc3339_nano(start))
            .field("end", &rfc3339_nano(SystemTime::now()))
            .raw("client", &client(cx));
    });
}

/// `…STREAM.RESTORE_CREATE.<stream>`.
pub fn restore_create(cx: &Cx<'_>, stream: &str) {
    let subject = format!("{ADVISORY}.STREAM.RESTORE_CREATE.{stream}");
    publish(cx, &subject, V1, "restore_create", |o| {
        o.field("stream", stream).raw("client", &client(cx));
    });
}

/// `…STREAM.RESTORE_COMPLETE.<stream>`: `bytes` received since `start`.
pub fn restore_complete(cx: &Cx<'_>, stream: &str, start: SystemTime, bytes: u64) {
    let subject = format!("{ADVISORY}.STREAM.RESTORE_COMPLETE.{stream}");
    publish(cx, &subject, V1, "restore_complete", |o| {
        o.field("stream", stream)
            .field("start", &rfc3339_nano(start))
            .field("end", &rfc3339_nano(SystemTime::now()))
            .field("bytes", &bytes)
            .raw("client", &client(cx));
    });
}

/// A consumer's `sample_freq` as a percentage (`"50"` or `"50%"`; empty: 0), or the reason
/// nats-server 2.9.10 gives for refusing it (Go's `strconv.Atoi` error; `<nil>` when
/// negative).
pub fn sample_frequency(sample_freq: &str) -> Result<i64, String> {
    if sample_freq.is_empty() {
        return Ok(0);
    }
    let s = sample_freq.strip_suffix('%').unwrap_or(sample_freq);
    match s.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n),
        Ok(_) => Err("<nil>".into()),
        Err(e) => {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            Err(format!("strconv.Atoi: parsing {s:?}: {why}"))
        }
    }
}

/// Whether to publish an acknowledgement metric: about `sample_freq` percent of them, every
/// one at 100 or more, none when unset.
pub fn sampled(sample_freq: &str) -> bool {
    match sample_frequency(sample_freq) {
        Ok(f) if f >= 100 => true,
        Ok(f) if f > 0 => {
            use rand::Rng;
            rand::rng().random_range(0..100) <= f
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_like_nuids() {
        let (a, b) = (id(), id());
        assert_eq!(a.len(), 22);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b);
    }

    #[test]
    fn sample_frequency_errors_read_as_nats_servers() {
        assert_eq!(sample_frequency("50%"), Ok(50));
        assert_eq!(sample_frequency("1000"), Ok(1000));
        assert_eq!(sample_frequency(""), Ok(0));
        assert_eq!(
            sample_frequency("abc").unwrap_err(),
            "strconv.Atoi: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            sample_frequency("5%%").unwrap_err(),
            "strconv.Atoi: parsing \"5%\": invalid syntax"
        );
        assert_eq!(sample_frequency("-3").unwrap_err(), "<nil>");
        assert!(sample_frequency("99999999999999999999")
            .unwrap_err()
            .ends_with("value out of range"));
    }

    #[test]
    fn sampling() {
        assert!(!sampled(""));
        assert!(!sampled("0"));
        assert!(!sampled("-5%"));
        assert!(!sampled("often"));
        assert!(sampled("100%"));
        assert!(sampled("100"));
        assert!(sampled("250"));
        let hits = (0..2000).filter(|_| sampled("50%")).count();
        assert!((600..1400).contains(&hits), "{hits} of 2000 at 50%");
    }
}
