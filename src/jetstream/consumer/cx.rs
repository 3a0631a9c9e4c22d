//! `Cx`: where the JetStream engine publishes from (the server and an account), one fan-out
//! batch per engine step.

use crate::account::Account;
use crate::deliver::{Fanout, Msg};
use crate::server::ServerShared;
use std::cell::RefCell;
use std::sync::Arc;

/// Where the server publishes from: the server and the account. Everything sent through
/// one `Cx` shares one fan-out batch: writers are woken once, when it is dropped.
pub struct Cx<'a> {
    pub srv: &'a Arc<ServerShared>,
    pub acc: &'a Arc<Account>,
    fan: RefCell<Fanout>,
}

impl Drop for Cx<'_> {
    fn drop(&mut self) {
        self.fan.get_mut().finish_sync();
    }
}

impl<'a> Cx<'a> {
    pub fn new(srv: &'a Arc<ServerShared>, acc: &'a Arc<Account>) -> Cx<'a> {
        Cx {
            srv,
            acc,
            fan: RefCell::new(Fanout::new(srv.clone())),
        }
    }

    /// Publish to subscribers of `to` with `subject` on the wire (a push consumer's deliver
    /// subject or a pull request's inbox: the message keeps its stream subject). When the
    /// two differ, routes, leaves and gateways get it as `to` with `reply@subject`
    /// ([`Fanout::publish_delivery`]): a client of another node of the cluster gets it too.
    pub fn deliver(
        &self,
        to: &str,
        subject: &str,
        reply: Option<&str>,
        hdr: Option<&[u8]>,
        payload: &[u8],
    ) -> u64 {
        let m = Msg {
            subject: subject.as_bytes(),
            reply: reply.map(str::as_bytes),
            header: hdr,
            payload,
        };
        let origin = self.srv.internal_origin();
        let mut fan = self.fan.borrow_mut();
        if to == subject {
            return fan.publish_in(self.acc, &m, origin);
        }
        fan.publish_delivery(self.acc, to.as_bytes(), &m, origin)
    }

    /// An ordinary internal publish (replies, statuses).
    pub fn send(
        &self,
        subject: &str,
        reply: Option<&str>,
        hdr: Option<&[u8]>,
        payload: &[u8],
    ) -> u64 {
        self.deliver(subject, subject, reply, hdr, payload)
    }

    /// Does anyone listen on `subject` (a push consumer's deliver subject)?
    pub fn has_interest(&self, subject: &str) -> bool {
        let r = self.acc.sublist.matches(subject.as_bytes());
        !r.psubs.is_empty() || r.qsubs.iter().any(|g| !g.members.is_empty())
    }
}
