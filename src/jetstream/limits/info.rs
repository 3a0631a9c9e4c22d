//! The account info (`$JS.API.INFO`) of an account's limits and usage, flat or by tier.

use super::{tier_replicas, AccountLimits, Limits};
use crate::jetstream::engine::{Globals, JsAccount};
use crate::jetstream::stream::Stream;
use crate::jetstream::types::*;
use std::collections::BTreeMap;

/// A stream of the account that the meta leader holds no copy of: counted in its
/// `$JS.API.INFO` with its reservation, not its bytes or consumers (natsd's nodes do not
/// report their usage to each other as nats-server's do).
#[derive(Clone, Copy, Debug)]
pub struct Assigned {
    pub storage: Storage,
    pub max_bytes: i64,
    pub replicas: i64,
}

/// What an account (or one tier of it) holds, for `$JS.API.INFO`.
#[derive(Default)]
struct Usage {
    memory: u64,
    storage: u64,
    reserved_memory: i64,
    reserved_storage: i64,
    streams: usize,
    consumers: usize,
}

impl Usage {
    fn add(&mut self, s: &Stream) {
        // Every replica's bytes, as nats-server sums what its replicas report.
        let b = s.store.state().bytes * s.cfg.num_replicas.max(1).unsigned_abs();
        let mb = s.cfg.max_bytes.max(0);
        match s.cfg.storage {
            Storage::Memory => {
                self.memory += b;
                self.reserved_memory = self.reserved_memory.saturating_add(mb);
            }
            Storage::File => {
                self.storage += b;
                self.reserved_storage = self.reserved_storage.saturating_add(mb);
            }
        }
        self.streams += 1;
        self.consumers += s.consumer_count();
    }

    fn add_assigned(&mut self, a: &Assigned) {
        let mb = a.max_bytes.max(0);
        match a.storage {
            Storage::Memory => self.reserved_memory = self.reserved_memory.saturating_add(mb),
            Storage::File => self.reserved_storage = self.reserved_storage.saturating_add(mb),
        }
        self.streams += 1;
    }

    fn fields(&self, o: &mut Obj, limits: &Limits) {
        o.field("memory", &self.memory)
            .field("storage", &self.storage)
            .field("reserved_memory", &self.reserved_memory)
            .field("reserved_storage", &self.reserved_storage)
            .field("streams", &self.streams)
            .field("consumers", &self.consumers)
            .raw("limits", &limits_json(limits));
    }
}

fn limits_json(l: &Limits) -> String {
    let mut limits = Obj::new();
    limits
        .field("max_memory", &l.max_memory)
        .field("max_storage", &l.max_store)
        .field("max_streams", &l.max_streams)
        .field("max_consumers", &l.max_consumers)
        .field("max_ack_pending", &l.max_ack_pending)
        .field("memory_max_stream_bytes", &l.memory_max_stream_bytes)
        .field("storage_max_stream_bytes", &l.store_max_stream_bytes)
        .field("max_bytes_required", &l.max_bytes_required);
    limits.done()
}

/// Go's zero value of the limits: what the account-wide `limits` show with tiers.
const NO_LIMITS: Limits = Limits {
    max_memory: 0,
    max_store: 0,
    max_streams: 0,
    max_consumers: 0,
    max_ack_pending: 0,
    memory_max_stream_bytes: 0,
    store_max_stream_bytes: 0,
    max_bytes_required: false,
};

impl JsAccount {
    /// `$JS.API.INFO`: usage, the limits (-1 unlimited), the API counters; with tiered
    /// limits, `tiers` by name with each tier's usage and limits (a tier with limits and
    /// nothing in it too), and zero account-wide limits, as nats-server.
    pub(crate) fn account_info(&self, g: &Globals<'_>) -> String {
        let mut all = Usage::default();
        let mut by_tier: BTreeMap<i64, Usage> = BTreeMap::new();
        for s in self.streams.values() {
            all.add(s);
            by_tier.entry(s.cfg.num_replicas.max(1)).or_default().add(s);
        }
        for a in g.elsewhere {
            all.add_assigned(a);
            let tier = by_tier.entry(a.replicas.max(1)).or_default();
            tier.add_assigned(a);
        }
        let mut o = Obj::typed("account_info_response");
        let tiers = match &self.limits {
            AccountLimits::Flat(l) => {
                all.fields(&mut o, l);
                None
            }
            AccountLimits::Tiered(t) => {
                all.fields(&mut o, &NO_LIMITS);
                let mut tiers = Obj::new();
                for (name, l) in t {
                    let u = tier_replicas(name).and_then(|r| by_tier.remove(&r));
                    let mut one = Obj::new();
                    u.unwrap_or_default().fields(&mut one, l);
                    tiers.raw(name, &one.done());
                }
                // Assets of a tier without limits (left from an earlier JWT) still show.
                for (r, u) in by_tier {
                    let mut one = Obj::new();
                    u.fields(&mut one, &NO_LIMITS);
                    tiers.raw(&format!("R{r}"), &one.done());
                }
                Some(tiers.done())
            }
        };
        if let Some(d) = &g.config.domain {
            o.field("domain", d);
        }
        let mut api = Obj::new();
        api.field("total", &self.api_total)
            .field("errors", &self.api_errors);
        o.raw("api", &api.done());
        if let Some(t) = tiers {
            o.raw("tiers", &t);
        }
        o.done()
    }
}
