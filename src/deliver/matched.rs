//! Publishing a message matched on one subject and sent with another: to this server's own
//! subscribers only ([`Fanout::publish_local_to`]), or as a JetStream delivery that crosses
//! routes, leaves and gateways in nats-server's `reply@subject` form.

use super::{Fanout, Msg, Origin};
use crate::account::Account;
use crate::account::SubRef;
use crate::conn::ConnKind;
use crate::sublist::SublistResult;
use bytes::{Bytes, BytesMut};

impl Fanout {
    /// [`Fanout::publish`] to this server's own subscribers only: routes and gateways are
    /// skipped (a queue group's remote members too).
    pub fn publish_local(
        &mut self,
        acc: &Account,
        r: &SublistResult<SubRef>,
        m: &Msg<'_>,
        origin: Origin,
    ) -> u64 {
        self.local_only = true;
        let n = self.publish(acc, r, m, origin, None);
        self.local_only = false;
        n
    }

    /// [`Fanout::publish_local`] of `m` to the subscribers of `to` in `acc`, `m.subject` on
    /// the wire (as nats-server's `pa.deliver`): internal handlers (stream import shadows,
    /// service response relays) see `to` as [`Fanout::matched_subject`].
    pub fn publish_local_to(
        &mut self,
        acc: &Account,
        to: &[u8],
        m: &Msg<'_>,
        origin: Origin,
    ) -> u64 {
        self.local_only = true;
        let n = self.publish_matched(acc, to, m, origin, None);
        self.local_only = false;
        n
    }

    /// [`Fanout::publish`] of `m` to the subscribers of `to` in `acc` with `m.subject` on the
    /// wire: internal handlers see `to` as [`Fanout::matched_subject`]. A JetStream delivery
    /// that came over a route as `reply@subject` (see `subject::js_ack_deliver_split`).
    pub fn publish_matched(
        &mut self,
        acc: &Account,
        to: &[u8],
        m: &Msg<'_>,
        origin: Origin,
        listed_queues: Option<&crate::proto::parser::Queues<'_>>,
    ) -> u64 {
        let r = acc.sublist.matches(to);
        self.publish_result(acc, to, &r, m, origin, listed_queues)
    }

    /// [`Fanout::publish_matched`] with the match of `to` already made.
    fn publish_result(
        &mut self,
        acc: &Account,
        to: &[u8],
        r: &SublistResult<SubRef>,
        m: &Msg<'_>,
        origin: Origin,
        listed_queues: Option<&crate::proto::parser::Queues<'_>>,
    ) -> u64 {
        let has_internal = r
            .psubs
            .iter()
            .chain(r.qsubs.iter().flat_map(|g| g.members.iter()))
            .any(|s| s.conn.kind == ConnKind::Internal);
        let prev = if has_internal {
            self.matched.replace(to.to_vec())
        } else {
            self.matched.take()
        };
        let n = self.publish(acc, r, m, origin, listed_queues);
        self.matched = prev;
        n
    }

    /// A message from a route, a gateway or a leaf (`origin`), matched on its subject. A
    /// JetStream delivery in the `reply@subject` form (`subject::js_ack_deliver_split`) goes
    /// to this server's clients as `subject` with the plain reply, as nats-server's
    /// `processMsgResults` does for any server connection.
    pub fn publish_remote(
        &mut self,
        acc: &Account,
        m: &Msg<'_>,
        origin: Origin,
        listed_queues: Option<&crate::proto::parser::Queues<'_>>,
    ) -> u64 {
        if let Some((reply, wire)) = m.reply.and_then(crate::subject::js_ack_deliver_split) {
            let out = Msg {
                subject: wire,
                reply: Some(reply),
                ..*m
            };
            // Passed on (a gateway's or a leaf's message to the routes, a route's to the
            // leaves) as it came.
            self.route_subject = Some(Bytes::copy_from_slice(m.subject));
            self.route_reply = m.reply.map(Bytes::copy_from_slice);
            return self.publish_matched(acc, m.subject, &out, origin, listed_queues);
        }
        let r = acc.sublist.matches(m.subject);
        self.publish(acc, &r, m, origin, listed_queues)
    }

    /// A JetStream delivery (nats-server's `pa.deliver`): matched on `to` (a push
    /// consumer's deliver subject, a pull request's inbox); this server's clients get it as
    /// `m.subject` (the stream subject); routes, leaves and gateways get it as `to` with
    /// `reply@subject` as its reply, which the server at the far end splits again
    /// ([`Fanout::publish_remote`]). Without a reply the far end sees `to`, as from
    /// nats-server.
    pub fn publish_delivery(
        &mut self,
        acc: &Account,
        to: &[u8],
        m: &Msg<'_>,
        origin: Origin,
    ) -> u64 {
        let r = acc.sublist.matches(to);
        // The remote form is built only when something beyond this server may get it.
        let remote = (self.gateways && !self.local_only)
            || r.psubs
                .iter()
                .chain(r.qsubs.iter().flat_map(|g| g.members.iter()))
                .any(|s| matches!(s.conn.kind, ConnKind::Route | ConnKind::Leaf));
        if !remote {
            return self.publish_result(acc, to, &r, m, origin, None);
        }
        self.route_subject = Some(Bytes::copy_from_slice(to));
        self.route_reply = m.reply.map(|r| {
            if crate::subject::js_ack_deliver_split(r).is_some() {
                return Bytes::copy_from_slice(r);
            }
            let mut b = BytesMut::with_capacity(r.len() + 1 + m.subject.len());
            b.extend_from_slice(r);
            b.extend_from_slice(b"@");
            b.extend_from_slice(m.subject);
            b.freeze()
        });
        self.publish_result(acc, to, &r, m, origin, None)
    }
}
