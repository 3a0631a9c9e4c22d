//! Distributed message tracing as nats-server 2.11+ does it (`server/msgtrace.go`): a message
//! whose header carries `Nats-Trace-Dest: <subject>` makes every server it passes publish one
//! JSON event to that subject (in the publishing account) describing what it did with the
//! message — where it came in (`in`), every delivery or forward (`eg`), with the reason when it
//! was not delivered. `Nats-Trace-Only: true` traces without delivering to subscribers (the
//! message still travels to peers that understand tracing — route/gateway `proto` >= 3 — so
//! they report too). Forwarded copies carry `Nats-Trace-Hop: <id>` so the events can be linked
//! into a tree. docs/nats-server-behaviour.md, section "Message tracing", has the observed wire and JSON.
//!
//! Cost: a message without a header pays nothing; one with a header pays one scan for the
//! `Nats-Trace-Dest` key ([`has_trace_header`]); everything else runs only for traced
//! messages. The fan-out carries the trace of the message being delivered
//! (`Fanout::msg_trace`) and calls [`egress`]'s hooks on its slow path.
//!
//! Kinds follow nats-server's numbering so a leafnode connection can plug in with `LEAF` (4):
//! ingress through [`begin`], forwards through [`egress::remote`].

pub mod egress;
mod event;
pub mod js;

use crate::account::Account;
use crate::conn::{Conn, ConnKind};
use crate::deliver::{Fanout, Msg};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

pub use event::Event;

/// The header naming the trace destination (case-sensitive, as nats-server matches it).
pub const TRACE_DEST: &str = "Nats-Trace-Dest";
/// The value nats-server writes into [`TRACE_DEST`] to turn tracing off downstream; it is not
/// a valid subject.
pub const TRACE_DEST_DISABLED: &str = "trace disabled";
pub const TRACE_HOP: &str = "Nats-Trace-Hop";
pub const TRACE_ONLY: &str = "Nats-Trace-Only";
pub const TRACE_ORIGIN_ACCOUNT: &str = "Nats-Trace-Origin-Account";
/// Asks for a compressed event (matched case-sensitively, as nats-server's header map).
pub const ACCEPT_ENCODING: &str = "Accept-Encoding";

/// nats-server's `MsgTraceProto`: the route/gateway/leaf protocol level that means "this
/// server understands message tracing".
pub const MSG_TRACE_PROTO: i32 = 3;

/// nats-server's connection kinds as the events number them.
pub const KIND_CLIENT: u8 = 0;
pub const KIND_ROUTER: u8 = 1;
pub const KIND_GATEWAY: u8 = 2;
pub const KIND_LEAF: u8 = 4;

/// nats-server's egress error texts (byte-exact).
pub const ERR_ONLY_NO_SUPPORT: &str =
    "Not delivered because remote does not support message tracing";
pub const ERR_NO_SUPPORT: &str = "Message delivered but remote does not support message tracing so no trace event generated from there";
pub const ERR_NO_ECHO: &str = "Not delivered because of no echo";
pub const ERR_SUB_DENY: &str = "Not delivered because subscription denies this subject";
pub const ERR_CLIENT_CLOSED: &str = "Not delivered because client is closed";
pub const ERR_AUTO_SUB_EXCEEDED: &str = "Not delivered because auto-unsubscribe exceeded";
pub const ERR_SLOW: &str = "Not delivered because fast producer not stalled and consumer is slow";

/// What a server-to-server connection's peer told us that tracing needs: its server name
/// (the events' `name`) and whether it understands tracing (`proto` >= 3 in its INFO).
#[derive(Debug, Clone)]
pub struct Peer {
    pub name: String,
    pub traces: bool,
}

/// Remember a route's or gateway's peer from its first INFO (later INFOs do not change it,
/// as nats-server reads `proto` once).
pub fn set_peer(conn: &Conn, server_name: &str, proto: i32) {
    let _ = conn.trace_peer.set(Peer {
        name: server_name.to_string(),
        traces: proto >= MSG_TRACE_PROTO,
    });
}

/// The trace of one message on this server.
pub struct MsgTrace {
    /// Where the event is published (the publishing account; for a message from a route or
    /// gateway, the account it travels in).
    acc: Arc<Account>,
    dest: String,
    /// Trace without delivering to subscribers.
    pub trace_only: bool,
    /// The hop id this message arrived with (empty at the origin server).
    hop: String,
    /// How many copies this server forwarded (each gets hop `<hop>.<n>` or `<n>`).
    hops: u32,
    header: BTreeMap<String, Vec<String>>,
    msgsize: usize,
    events: Vec<Event>,
    /// A stream took the message: its `js` entry (at `js_at`) waits for the engine.
    js: Option<Arc<js::JsSlot>>,
    js_at: usize,
    /// How the event's body is encoded (the message's `Accept-Encoding`).
    encoding: Encoding,
}

/// The event's `Content-Encoding`, from the traced message's `Accept-Encoding` as
/// nats-server's `getCompressionType` reads it: `snappy` or `s2` (Snappy framing), `gzip`,
/// anything else `identity` (not compressed, but said so), none: a plain `MSG`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    None,
    Gzip,
    Snappy,
    Identity,
}

impl Encoding {
    pub fn from_accept(v: Option<&str>) -> Encoding {
        let Some(v) = v.filter(|v| !v.is_empty()) else {
            return Encoding::None;
        };
        let v = v.to_ascii_lowercase();
        if v.contains("snappy") || v.contains("s2") {
            Encoding::Snappy
        } else if v.contains("gzip") {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The event's header and body for the JSON `body`.
    pub fn encode(self, body: Vec<u8>) -> (Option<Vec<u8>>, Vec<u8>) {
        let (name, body) = match self {
            Encoding::None => return (None, body),
            Encoding::Gzip => ("gzip", gzip(&body)),
            Encoding::Snappy => ("snappy", crate::compress::stream::snappy_framed(&body)),
            Encoding::Identity => ("identity", body),
        };
        let h = format!("NATS/1.0\r\nContent-Encoding: {name}\r\n\r\n");
        (Some(h.into_bytes()), body)
    }
}

/// `data` gzipped (a single member, default level, as Go's `gzip.NewWriter`).
fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = z.write_all(data);
    z.finish().unwrap_or_default()
}

/// What the receiving side does with a message after [`begin`].
pub enum Begin {
    /// Not traced: deliver as usual.
    Plain,
    /// Do not process the message (a trace-only message whose trace could not start, or a
    /// destination the sender may not publish to).
    Skip,
    /// The destination is one the sender may not publish to (a client gets the -ERR).
    DestDenied(String),
    /// Deliver, untraced, with this header instead (tracing turned off downstream).
    Rewrite(Vec<u8>),
    /// Traced: `Fanout::msg_trace` is set; deliver, then [`finish`].
    Traced,
}

/// The cheap check every message with a header pays: does it name a trace destination?
#[inline]
pub fn has_trace_header(header: &[u8]) -> bool {
    let key = TRACE_DEST.as_bytes();
    header.len() > key.len() && memfind(header, key).is_some()
}

/// The W3C trace context header (matched in any case, as nats-server does).
pub const TRACE_PARENT: &str = "traceparent";

/// Whether a message with `header` may be traced: it names a trace destination, or (when
/// some account has a trace destination: `Fabric::external_trace`) it has a `traceparent`.
#[inline]
pub fn may_trace(fabric: &dyn crate::fabric::Fabric, header: &[u8]) -> bool {
    has_trace_header(header) || (fabric.external_trace() && has_traceparent(header))
}

/// A `traceparent` key in any case (a plain search; [`lift`] checks it is a key).
pub fn has_traceparent(header: &[u8]) -> bool {
    let key = TRACE_PARENT.as_bytes();
    header
        .windows(key.len())
        .any(|w| w.eq_ignore_ascii_case(key))
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle[0];
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        match hay[i..=hay.len() - needle.len()]
            .iter()
            .position(|&b| b == first)
        {
            None => return None,
            Some(p) => {
                let at = i + p;
                if &hay[at..at + needle.len()] == needle {
                    return Some(at);
                }
                i = at + 1;
            }
        }
    }
    None
}

/// The headers of `hdr` as nats-server lifts them when a trace header is present (values
/// trimmed, empty keys or values skipped, names' case kept), or `None` when `hdr` has no
/// usable `Nats-Trace-Dest` (absent, or `trace disabled`).
pub fn header_map(hdr: &[u8]) -> Option<BTreeMap<String, Vec<String>>> {
    lift(hdr).filter(|(_, external)| !external).map(|(m, _)| m)
}

/// A `traceparent` value whose flags say "sampled" (`00-<trace>-<parent>-01`): the flags
/// are read as nats-server does (`strconv.ParseInt(flags, 16, 8)`, so `80`..`ff` are not).
fn sampled(v: &[u8]) -> bool {
    let t: Vec<&[u8]> = v.split(|&b| b == b'-').collect();
    t.len() == 4
        && t[3].len() == 2
        && std::str::from_utf8(t[3])
            .ok()
            .and_then(|f| i8::from_str_radix(f, 16).ok())
            .is_some_and(|f| f & 1 == 1)
}

/// nats-server's `genHeaderMapIfTraceHeadersPresent`: the lifted headers (see
/// [`header_map`]) when `hdr` has a usable `Nats-Trace-Dest` or a sampled `traceparent`, and
/// whether it was only the latter (`external`: the destination is the account's).
pub fn lift(hdr: &[u8]) -> Option<(BTreeMap<String, Vec<String>>, bool)> {
    let rest = hdr.strip_prefix(b"NATS/1.0\r\n")?;
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut found = false;
    let mut parent = false;
    let mut i = 0;
    while i < rest.len() {
        let Some(colon) = rest[i..].iter().position(|&b| b == b':') else {
            break;
        };
        let key = &rest[i..i + colon];
        let mut v = i + colon + 1;
        while v < rest.len() && (rest[v] == b' ' || rest[v] == b'\t') {
            v += 1;
        }
        let Some(nl) = rest[v..].windows(2).position(|w| w == b"\r\n") else {
            break;
        };
        let mut end = v + nl;
        while end > v && (rest[end - 1] == b' ' || rest[end - 1] == b'\t') {
            end -= 1;
        }
        let val = &rest[v..end];
        if !key.is_empty() && !val.is_empty() {
            if !parent && key.eq_ignore_ascii_case(TRACE_PARENT.as_bytes()) {
                parent = sampled(val);
            } else if !found && key == TRACE_DEST.as_bytes() {
                if val == TRACE_DEST_DISABLED.as_bytes() {
                    return None;
                }
                found = true;
            }
            map.entry(String::from_utf8_lossy(key).into_owned())
                .or_default()
                .push(String::from_utf8_lossy(val).into_owned());
        }
        i = v + nl + 2;
    }
    (found || parent).then_some((map, !found))
}

/// `hdr` with every `key` line removed and `key: val` appended last (nats-server's
/// `client.setHeader`).
pub fn set_header(hdr: &[u8], key: &str, val: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(hdr.len() + key.len() + val.len() + 4);
    let body = hdr.strip_suffix(b"\r\n").unwrap_or(hdr);
    let mut lines = body.split_inclusive(|&b| b == b'\n');
    match lines.next() {
        Some(status) => out.extend_from_slice(status),
        None => out.extend_from_slice(b"NATS/1.0\r\n"),
    }
    for line in lines {
        let is_key = line.len() > key.len()
            && &line[..key.len()] == key.as_bytes()
            && line[key.len()] == b':';
        if !is_key {
            out.extend_from_slice(line);
        }
    }
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(val.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// Who received the message, for the ingress event.
pub struct From<'a> {
    pub conn: &'a Conn,
    pub kind: u8,
}

impl From<'_> {
    fn name(&self) -> String {
        match self.conn.trace_peer.get() {
            Some(p) => p.name.clone(),
            None => self.conn.meta().name.clone(),
        }
    }
}

/// Start tracing `m` (which has a header with a trace destination: [`has_trace_header`])
/// received from `from` in `acc`, as nats-server's `initMsgTrace`. `allowed` says whether the
/// sender may publish to the destination (a client's publish permissions). On
/// [`Begin::Traced`] the trace is in `fan.msg_trace`.
pub fn begin(
    fan: &mut Fanout,
    from: From<'_>,
    acc: &Arc<Account>,
    m: &Msg<'_>,
    allowed: &dyn Fn(&[u8]) -> bool,
) -> Begin {
    let Some(header) = m.header else {
        return Begin::Plain;
    };
    let Some((map, external)) = lift(header) else {
        return Begin::Plain;
    };
    let first = |k: &str| map.get(k).and_then(|v| v.first()).map(String::as_str);
    let trace_only = !external
        && first(TRACE_ONLY)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "on"));
    let skip_or_plain = if trace_only {
        Begin::Skip
    } else {
        Begin::Plain
    };
    let dest = first(TRACE_DEST).map(str::to_string);
    if !external && dest.is_none() {
        return skip_or_plain;
    }
    if let Some(v) = first(TRACE_ORIGIN_ACCOUNT) {
        tracing::error!(
            "{} - Message tracing disabled because of header {TRACE_ORIGIN_ACCOUNT:?} with value={v:?}",
            from.conn.log_prefix()
        );
        if trace_only {
            return Begin::Skip;
        }
        return Begin::Rewrite(set_header(header, TRACE_DEST, TRACE_DEST_DISABLED));
    }
    // A sampled `traceparent` alone: traced to the account's destination, if it has one,
    // sampled at the origin server (a message not picked goes on with tracing disabled).
    let dest = match dest {
        Some(d) => d,
        None => {
            let Some(cfg) = fan.fabric().account_msg_trace(&acc.name) else {
                return Begin::Plain;
            };
            if from.kind == KIND_CLIENT && !sample(fan, cfg.sampling) {
                return Begin::Rewrite(set_header(header, TRACE_DEST, TRACE_DEST_DISABLED));
            }
            cfg.dest
        }
    };
    let d = dest.as_bytes();
    if !crate::subject::is_valid_literal_subject(d) {
        tracing::error!(
            "{} - Destination {dest:?} is not valid, won't be able to trace events",
            from.conn.log_prefix()
        );
        return skip_or_plain;
    }
    let allowed = !d.starts_with(b"_GR_.") && (from.kind != KIND_CLIENT || allowed(d));
    if !allowed {
        if from.kind == KIND_CLIENT || from.kind == KIND_LEAF {
            return Begin::DestDenied(dest);
        }
        tracing::error!(
            "{} - Publish Violation - Subject {dest:?}",
            from.conn.log_prefix()
        );
        return Begin::Skip;
    }
    let hop = if from.kind == KIND_CLIENT {
        String::new()
    } else {
        first(TRACE_HOP).unwrap_or_default().to_string()
    };
    let ingress = Event::In {
        ts: SystemTime::now(),
        kind: from.kind,
        cid: from.conn.cid,
        name: from.name(),
        acc: acc.name.clone(),
        subj: String::from_utf8_lossy(m.subject).into_owned(),
        error: String::new(),
    };
    let encoding = Encoding::from_accept(first(ACCEPT_ENCODING));
    fan.msg_trace = Some(Box::new(MsgTrace {
        acc: acc.clone(),
        dest,
        trace_only,
        hop,
        hops: 0,
        header: map,
        msgsize: m.size(),
        events: vec![ingress],
        js: None,
        js_at: 0,
        encoding,
    }));
    Begin::Traced
}

/// nats-server's `sample`: `sampling` percent (1..=100) of the messages, as
/// `rand.Int31n(100) <= sampling`.
fn sample(fan: &mut Fanout, sampling: u8) -> bool {
    use rand::Rng;
    sampling >= 100 || fan.rng.random_range(0..100u8) <= sampling
}

/// [`begin`] for a message from a route or gateway (`kind`): `None` drops it; else the
/// message to deliver (its header rewritten into `buf` when tracing is turned off
/// downstream). Untraced messages return at once.
pub fn begin_remote<'a>(
    fan: &mut Fanout,
    conn: &Conn,
    kind: u8,
    acc: &Arc<Account>,
    m: Msg<'a>,
    buf: &'a mut Vec<u8>,
) -> Option<Msg<'a>> {
    if !m.header.is_some_and(|h| may_trace(&**fan.fabric(), h)) {
        return Some(m);
    }
    match begin(fan, From { conn, kind }, acc, &m, &|_| true) {
        Begin::Plain | Begin::Traced => Some(m),
        Begin::Skip | Begin::DestDenied(_) => None,
        Begin::Rewrite(h) => {
            *buf = h;
            Some(Msg {
                header: Some(buf.as_slice()),
                ..m
            })
        }
    }
}

impl MsgTrace {
    /// The account the event goes to (the one the message came in).
    pub fn account(&self) -> &Arc<Account> {
        &self.acc
    }

    /// The trace destination, in [`MsgTrace::account`].
    pub fn dest(&self) -> &str {
        &self.dest
    }

    /// A service import sent the message into `acc` as `to` (`si`).
    pub fn add_service_import(&mut self, acc: &str, from: &[u8], to: &str) {
        self.events.push(Event::Si {
            ts: SystemTime::now(),
            acc: acc.to_string(),
            from: String::from_utf8_lossy(from).into_owned(),
            to: to.to_string(),
        });
    }

    /// A stream import delivers the message into `acc` as `to` (`se`).
    pub fn add_stream_export(&mut self, acc: &str, to: &[u8]) {
        self.events.push(Event::Se {
            ts: SystemTime::now(),
            acc: acc.to_string(),
            to: String::from_utf8_lossy(to).into_owned(),
        });
    }

    /// nats-server's `setIngressError` (a publish permission violation).
    pub fn set_ingress_error(&mut self, err: String) {
        if let Some(Event::In { error, .. }) = self.events.first_mut() {
            *error = err;
        }
    }

    /// The next forward's hop id (`<hop>.<n>` or `<n>`).
    fn next_hop(&mut self) -> String {
        self.hops += 1;
        if self.hop.is_empty() {
            self.hops.to_string()
        } else {
            format!("{}.{}", self.hop, self.hops)
        }
    }

    /// The event's JSON, with `server` as the system services describe this server.
    fn to_json(&self, server: serde_json::Value) -> Vec<u8> {
        event::json(server, &self.header, self.msgsize, self.hops, &self.events)
    }
}

/// End the trace of the message just delivered: publish its event to the destination in its
/// account (nothing when the server runs without system account, as nats-server). A message
/// a stream took waits for the stream's report ([`js`]).
pub fn finish(fan: &mut Fanout) {
    let Some(t) = fan.msg_trace.take() else {
        return;
    };
    let fabric = fan.fabric().clone();
    let Some(t) = js::fan_done(t, &fabric) else {
        return;
    };
    let origin = crate::internal::origin(&*fabric);
    send(&t, &fabric, |acc, m| {
        fan.publish_in(acc, m, origin);
    });
}

/// Publish `t`'s event with `publish`.
fn send(
    t: &MsgTrace,
    fabric: &Arc<dyn crate::fabric::Fabric>,
    publish: impl FnOnce(&Arc<Account>, &Msg<'_>),
) {
    let Some(server) = fabric.trace_server_info() else {
        return;
    };
    let (header, body) = t.encoding.encode(t.to_json(server));
    let m = Msg {
        subject: t.dest.as_bytes(),
        reply: None,
        header: header.as_deref(),
        payload: &body,
    };
    publish(&t.acc, &m);
}

/// The kind number of a connection a message is forwarded to.
pub fn kind_of(conn: &Conn) -> u8 {
    match conn.kind {
        ConnKind::Route => KIND_ROUTER,
        ConnKind::Gateway => KIND_GATEWAY,
        ConnKind::Leaf => KIND_LEAF,
        ConnKind::Client | ConnKind::Internal => KIND_CLIENT,
    }
}

#[cfg(test)]
mod tests;
