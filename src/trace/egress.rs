//! The fan-out's hooks for a traced message (`Fanout::msg_trace` set): one `eg` event per
//! delivery or forward, with nats-server's reason when nothing was sent, and the hop header on
//! forwarded copies. Only traced messages come here.

use super::{
    set_header, Event, MsgTrace, ERR_AUTO_SUB_EXCEEDED, ERR_CLIENT_CLOSED, ERR_NO_ECHO,
    ERR_NO_SUPPORT, ERR_ONLY_NO_SUPPORT, ERR_SLOW, ERR_SUB_DENY, TRACE_HOP,
};
use crate::account::SubRef;
use crate::conn::Conn;
use crate::deliver::{Fanout, Msg};
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

impl MsgTrace {
    fn egress(&mut self, conn: &Conn, hop: String, sub: Option<&SubRef>, error: &str) {
        self.egress_as(conn, hop, sub, None, error)
    }

    /// `shown`: the subscription subject the event names when not `sub`'s own (a stream
    /// import's delivery names the subject it matched in the exporting account). A client in
    /// another account than the ingress one is named with its account (`acc`).
    fn egress_as(
        &mut self,
        conn: &Conn,
        hop: String,
        sub: Option<&SubRef>,
        shown: Option<&[u8]>,
        error: &str,
    ) {
        let (name, acc) = match conn.trace_peer.get() {
            Some(p) => (p.name.clone(), String::new()),
            None => {
                let meta = conn.meta();
                let acc = match self.events.first() {
                    Some(Event::In { acc, .. }) if *acc != meta.account => meta.account.clone(),
                    _ => String::new(),
                };
                (meta.name.clone(), acc)
            }
        };
        let (sub, queue) = match sub {
            Some(s) => (
                String::from_utf8_lossy(shown.unwrap_or(&s.subject)).into_owned(),
                s.queue
                    .as_ref()
                    .map(|q| String::from_utf8_lossy(q).into_owned())
                    .unwrap_or_default(),
            ),
            None => (String::new(), String::new()),
        };
        self.events.push(Event::Eg {
            ts: SystemTime::now(),
            kind: super::kind_of(conn),
            cid: conn.cid,
            name,
            hop,
            acc,
            sub,
            queue,
            error: error.to_string(),
        });
    }
}

/// A local subscriber of a traced message: delivered (unless trace-only) and reported.
pub fn to_sub(fan: &mut Fanout, sub: &SubRef, m: &Msg<'_>) -> bool {
    to_sub_shown(fan, sub, m, None)
}

/// [`to_sub`], the event naming the subscription `shown` (see `MsgTrace::egress_as`).
pub fn to_sub_shown(fan: &mut Fanout, sub: &SubRef, m: &Msg<'_>, shown: Option<&[u8]>) -> bool {
    let Some(t) = fan.msg_trace.as_deref_mut() else {
        return fan.deliver_untraced(sub, m);
    };
    let max = sub.max.load(Relaxed);
    let refused = if sub.denies(m.subject) {
        Some(ERR_SUB_DENY)
    } else if sub.conn.is_closed() {
        Some(ERR_CLIENT_CLOSED)
    } else if max > 0 && sub.delivered.load(Relaxed) >= max {
        Some(ERR_AUTO_SUB_EXCEEDED)
    } else {
        None
    };
    if let Some(e) = refused {
        t.egress_as(&sub.conn, String::new(), Some(sub), shown, e);
        return false;
    }
    if t.trace_only {
        // nats-server counts it as delivered (no "no responders" for a traced request).
        t.egress_as(&sub.conn, String::new(), Some(sub), shown, "");
        return true;
    }
    let delivered = fan.deliver_untraced(sub, m);
    if let Some(t) = fan.msg_trace.as_deref_mut() {
        let e = if delivered {
            ""
        } else if sub.conn.is_closed() {
            ERR_CLIENT_CLOSED
        } else {
            ERR_SLOW
        };
        t.egress_as(&sub.conn, String::new(), Some(sub), shown, e);
    }
    delivered
}

/// The publisher's own subscription, skipped for `echo: false`.
pub fn no_echo(fan: &mut Fanout, sub: &SubRef) {
    if let Some(t) = fan.msg_trace.as_deref_mut() {
        t.egress(&sub.conn, String::new(), Some(sub), ERR_NO_ECHO);
    }
}

/// What to forward to a route or gateway peer.
pub enum Remote {
    /// Not traced: the message as it is.
    Untraced,
    /// Do not forward (trace-only, and the peer would deliver it: it does not trace).
    Skip,
    /// Forward with this header (the hop header set).
    Header(Vec<u8>),
}

/// A traced message about to be forwarded to `conn` (a route, gateway, or later a leafnode):
/// the next hop id goes into its header and into an `eg` event, as nats-server's
/// `setHopHeader` + `deliverMsg`. A peer without tracing (`proto` < 3) gets the message only
/// when it is not trace-only, and the event says no trace will come from there.
pub fn remote(fan: &mut Fanout, conn: &Conn, header: Option<&[u8]>) -> Remote {
    let Some(t) = fan.msg_trace.as_deref_mut() else {
        return Remote::Untraced;
    };
    let hop = t.next_hop();
    let traces = conn.trace_peer.get().is_some_and(|p| p.traces);
    if !traces && t.trace_only {
        t.egress(conn, hop, None, ERR_ONLY_NO_SUPPORT);
        return Remote::Skip;
    }
    let h = set_header(header.unwrap_or(b"NATS/1.0\r\n\r\n"), TRACE_HOP, &hop);
    t.egress(conn, hop, None, if traces { "" } else { ERR_NO_SUPPORT });
    Remote::Header(h)
}
