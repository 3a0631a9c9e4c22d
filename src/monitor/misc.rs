//! `/leafz` (the leaf connections, see `leaf::monitor`), `/gatewayz` (gateways, or the no-gateway shape), `/jsz`
//! (JetStream disabled), written exactly as nats-server 2.9 writes them, with its parameter
//! checks (a bad boolean or integer is a 400).

use super::connz::ConnInfo;
use super::subsz::{decode_bool, decode_int};
use crate::server::ServerShared;
use crate::util::time::rfc3339_nano;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

fn now() -> String {
    rfc3339_nano(SystemTime::now())
}

#[derive(Serialize, Debug)]
pub struct Leafz {
    pub server_id: String,
    pub now: String,
    pub leafnodes: usize,
    /// nats-server writes `null` here when there are none.
    pub leafs: Option<Vec<crate::leaf::monitor::LeafInfo>>,
}

/// `subs` (boolean), `acc`.
pub fn leafz(srv: &ServerShared, p: &HashMap<String, String>) -> Result<Leafz, String> {
    let subs = decode_bool(p, "subs")?;
    let leafs = srv.leafnodes.as_ref().map_or_else(Vec::new, |l| {
        l.leafz(subs, p.get("acc").map(String::as_str))
    });
    Ok(Leafz {
        server_id: srv.id.clone(),
        now: now(),
        leafnodes: leafs.len(),
        leafs: (!leafs.is_empty()).then_some(leafs),
    })
}

#[derive(Serialize, Debug)]
pub struct Gatewayz {
    pub server_id: String,
    pub now: String,
    // `name`, `host`, `port` are omitted by nats-server without a gateway.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub port: u16,
    pub outbound_gateways: BTreeMap<String, RemoteGatewayz>,
    pub inbound_gateways: BTreeMap<String, Vec<RemoteGatewayz>>,
}

#[derive(Serialize, Debug)]
pub struct RemoteGatewayz {
    pub configured: bool,
    pub connection: ConnInfo,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<AccountGatewayz>,
}

#[derive(Serialize, Debug)]
pub struct AccountGatewayz {
    pub name: String,
    pub interest_mode: &'static str,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub no_interest_count: usize,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub interest_only_threshold: usize,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub num_subs: usize,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub num_queue_subs: usize,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

fn is_zero_usize(v: &usize) -> bool {
    *v == 0
}

fn gw_conn_info(c: &crate::conn::Conn, now: SystemTime, subs: usize) -> ConnInfo {
    let mut ci = ConnInfo::of(c, now, false);
    ci.kind = "Gateway";
    ci.conn_type = "";
    ci.subscriptions = subs;
    ci.subscriptions_list_detail.clear();
    ci
}

/// `accs` (boolean; nats-server 2.9 does not check `subs`), `gw_name`, `acc_name`.
pub fn gatewayz(srv: &ServerShared, p: &HashMap<String, String>) -> Result<Gatewayz, String> {
    let accs = decode_bool(p, "accs")?;
    let mut z = Gatewayz {
        server_id: srv.id.clone(),
        now: now(),
        name: String::new(),
        host: String::new(),
        port: 0,
        outbound_gateways: BTreeMap::new(),
        inbound_gateways: BTreeMap::new(),
    };
    let Some(gw) = &srv.gateway else {
        return Ok(z);
    };
    let gw_name = p.get("gw_name").filter(|s| !s.is_empty());
    let acc_name = p.get("acc_name").filter(|s| !s.is_empty());
    let t = SystemTime::now();
    z.name = gw.name.clone();
    z.host = gw.opts.host.clone();
    z.port = gw.listen_addr.get().map_or(gw.opts.port, |a| a.port());
    for o in gw.outbounds() {
        if gw_name.is_some_and(|n| n != &o.name) {
            continue;
        }
        let accounts = if accs || acc_name.is_some() {
            o.interest
                .summary()
                .into_iter()
                .filter(|a| acc_name.is_none_or(|n| n == &a.name))
                .map(|a| AccountGatewayz {
                    name: a.name,
                    interest_mode: a.mode.as_str(),
                    no_interest_count: a.no_interest_count,
                    interest_only_threshold: 1000,
                    num_subs: a.num_subs,
                    num_queue_subs: a.num_queue_subs,
                })
                .collect()
        } else {
            Vec::new()
        };
        z.outbound_gateways.insert(
            o.name.clone(),
            RemoteGatewayz {
                configured: o.configured,
                connection: gw_conn_info(&o.conn, t, o.interest.num_subs()),
                accounts,
            },
        );
    }
    for i in gw.inbounds() {
        if gw_name.is_some_and(|n| n != &i.name) {
            continue;
        }
        z.inbound_gateways
            .entry(i.name.clone())
            .or_default()
            .push(RemoteGatewayz {
                configured: i.configured,
                connection: gw_conn_info(&i.conn, t, 0),
                // Every account was switched to Interest-Only when the inbound registered.
                accounts: if accs || acc_name.is_some() {
                    srv.accounts
                        .all()
                        .iter()
                        .filter(|a| acc_name.is_none_or(|n| n == &a.name))
                        .map(|a| AccountGatewayz {
                            name: a.name.clone(),
                            interest_mode: "Interest-Only",
                            no_interest_count: 0,
                            interest_only_threshold: 1000,
                            num_subs: 0,
                            num_queue_subs: 0,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            });
    }
    Ok(z)
}

#[derive(Serialize, Debug, Default)]
pub struct JsConfig {
    pub max_memory: i64,
    pub max_storage: i64,
}

#[derive(Serialize, Debug, Default)]
pub struct JsApi {
    pub total: u64,
    pub errors: u64,
}

#[derive(Serialize, Debug)]
pub struct Jsz {
    pub server_id: String,
    pub now: String,
    pub disabled: bool,
    pub config: JsConfig,
    pub memory: u64,
    pub storage: u64,
    pub reserved_memory: u64,
    pub reserved_storage: u64,
    pub accounts: u64,
    pub ha_assets: u64,
    pub api: JsApi,
    pub streams: u64,
    pub consumers: u64,
    pub messages: u64,
    pub bytes: u64,
}

/// `acc`, `accounts`, `streams`, `consumers`, `config`, `leader-only` (booleans), `offset`,
/// `limit` (integers): checked, then JetStream is reported disabled.
pub fn jsz(srv: &ServerShared, p: &HashMap<String, String>) -> Result<JszOut, String> {
    for k in ["accounts", "streams", "consumers", "config", "leader-only"] {
        decode_bool(p, k)?;
    }
    for k in ["offset", "limit"] {
        decode_int(p, k)?;
    }
    if let Some(js) = srv.jetstream.get() {
        let q = crate::jetstream::monitor::JszQuery::from_params(p);
        return Ok(JszOut::Enabled(Box::new(crate::jetstream::monitor::jsz(
            js, &srv.id, &srv.name, &q,
        ))));
    }
    Ok(JszOut::Disabled(Jsz {
        server_id: srv.id.clone(),
        now: now(),
        disabled: true,
        config: JsConfig::default(),
        memory: 0,
        storage: 0,
        reserved_memory: 0,
        reserved_storage: 0,
        accounts: 0,
        ha_assets: 0,
        api: JsApi::default(),
        streams: 0,
        consumers: 0,
        messages: 0,
        bytes: 0,
    }))
}

/// `/jsz`: the disabled shape, or JetStream's own (`crate::jetstream::monitor`).
#[derive(Serialize, Debug)]
#[serde(untagged)]
pub enum JszOut {
    Disabled(Jsz),
    Enabled(Box<crate::jetstream::monitor::Jsz>),
}

/// One line per thread of this process: `thread <tid> [<name>] <state>` (Linux; elsewhere
/// a line saying it is not available).
pub fn threads() -> String {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return "thread list not available on this system\n".to_string();
    };
    let mut tids: Vec<u64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut out = String::new();
    for tid in tids {
        let base = format!("/proc/self/task/{tid}");
        let name = std::fs::read_to_string(format!("{base}/comm")).unwrap_or_default();
        // `stat`: "tid (comm) S …": the state letter follows the last ')'.
        let stat = std::fs::read_to_string(format!("{base}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
            .unwrap_or("?");
        out.push_str(&format!("thread {tid} [{}] {state}\n", name.trim()));
    }
    out
}

/// `/raftz`'s answer, or nats-server's 404 text when this node has no clustered JetStream.
/// Filters (`acc`, default the system account, whose group is the meta group; `group`)
/// that match nothing give `{}`, as nats-server 2.15.1 answers them.
pub fn raftz(
    srv: &ServerShared,
    p: &HashMap<String, String>,
) -> Result<serde_json::Value, &'static str> {
    let cluster = srv
        .jetstream
        .get()
        .and_then(|js| js.engine().cluster.clone());
    let Some(c) = cluster else {
        return Err("No Raft nodes registered");
    };
    let sys = srv.system_account_name();
    let given = |k: &str| p.get(k).map(String::as_str).filter(|v| !v.is_empty());
    Ok(c.raftz(sys, given("acc").unwrap_or(sys), given("group")))
}
