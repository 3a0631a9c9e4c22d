//! What monitoring shows of leafnodes: `/leafz` entries (nats-server 2.15's fields, with
//! `subscriptions_list` for `subs=1`) and the `/varz` `leaf` section.

use super::Leafnodes;
use crate::conn::ConnKind;
use crate::util::time::go_duration;
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;

/// One leaf connection in `/leafz`.
#[derive(Serialize, Debug)]
pub struct LeafInfo {
    pub id: u64,
    pub name: String,
    pub is_spoke: bool,
    pub account: String,
    pub ip: String,
    pub port: u16,
    pub rtt: String,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    /// The peer's interest in the bound account (what it sent us).
    pub subscriptions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriptions_list: Option<Vec<String>>,
    pub compression: String,
}

impl Leafnodes {
    /// The `/leafz` entries, the peer's subjects listed when `subs`, of account `acc` only
    /// when given.
    pub fn leafz(&self, subs: bool, acc: Option<&str>) -> Vec<LeafInfo> {
        let mut out = Vec::new();
        for l in self.links() {
            if acc.is_some_and(|a| a != &*l.acc.name) {
                continue;
            }
            let c = &l.conn;
            let mut list = Vec::new();
            l.acc.sublist.for_each(|subject, queue, e| {
                if e.conn.kind == ConnKind::Leaf && e.conn.cid == c.cid {
                    let s = String::from_utf8_lossy(subject);
                    list.push(match queue {
                        Some(q) => format!("{s} {}", String::from_utf8_lossy(q)),
                        None => s.into_owned(),
                    });
                }
            });
            out.push(LeafInfo {
                id: c.cid,
                name: l.remote_name.clone(),
                is_spoke: l.spoke,
                account: l.acc.name.to_string(),
                ip: c.addr.ip().to_string(),
                port: c.addr.port(),
                rtt: go_duration(c.meta().rtt.unwrap_or_default()),
                in_msgs: c.counters.in_msgs.load(Relaxed),
                out_msgs: c.counters.out_msgs.load(Relaxed),
                in_bytes: c.counters.in_bytes.load(Relaxed),
                out_bytes: c.counters.out_bytes.load(Relaxed),
                subscriptions: list.len(),
                subscriptions_list: subs.then_some(list),
                compression: l
                    .compression
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_str()
                    .to_string(),
            });
        }
        out.sort_by_key(|i| i.id);
        out
    }

    /// The `/varz` `leaf` section (`{}` without a leafnode listener, as nats-server).
    pub fn varz(&self) -> serde_json::Value {
        let Some(a) = self.listen_addr.get() else {
            return serde_json::json!({});
        };
        let mut v = serde_json::json!({
            "host": self.opts.host,
            "port": a.port(),
            "auth_timeout": go_float(self.opts.auth_timeout.as_secs_f64()),
            "tls_timeout": go_float(self.opts.tls.as_ref().map_or(2.0, |t| t.timeout.as_secs_f64())),
        });
        // nats-server leaves both out when false.
        if let Some(t) = &self.opts.tls {
            v["tls_required"] = true.into();
            if t.verify {
                v["tls_verify"] = true.into();
            }
        }
        v
    }
}

/// Seconds as Go's JSON writes a float64: `2`, not `2.0`.
fn go_float(x: f64) -> serde_json::Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        serde_json::Value::from(x as i64)
    } else {
        serde_json::Value::from(x)
    }
}
