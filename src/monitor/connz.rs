//! `/connz`: client connections, open and recently closed, with nats-server's query parameters
//! (sort, auth, subs, offset, limit, cid, state, user, acc) and fields.

use crate::conn::{unix_nanos, Conn};
use crate::server::ServerShared;
use crate::util::time::{go_duration, rfc3339_nano, uptime};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Serialize, Clone, Debug)]
pub struct SubDetail {
    pub account: String,
    /// The account's name tag (2.10+): its name, natsd having no JWT accounts.
    pub account_tag: String,
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub qgroup: String,
    pub sid: String,
    pub msgs: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: u64,
    pub cid: u64,
}

impl SubDetail {
    /// One subscription (local or a route's remote interest) of `account`.
    pub fn of(account: &str, s: &crate::account::Subscription) -> SubDetail {
        SubDetail {
            account: account.to_string(),
            account_tag: account.to_string(),
            subject: String::from_utf8_lossy(&s.subject).into_owned(),
            qgroup: s
                .queue
                .as_ref()
                .map(|q| String::from_utf8_lossy(q).into_owned())
                .unwrap_or_default(),
            sid: String::from_utf8_lossy(&s.sid).into_owned(),
            msgs: s.delivered.load(Relaxed),
            max: s.max.load(Relaxed),
            cid: s.conn.cid,
        }
    }
}

/// Sids in subscription order: numerically when both are numbers (`2` before `10`), else
/// numbers first and the rest bytewise.
pub fn cmp_sids(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One connection as `/connz` shows it; also the snapshot kept for closed connections.
#[derive(Serialize, Clone, Debug)]
pub struct ConnInfo {
    pub cid: u64,
    pub kind: &'static str,
    #[serde(rename = "type", skip_serializing_if = "str::is_empty")]
    pub conn_type: &'static str,
    pub ip: String,
    pub port: u16,
    pub start: String,
    pub last_activity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    pub rtt: String,
    pub uptime: String,
    pub idle: String,
    pub pending_bytes: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub subscriptions: usize,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lang: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tls_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tls_cipher_suite: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authorized_user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list_detail: Vec<SubDetail>,
    /// With `auth`: the account's name tag (2.10+; its name, natsd having no JWT accounts).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name_tag: String,
    // Sort keys, not serialized.
    #[serde(skip)]
    start_ns: u64,
    #[serde(skip)]
    last_ns: u64,
    #[serde(skip)]
    stop_ns: u64,
    #[serde(skip)]
    idle_d: Duration,
    #[serde(skip)]
    uptime_d: Duration,
}

impl ConnInfo {
    /// Snapshot `c` at `now`. Closed snapshots keep their subscription details for `subs=1`.
    pub fn of(c: &Conn, now: SystemTime, closed: bool) -> ConnInfo {
        let meta = c.meta().clone();
        let last_ns = c.last_activity.load(Relaxed);
        let last = UNIX_EPOCH + Duration::from_nanos(last_ns);
        let subs: Vec<SubDetail> = {
            let s = c.subs();
            let mut v: Vec<_> = s
                .values()
                .map(|s| SubDetail::of(&meta.account, s))
                .collect();
            v.sort_by(|a, b| cmp_sids(&a.sid, &b.sid));
            v
        };
        let up = now.duration_since(c.start).unwrap_or_default();
        let idle = now.duration_since(last).unwrap_or_default();
        ConnInfo {
            cid: c.cid,
            kind: "Client",
            conn_type: "nats",
            ip: c.addr.ip().to_string(),
            port: c.addr.port(),
            start: rfc3339_nano(c.start),
            last_activity: rfc3339_nano(last),
            stop: closed.then(|| rfc3339_nano(now)),
            reason: if closed {
                c.close_reason().map(|r| r.as_str())
            } else {
                None
            },
            rtt: go_duration(meta.rtt.unwrap_or_default()),
            uptime: uptime(up),
            idle: uptime(idle),
            pending_bytes: c.out.pending(),
            in_msgs: c.counters.in_msgs.load(Relaxed),
            out_msgs: c.counters.out_msgs.load(Relaxed),
            in_bytes: c.counters.in_bytes.load(Relaxed),
            out_bytes: c.counters.out_bytes.load(Relaxed),
            subscriptions: subs.len(),
            name: meta.name,
            lang: meta.lang,
            version: meta.version,
            tls_version: meta.tls_version,
            tls_cipher_suite: meta.tls_cipher_suite,
            authorized_user: meta.user,
            account: meta.account,
            subscriptions_list: Vec::new(),
            subscriptions_list_detail: subs,
            name_tag: String::new(),
            start_ns: unix_nanos(c.start),
            last_ns,
            stop_ns: if closed { unix_nanos(now) } else { 0 },
            idle_d: idle,
            uptime_d: up,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    Open,
    Closed,
    All,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SubsMode {
    None,
    List,
    Detail,
}

#[derive(Debug)]
pub struct ConnzQuery {
    pub sort: String,
    pub auth: bool,
    pub subs: SubsMode,
    pub offset: usize,
    pub limit: usize,
    pub cid: Option<u64>,
    pub state: State,
    pub user: Option<String>,
    pub acc: Option<String>,
}

const SORTS: &[&str] = &[
    "cid",
    "start",
    "subs",
    "pending",
    "msgs_to",
    "msgs_from",
    "bytes_to",
    "bytes_from",
    "last",
    "idle",
    "uptime",
    "stop",
    "reason",
];

fn num<T: std::str::FromStr>(p: &HashMap<String, String>, k: &str) -> Result<Option<T>, String> {
    match p.get(k) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| format!("Error decoding {k}: invalid value {v:?}")),
    }
}

fn flag(p: &HashMap<String, String>, k: &str) -> Result<bool, String> {
    match p.get(k).map(String::as_str) {
        None | Some("") => Ok(false),
        Some("1" | "true" | "t" | "TRUE" | "True" | "T") => Ok(true),
        Some("0" | "false" | "f" | "FALSE" | "False" | "F") => Ok(false),
        Some(v) => Err(format!("Error decoding {k}: invalid boolean {v:?}")),
    }
}

impl ConnzQuery {
    pub fn parse(p: &HashMap<String, String>) -> Result<Self, String> {
        let sort = p.get("sort").cloned().unwrap_or_else(|| "cid".into());
        if !SORTS.contains(&sort.as_str()) {
            return Err(format!("invalid sorting option: {sort}"));
        }
        let subs = match p.get("subs").map(String::as_str) {
            Some("detail") => SubsMode::Detail,
            _ if flag(p, "subs")? => SubsMode::List,
            _ => SubsMode::None,
        };
        let state = match p.get("state").map(String::as_str) {
            None | Some("" | "open") => State::Open,
            Some("closed") => State::Closed,
            Some("all" | "any") => State::All,
            Some(v) => return Err(format!("Error decoding state for {v}")),
        };
        if (sort == "stop" || sort == "reason") && state != State::Closed {
            return Err(format!("sort by {sort} only valid on closed connections"));
        }
        Ok(ConnzQuery {
            sort,
            auth: flag(p, "auth")?,
            subs,
            // Like nats-server: a negative offset is 0, a limit below 1 is the default.
            offset: num::<i64>(p, "offset")?
                .and_then(|o| usize::try_from(o).ok())
                .unwrap_or(0),
            limit: num::<i64>(p, "limit")?
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| *l > 0)
                .unwrap_or(1024),
            cid: num(p, "cid")?,
            state,
            user: p.get("user").filter(|s| !s.is_empty()).cloned(),
            acc: p.get("acc").filter(|s| !s.is_empty()).cloned(),
        })
    }
}

#[derive(Serialize)]
pub struct Connz {
    pub server_id: String,
    pub now: String,
    pub num_connections: usize,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub connections: Vec<ConnInfo>,
}

pub fn connz(srv: &ServerShared, q: &ConnzQuery) -> Connz {
    let now = SystemTime::now();
    let mut all: Vec<ConnInfo> = Vec::new();
    if q.state != State::Closed {
        all.extend(srv.clients().iter().map(|c| ConnInfo::of(c, now, false)));
    }
    if q.state != State::Open {
        all.extend(srv.closed_clients());
    }
    all.retain(|c| {
        q.cid.is_none_or(|cid| c.cid == cid)
            && q.user.as_ref().is_none_or(|u| &c.authorized_user == u)
            && q.acc.as_ref().is_none_or(|a| &c.account == a)
    });
    match q.sort.as_str() {
        "start" => all.sort_by_key(|c| c.start_ns),
        "subs" => all.sort_by_key(|c| std::cmp::Reverse(c.subscriptions)),
        "pending" => all.sort_by_key(|c| std::cmp::Reverse(c.pending_bytes)),
        "msgs_to" => all.sort_by_key(|c| std::cmp::Reverse(c.out_msgs)),
        "msgs_from" => all.sort_by_key(|c| std::cmp::Reverse(c.in_msgs)),
        "bytes_to" => all.sort_by_key(|c| std::cmp::Reverse(c.out_bytes)),
        "bytes_from" => all.sort_by_key(|c| std::cmp::Reverse(c.in_bytes)),
        "last" => all.sort_by_key(|c| std::cmp::Reverse(c.last_ns)),
        "idle" => all.sort_by_key(|c| std::cmp::Reverse(c.idle_d)),
        "uptime" => all.sort_by_key(|c| std::cmp::Reverse(c.uptime_d)),
        "stop" => all.sort_by_key(|c| std::cmp::Reverse(c.stop_ns)),
        "reason" => all.sort_by(|a, b| a.reason.cmp(&b.reason)),
        _ => all.sort_by_key(|c| c.cid),
    }
    let total = all.len();
    let mut page: Vec<ConnInfo> = all.into_iter().skip(q.offset).take(q.limit).collect();
    for c in &mut page {
        match q.subs {
            SubsMode::None => c.subscriptions_list_detail.clear(),
            SubsMode::List => {
                c.subscriptions_list = c
                    .subscriptions_list_detail
                    .drain(..)
                    .map(|s| s.subject)
                    .collect();
            }
            SubsMode::Detail => {}
        }
        if !q.auth {
            c.authorized_user.clear();
            c.account.clear();
        } else {
            // As nats-server: the account only when it is not `$G`; the name tag of an open
            // connection's account always, of a closed one's when it names one (2.10+).
            if c.stop_ns == 0 || c.account != crate::account::GLOBAL_ACCOUNT {
                c.name_tag = c.account.clone();
            }
            if c.account == crate::account::GLOBAL_ACCOUNT {
                c.account.clear();
            }
        }
    }
    Connz {
        server_id: srv.id.clone(),
        now: rfc3339_nano(now),
        num_connections: page.len(),
        total,
        offset: q.offset,
        limit: q.limit,
        connections: page,
    }
}
