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
    let rest = hdr.strip_prefix(b"NATS/1.0\r\n")?;
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut found = false;
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
            if !found && key == TRACE_DEST.as_bytes() {
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
    found.then_some(map)
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
    let Some(map) = header_map(header) else {
        return Begin::Plain;
    };
    let first = |k: &str| map.get(k).and_then(|v| v.first()).map(String::as_str);
    let trace_only = first(TRACE_ONLY)
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "on"));
    let skip_or_plain = if trace_only {
        Begin::Skip
    } else {
        Begin::Plain
    };
    let Some(dest) = first(TRACE_DEST).map(str::to_string) else {
        return skip_or_plain;
    };
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
    fan.msg_trace = Some(Box::new(MsgTrace {
        acc: acc.clone(),
        dest,
        trace_only,
        hop,
        hops: 0,
        header: map,
        msgsize: m.size(),
        events: vec![ingress],
    }));
    Begin::Traced
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
    if !m.header.is_some_and(has_trace_header) {
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
/// account (nothing when the server runs without system account, as nats-server).
pub fn finish(fan: &mut Fanout) {
    let Some(t) = fan.msg_trace.take() else {
        return;
    };
    let fabric = fan.fabric().clone();
    let Some(server) = fabric.trace_server_info() else {
        return;
    };
    let body = t.to_json(server);
    let m = Msg {
        subject: t.dest.as_bytes(),
        reply: None,
        header: None,
        payload: &body,
    };
    fan.publish_in(&t.acc, &m, crate::internal::origin(&*fabric));
}

/// The kind number of a connection a message is forwarded to.
pub fn kind_of(conn: &Conn) -> u8 {
    match conn.kind {
        ConnKind::Route => KIND_ROUTER,
        ConnKind::Gateway => KIND_GATEWAY,
        ConnKind::Client | ConnKind::Internal => KIND_CLIENT,
    }
}

#[cfg(test)]
mod tests;
