//! JetStream in the monitoring endpoints: `/jsz` (totals; `accounts`, `streams`,
//! `consumers`, `config` details; `acc` filter) and `/varz`'s `jetstream`, in nats-server
//! 2.9's shapes.

use super::engine::Engine;
use super::types::{time_str, ConsumerConfig, StreamConfig};
use super::JetStream;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Serialize, Debug, Default, Clone)]
pub struct Api {
    /// The JetStream API level (nats-server 2.11+ reports 1 and up; natsd serves 2.9's API,
    /// level 0, so clients use no later feature).
    pub level: u32,
    pub total: u64,
    pub errors: u64,
}

#[derive(Serialize, Debug, Clone)]
pub struct Config {
    pub max_memory: i64,
    pub max_storage: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub store_dir: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// How often file stores are synced (nanoseconds), as 2.10+ reports it.
    pub sync_interval: u128,
    /// 2.11+'s strict API mode (unknown fields refused); natsd ignores unknown fields.
    pub strict: bool,
}

/// 2.10+'s server-wide JetStream limits (`jetstream { limits {} }`: `max_request_batch`,
/// `max_ack_pending`, `max_ha_assets`, `max_duplicate_window`, and 2.15's
/// `default_max_consumers`, 1000 there by default). natsd has none of them, so the object is
/// empty, as nats-server writes it when none applies; tools reading a limit find none.
#[derive(Serialize, Debug, Default, Clone)]
pub struct Limits {}

#[derive(Serialize, Debug, Default, Clone)]
pub struct Stats {
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub accounts: usize,
    pub ha_assets: usize,
    pub api: Api,
}

/// `/varz` `jetstream` when enabled.
#[derive(Serialize, Debug, Clone)]
pub struct Varz {
    pub config: Config,
    pub stats: Stats,
    pub limits: Limits,
}

#[derive(Serialize, Debug)]
pub struct Seqs {
    pub consumer_seq: u64,
    pub stream_seq: u64,
}

#[derive(Serialize, Debug)]
pub struct ConsumerDetail {
    pub stream_name: String,
    pub name: String,
    pub created: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConsumerConfig>,
    pub delivered: Seqs,
    pub ack_floor: Seqs,
    pub num_ack_pending: usize,
    pub num_redelivered: usize,
    pub num_waiting: usize,
    pub num_pending: u64,
}

#[derive(Serialize, Debug)]
pub struct State {
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub first_ts: String,
    pub last_seq: u64,
    pub last_ts: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub num_subjects: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub num_deleted: u64,
    pub consumer_count: usize,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Serialize, Debug)]
pub struct StreamDetail {
    pub name: String,
    pub created: String,
    /// `{"leader"}` on one server; a replicated stream's STREAM INFO `cluster` (its group's
    /// name, leader and, on the leader, replicas).
    pub cluster: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<StreamConfig>,
    pub state: State,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consumer_detail: Vec<ConsumerDetail>,
}

#[derive(Serialize, Debug)]
pub struct AccountDetail {
    pub name: String,
    pub id: String,
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub accounts: usize,
    pub ha_assets: usize,
    pub api: Api,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stream_detail: Vec<StreamDetail>,
}

/// `/jsz` with JetStream enabled.
#[derive(Serialize, Debug)]
pub struct Jsz {
    pub server_id: String,
    pub now: String,
    pub config: Config,
    pub limits: Limits,
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub accounts: usize,
    pub ha_assets: usize,
    pub api: Api,
    pub streams: usize,
    pub consumers: usize,
    pub messages: u64,
    pub bytes: u64,
    /// The number of accounts the details page through (2.10+).
    pub total: usize,
    /// The meta group, in a JetStream cluster (`JsCluster::meta_cluster`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_cluster: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub account_details: Vec<AccountDetail>,
}

/// What `/jsz` asks for.
#[derive(Default, Debug, Clone)]
pub struct JszQuery {
    pub accounts: bool,
    pub streams: bool,
    pub consumers: bool,
    pub config: bool,
    pub account: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

impl JszQuery {
    pub fn from_params(p: &HashMap<String, String>) -> JszQuery {
        let b = |k: &str| {
            p.get(k)
                .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "t" | "T" | "TRUE" | "True"))
        };
        let n = |k: &str| p.get(k).and_then(|v| v.parse::<usize>().ok());
        let (streams, consumers) = (b("streams") || b("consumers"), b("consumers"));
        JszQuery {
            accounts: b("accounts") || streams || consumers || p.contains_key("acc"),
            streams,
            consumers,
            config: b("config"),
            account: p.get("acc").cloned().filter(|a| !a.is_empty()),
            offset: n("offset").unwrap_or(0),
            limit: n("limit").filter(|l| *l > 0).unwrap_or(1024),
        }
    }
}

fn config(js: &JetStream) -> Config {
    Config {
        max_memory: js.config.max_memory,
        max_storage: js.config.max_storage,
        store_dir: js.config.store_dir.display().to_string(),
        domain: js.config.domain.clone(),
        sync_interval: js.config.sync.interval.as_nanos(),
        strict: false,
    }
}

pub fn varz(js: &JetStream) -> Varz {
    let e = js.engine();
    let t = e.totals();
    Varz {
        config: config(js),
        stats: Stats {
            memory: t.memory,
            storage: t.storage,
            reserved_memory: t.reserved_memory,
            reserved_storage: t.reserved_storage,
            accounts: e.accounts.len(),
            api: Api {
                total: t.api_total,
                errors: t.api_errors,
                ..Default::default()
            },
            ..Default::default()
        },
        limits: Limits {},
    }
}

pub fn jsz(js: &JetStream, server_id: &str, leader: &str, q: &JszQuery) -> Jsz {
    let e: std::sync::MutexGuard<'_, Engine> = js.engine();
    let t = e.totals();
    let mut details = Vec::new();
    if q.accounts {
        for (name, ja) in &e.accounts {
            if q.account.as_ref().is_some_and(|a| a != name) {
                continue;
            }
            let (mut mem, mut file) = (0, 0);
            let mut streams = Vec::new();
            for s in ja.streams.values() {
                let st = s.store.state();
                match s.cfg.storage {
                    super::types::Storage::Memory => mem += st.bytes,
                    super::types::Storage::File => file += st.bytes,
                }
                if !q.streams {
                    continue;
                }
                let consumers = if q.consumers {
                    s.consumers
                        .values()
                        .map(|c| {
                            let (fc, fs) = c.ack_floor();
                            ConsumerDetail {
                                stream_name: s.cfg.name.clone(),
                                name: c.name.clone(),
                                created: time_str(c.created),
                                config: q.config.then(|| c.cfg.clone()),
                                delivered: Seqs {
                                    consumer_seq: c.dseq - 1,
                                    stream_seq: c.sseq.saturating_sub(1),
                                },
                                ack_floor: Seqs {
                                    consumer_seq: fc,
                                    stream_seq: fs,
                                },
                                num_ack_pending: c.pending.len(),
                                num_redelivered: c
                                    .rdc
                                    .keys()
                                    .filter(|k| c.pending.contains_key(k))
                                    .count(),
                                num_waiting: c.waiting.len(),
                                num_pending: c.num_pending(s.store.as_ref()),
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                streams.push(StreamDetail {
                    name: s.cfg.name.clone(),
                    created: time_str(s.created),
                    cluster: s
                        .replica
                        .as_ref()
                        .and_then(|r| serde_json::from_str(&r.cluster_json).ok())
                        .unwrap_or_else(|| serde_json::json!({ "leader": leader })),
                    config: q.config.then(|| s.cfg.clone()),
                    state: State {
                        messages: st.msgs,
                        bytes: st.bytes,
                        first_seq: st.first_seq,
                        first_ts: time_str(st.first_ts),
                        last_seq: st.last_seq,
                        last_ts: time_str(st.last_ts),
                        num_subjects: st.num_subjects,
                        num_deleted: st.num_deleted,
                        consumer_count: s.consumer_count(),
                    },
                    consumer_detail: consumers,
                });
            }
            // nats-server shows the flat limits here; with tiers, none.
            let (rmem, rfile) = match &ja.limits {
                super::limits::AccountLimits::Flat(l) => (
                    super::limits::as_reserved(l.max_memory),
                    super::limits::as_reserved(l.max_store),
                ),
                super::limits::AccountLimits::Tiered(_) => (0, 0),
            };
            details.push(AccountDetail {
                name: name.clone(),
                id: name.clone(),
                memory: mem,
                storage: file,
                reserved_memory: rmem,
                reserved_storage: rfile,
                accounts: 0,
                ha_assets: 0,
                api: Api {
                    total: ja.api_total,
                    errors: ja.api_errors,
                    ..Default::default()
                },
                stream_detail: streams,
            });
        }
    }
    let details = details.into_iter().skip(q.offset).take(q.limit).collect();
    Jsz {
        server_id: server_id.to_string(),
        now: crate::util::time::rfc3339_nano(std::time::SystemTime::now()),
        config: config(js),
        limits: Limits {},
        memory: t.memory,
        storage: t.storage,
        reserved_memory: t.reserved_memory,
        reserved_storage: t.reserved_storage,
        accounts: e.accounts.len(),
        ha_assets: 0,
        api: Api {
            total: t.api_total,
            errors: t.api_errors,
            ..Default::default()
        },
        streams: t.streams,
        consumers: t.consumers,
        messages: t.messages,
        bytes: t.bytes,
        total: e.accounts.len(),
        meta_cluster: e.cluster.as_ref().and_then(|c| c.meta_cluster()),
        account_details: details,
    }
}
