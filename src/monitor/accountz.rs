//! `/accountz` (the accounts, or one account's detail with `acc`) and `/accstatz` (per-account
//! connection and message counts), in nats-server 2.9's JSON.
//!
//! Exports and imports are listed as nats-server lists configured ones (`imports.rs`); then
//! the account's subject mappings and, in operator mode, what its JWT says. `/accstatz` sums the message counters of the account's
//! open connections and of those still in the closed-connections ring, plus what the account
//! received from and sent to routes and gateways (also shown apart, as 2.10+ does).

use super::subsz::{decode_bool, Stats};
use crate::account::Account;
use crate::server::ServerShared;
use crate::util::time::rfc3339_nano;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

fn is_false(v: &bool) -> bool {
    !*v
}

#[derive(Serialize, Debug)]
pub struct AccountInfo {
    pub account_name: String,
    pub update_time: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_system: bool,
    pub expired: bool,
    pub complete: bool,
    pub jetstream_enabled: bool,
    pub leafnode_connections: usize,
    pub client_connections: usize,
    pub subscriptions: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<crate::imports::ExtExport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<crate::imports::ExtImport>,
    /// Subject mappings: source → destinations `{subject, weight, cluster}`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mappings: BTreeMap<String, Vec<Value>>,
    /// Operator mode: the account's JWT, its issuer, and the decoded claims.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub issuer_key: String,
    /// The account's name tag (2.10+): its JWT's `name`, else its name.
    pub name_tag: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoded_jwt: Option<Value>,
    /// The JWT's user revocations: user key → time.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub revoked_user: BTreeMap<String, String>,
    pub sublist_stats: Stats,
}

#[derive(Serialize, Debug)]
pub struct Accountz {
    pub server_id: String,
    pub now: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_detail: Option<AccountInfo>,
}

fn detail(srv: &ServerShared, acc: &Account) -> AccountInfo {
    let mut info = AccountInfo {
        account_name: acc.name.clone(),
        // natsd's accounts never change after start.
        update_time: rfc3339_nano(srv.start),
        is_system: acc.name == srv.system_account_name(),
        expired: false,
        complete: true,
        jetstream_enabled: srv
            .jetstream
            .get()
            .is_some_and(|js| js.engine().accounts.contains_key(&acc.name)),
        leafnode_connections: acc.num_leafs.load(Relaxed),
        client_connections: acc.num_conns.load(Relaxed),
        subscriptions: acc.sublist.count(),
        exports: crate::imports::ext_exports(acc),
        imports: crate::imports::ext_imports(acc),
        mappings: mappings(srv, &acc.name),
        jwt: String::new(),
        issuer_key: String::new(),
        name_tag: acc.name.clone(),
        tags: Vec::new(),
        decoded_jwt: None,
        revoked_user: BTreeMap::new(),
        sublist_stats: Stats::from(&acc.sublist.stats()),
    };
    with_jwt(srv, &mut info);
    info
}

/// nats-server's `ExtMap`: each source's destinations as installed
/// (`mapping.rs` `Mappings::installed`: the source added with the weight left, sorted by
/// weight, cumulative weights).
fn mappings(srv: &ServerShared, account: &str) -> BTreeMap<String, Vec<Value>> {
    let live = srv.live_opts();
    let Some(configs) = live.account_mappings.get(account) else {
        return BTreeMap::new();
    };
    let Ok(m) = crate::mapping::Mappings::build(configs) else {
        return BTreeMap::new();
    };
    m.installed()
        .into_iter()
        .map(|(src, dests)| {
            let dests = dests
                .into_iter()
                .map(|(subject, weight, cluster)| {
                    let mut v = json!({"subject": subject, "weight": weight});
                    if let Some(c) = cluster {
                        v["cluster"] = json!(c);
                    }
                    v
                })
                .collect();
            (src, dests)
        })
        .collect()
}

/// Operator mode: what the account's JWT says (`jwt`, `issuer_key`, `name_tag`, `tags`,
/// `decoded_jwt`, `revoked_user`).
fn with_jwt(srv: &ServerShared, info: &mut AccountInfo) {
    let live = srv.live_opts();
    let Some(token) = live.operator.as_ref().and_then(|op| {
        op.preload
            .iter()
            .find(|(k, _)| *k == info.account_name)
            .map(|(_, t)| t.clone())
    }) else {
        return;
    };
    let Ok(claims) = crate::jwt::decode_generic(&token) else {
        return;
    };
    info.issuer_key = claims["iss"].as_str().unwrap_or_default().to_string();
    if let Some(n) = claims["name"].as_str().filter(|n| !n.is_empty()) {
        info.name_tag = n.to_string();
    }
    info.tags = claims["nats"]["tags"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(r) = claims["nats"]["revocations"].as_object() {
        for (user, at) in r {
            let secs = at.as_i64().unwrap_or(0).max(0) as u64;
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
            info.revoked_user.insert(user.clone(), rfc3339_nano(t));
        }
    }
    info.decoded_jwt = Some(claims);
    info.jwt = token;
}

/// `acc` empty or absent: the account names; else that account's detail (400 if unknown, with
/// nats-server's text).
pub fn accountz(srv: &ServerShared, p: &HashMap<String, String>) -> Result<Accountz, String> {
    let mut z = Accountz {
        server_id: srv.id.clone(),
        now: rfc3339_nano(SystemTime::now()),
        system_account: srv.system_account_name().to_string(),
        accounts: Vec::new(),
        account_detail: None,
    };
    match p.get("acc").filter(|a| !a.is_empty()) {
        None => z.accounts = srv.accounts.all().iter().map(|a| a.name.clone()).collect(),
        Some(name) => z.account_detail = Some(account_info(srv, name)?),
    }
    Ok(z)
}

/// One account's detail (`/accountz?acc=`, `$SYS.REQ.ACCOUNT.<acc>.INFO`); nats-server's
/// text when it does not exist.
pub fn account_info(srv: &ServerShared, name: &str) -> Result<AccountInfo, String> {
    let acc = srv
        .accounts
        .get(name)
        .ok_or_else(|| format!("Account {name} does not exist"))?;
    Ok(detail(srv, &acc))
}

#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct MsgBytes {
    pub msgs: u64,
    pub bytes: u64,
}

impl MsgBytes {
    fn of(c: &crate::account::MsgBytes) -> MsgBytes {
        let (msgs, bytes) = c.get();
        MsgBytes { msgs, bytes }
    }

    fn add(&mut self, o: MsgBytes) {
        self.msgs += o.msgs;
        self.bytes += o.bytes;
    }
}

/// Messages one way: all of them, then the part that came from (or went to) gateways,
/// routes and leaf nodes (2.10+; natsd has no leaf nodes).
#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct DataStats {
    pub msgs: u64,
    pub bytes: u64,
    pub gateways: MsgBytes,
    pub routes: MsgBytes,
    pub leafs: MsgBytes,
}

impl DataStats {
    /// `clients` (the account's connections) plus the routes' and gateways' part.
    fn with_kinds(clients: MsgBytes, routes: MsgBytes, gateways: MsgBytes) -> DataStats {
        let mut all = clients;
        all.add(routes);
        all.add(gateways);
        DataStats {
            msgs: all.msgs,
            bytes: all.bytes,
            gateways,
            routes,
            leafs: MsgBytes::default(),
        }
    }
}

#[derive(Serialize, Debug)]
pub struct AccountStat {
    pub acc: String,
    /// The account's name (2.10+; with JWT accounts `acc` is the key): what exporters label
    /// their gauges with.
    pub name: String,
    pub conns: usize,
    pub leafnodes: usize,
    pub total_conns: usize,
    /// Subscriptions in the account's sublist (2.10+).
    pub num_subscriptions: usize,
    pub sent: DataStats,
    pub received: DataStats,
    pub slow_consumers: u64,
}

#[derive(Serialize, Debug)]
pub struct AccountStatz {
    pub server_id: String,
    pub now: String,
    pub account_statz: Vec<AccountStat>,
}

#[derive(Default)]
struct Totals {
    sent: MsgBytes,
    received: MsgBytes,
    slow: u64,
}

/// Message counters by account: open connections plus the closed-connections ring.
fn totals(srv: &ServerShared) -> HashMap<String, Totals> {
    let mut m: HashMap<String, Totals> = HashMap::new();
    for c in srv.clients() {
        let account = c.meta().account.clone();
        let t = m.entry(account).or_default();
        t.sent.msgs += c.counters.out_msgs.load(Relaxed);
        t.sent.bytes += c.counters.out_bytes.load(Relaxed);
        t.received.msgs += c.counters.in_msgs.load(Relaxed);
        t.received.bytes += c.counters.in_bytes.load(Relaxed);
    }
    for c in srv.closed_clients() {
        let t = m.entry(c.account.clone()).or_default();
        t.sent.msgs += c.out_msgs;
        t.sent.bytes += c.out_bytes;
        t.received.msgs += c.in_msgs;
        t.received.bytes += c.in_bytes;
        if c.reason.is_some_and(|r| r.starts_with("Slow Consumer")) {
            t.slow += 1;
        }
    }
    m
}

/// `acc`: only that account; `unused`: also accounts without connections (nats-server lists
/// only accounts with local connections otherwise).
pub fn accstatz(srv: &ServerShared, p: &HashMap<String, String>) -> Result<AccountStatz, String> {
    let unused = decode_bool(p, "unused")?;
    let only = p.get("acc").filter(|a| !a.is_empty()).cloned();
    Ok(account_statz(
        srv,
        only.as_ref().map(std::slice::from_ref),
        unused,
    ))
}

/// The accounts named in `only` (all when `None`), those without local connections only
/// when `unused`.
pub fn account_statz(srv: &ServerShared, only: Option<&[String]>, unused: bool) -> AccountStatz {
    let mut totals = totals(srv);
    let account_statz = srv
        .accounts
        .all()
        .into_iter()
        .filter(|a| only.is_none_or(|n| n.contains(&a.name)))
        .filter_map(|a| {
            let conns = a.num_conns.load(Relaxed);
            let leafnodes = a.num_leafs.load(Relaxed);
            if conns + leafnodes == 0 && !unused {
                return None;
            }
            let t = totals.remove(&a.name).unwrap_or_default();
            Some(AccountStat {
                acc: a.name.clone(),
                name: a.name.clone(),
                conns,
                leafnodes,
                total_conns: conns + leafnodes,
                num_subscriptions: a.sublist.count(),
                sent: DataStats::with_kinds(
                    t.sent,
                    MsgBytes::of(&a.kinds.routes_out),
                    MsgBytes::of(&a.kinds.gateways_out),
                ),
                received: DataStats::with_kinds(
                    t.received,
                    MsgBytes::of(&a.kinds.routes_in),
                    MsgBytes::of(&a.kinds.gateways_in),
                ),
                slow_consumers: t.slow,
            })
        })
        .collect();
    AccountStatz {
        server_id: srv.id.clone(),
        now: rfc3339_nano(SystemTime::now()),
        account_statz,
    }
}
