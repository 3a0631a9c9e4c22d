//! `/subsz` (alias `/subscriptionsz`): the sublist counters summed over accounts the way
//! nats-server sums them, and with `subs=1` the local (client) subscriptions, filtered by
//! `acc` and by `test` (a literal subject they must match), paged by `offset`/`limit`.
//!
//! Like nats-server 2.9, a response without a subscription list is only the counters (no
//! `server_id`, `now`, `total`...), and `total` is the number of entries on the page.

use super::connz::{cmp_sids, SubDetail};
use crate::conn::ConnKind;
use crate::server::ServerShared;
use crate::sublist::SublistStats;
use crate::util::time::rfc3339_nano;
use serde::Serialize;
use std::collections::HashMap;
use std::time::SystemTime;

/// Go's `encoding/json` writes a whole float64 without a fraction (`"cache_hit_rate": 0`,
/// `"avg_fanout": 1`); a client decoding into an integer must not meet `1.0`.
pub(crate) fn go_float<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if v.fract() == 0.0 && v.abs() < EXACT {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

/// nats-server's `SublistStats` JSON.
#[derive(Serialize, Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub num_subscriptions: u64,
    pub num_cache: u64,
    pub num_inserts: u64,
    pub num_removes: u64,
    pub num_matches: u64,
    #[serde(serialize_with = "go_float")]
    pub cache_hit_rate: f64,
    pub max_fanout: u64,
    #[serde(serialize_with = "go_float")]
    pub avg_fanout: f64,
}

impl Stats {
    /// The sum over several sublists as nats-server's `SublistStats.add` makes it: counts
    /// added, the largest `max_fanout`, and the rates recomputed from the summed hits,
    /// matches, fan-outs and cache sizes (not averaged).
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a SublistStats>) -> Stats {
        let (mut hits, mut fanout) = (0f64, 0f64);
        let mut st = Stats::default();
        for s in all {
            st.num_subscriptions += s.num_subscriptions;
            st.num_cache += s.num_cache;
            st.num_inserts += s.num_inserts;
            st.num_removes += s.num_removes;
            st.num_matches += s.num_matches;
            st.max_fanout = st.max_fanout.max(s.max_fanout);
            hits += (s.cache_hit_rate * s.num_matches as f64).round();
            fanout += (s.avg_fanout * s.num_cache as f64).round();
        }
        if st.num_matches > 0 {
            st.cache_hit_rate = hits / st.num_matches as f64;
        }
        if st.num_cache > 0 {
            st.avg_fanout = fanout / st.num_cache as f64;
        }
        st
    }
}

impl From<&SublistStats> for Stats {
    fn from(s: &SublistStats) -> Stats {
        Stats::sum([s])
    }
}

#[derive(Serialize, Debug)]
pub struct Subsz {
    pub server_id: String,
    pub now: String,
    #[serde(flatten)]
    pub stats: Stats,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub subscriptions_list: Vec<SubDetail>,
}

/// What `/subsz` writes: the counters alone, or everything with a non-empty list.
#[derive(Serialize, Debug)]
#[serde(untagged)]
pub enum SubszOut {
    Stats(Stats),
    Full(Subsz),
}

#[derive(Debug, Default)]
pub struct SubszQuery {
    pub subs: bool,
    pub offset: usize,
    pub limit: usize,
    pub test: Option<String>,
    pub acc: Option<String>,
}

/// nats-server's `decodeBool` (Go's `strconv.ParseBool`; empty is false), same error text.
pub fn decode_bool(p: &HashMap<String, String>, k: &str) -> Result<bool, String> {
    match p.get(k).map(String::as_str) {
        None | Some("") => Ok(false),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Ok(true),
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Ok(false),
        Some(v) => Err(format!(
            "Error decoding boolean for '{k}': strconv.ParseBool: parsing {v:?}: invalid syntax"
        )),
    }
}

/// nats-server's `decodeInt` (Go's `strconv.Atoi`; empty is 0), same error text.
pub fn decode_int(p: &HashMap<String, String>, k: &str) -> Result<i64, String> {
    match p.get(k).map(String::as_str) {
        None | Some("") => Ok(0),
        Some(v) => v.parse().map_err(|_| {
            format!("Error decoding int for '{k}': strconv.Atoi: parsing {v:?}: invalid syntax")
        }),
    }
}

pub const DEFAULT_LIMIT: usize = 1024;

impl SubszQuery {
    pub fn parse(p: &HashMap<String, String>) -> Result<Self, String> {
        // nats-server takes only a boolean; `detail` (as `/connz` and `/routez` take it) is
        // accepted too: the list is always detailed.
        let subs = p.get("subs").is_some_and(|v| v == "detail") || decode_bool(p, "subs")?;
        let offset = decode_int(p, "offset")?;
        let limit = decode_int(p, "limit")?;
        let test = p.get("test").filter(|t| !t.is_empty()).cloned();
        if let Some(t) = &test {
            if !crate::subject::is_valid_literal_subject(t.as_bytes()) {
                return Err(format!(
                    "invalid test subject, must be valid publish subject: {t}"
                ));
            }
        }
        Ok(SubszQuery {
            subs,
            offset: usize::try_from(offset).unwrap_or(0),
            limit: usize::try_from(limit)
                .ok()
                .filter(|l| *l > 0)
                .unwrap_or(DEFAULT_LIMIT),
            test,
            acc: p.get("acc").filter(|a| !a.is_empty()).cloned(),
        })
    }
}

pub fn subsz(srv: &ServerShared, q: &SubszQuery) -> SubszOut {
    let now = SystemTime::now();
    let accounts: Vec<_> = srv
        .accounts
        .all()
        .into_iter()
        .filter(|a| q.acc.as_ref().is_none_or(|n| &a.name == n))
        .collect();
    let stats: Vec<SublistStats> = accounts.iter().map(|a| a.sublist.stats()).collect();
    let stats = Stats::sum(&stats);
    if !q.subs {
        return SubszOut::Stats(stats);
    }
    let mut list = Vec::new();
    for acc in &accounts {
        let mut subs = Vec::new();
        acc.sublist.for_each(|subject, _, e| {
            // Local subscriptions (clients' and the server's own, cid 1, as nats-server
            // lists them): not the interest learned from routes.
            if e.conn.kind == ConnKind::Route {
                return;
            }
            if let Some(t) = &q.test {
                if !crate::subject::pattern_matches(subject, t.as_bytes()) {
                    return;
                }
            }
            subs.push(SubDetail::of(&acc.name, e));
        });
        subs.sort_by(|a, b| a.cid.cmp(&b.cid).then_with(|| cmp_sids(&a.sid, &b.sid)));
        list.extend(subs);
    }
    let page: Vec<SubDetail> = list.into_iter().skip(q.offset).take(q.limit).collect();
    if page.is_empty() {
        return SubszOut::Stats(stats);
    }
    SubszOut::Full(Subsz {
        server_id: srv.id.clone(),
        now: rfc3339_nano(now),
        stats,
        // nats-server's `total` counts the entries on this page.
        total: page.len(),
        offset: q.offset,
        limit: q.limit,
        subscriptions_list: page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_recomputes_rates_from_totals() {
        let g = SublistStats {
            num_subscriptions: 4,
            num_cache: 2,
            num_inserts: 9,
            num_removes: 5,
            num_matches: 6,
            cache_hit_rate: 2.0 / 6.0,
            max_fanout: 1,
            avg_fanout: 0.5,
        };
        let sys = SublistStats {
            num_subscriptions: 40,
            num_cache: 7,
            num_inserts: 40,
            num_removes: 0,
            num_matches: 7,
            cache_hit_rate: 0.0,
            max_fanout: 1,
            avg_fanout: 5.0 / 7.0,
        };
        // The numbers nats-server 2.9.10 wrote for these two accounts.
        let s = Stats::sum([&g, &sys]);
        assert_eq!(s.num_subscriptions, 44);
        assert_eq!(s.num_matches, 13);
        assert_eq!(s.cache_hit_rate, 2.0 / 13.0);
        assert_eq!(s.avg_fanout, 6.0 / 9.0);
        let json = serde_json::to_string(&Stats::default()).unwrap();
        assert!(json.contains(r#""cache_hit_rate":0,"#), "{json}");
    }
}
