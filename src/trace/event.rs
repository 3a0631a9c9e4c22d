//! The trace event's JSON, in nats-server's field order and omissions (`MsgTraceEvent`).

use crate::util::time::rfc3339_nano;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::time::SystemTime;

fn go_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339_nano(*t))
}

/// One entry of `events`. Subject mapping (`sm`) entries are never produced: natsd has no
/// subject mappings.
#[derive(Serialize, Debug, Clone)]
#[serde(tag = "type")]
pub enum Event {
    #[serde(rename = "in")]
    In {
        #[serde(serialize_with = "go_time")]
        ts: SystemTime,
        kind: u8,
        cid: u64,
        #[serde(skip_serializing_if = "String::is_empty")]
        name: String,
        acc: String,
        subj: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        error: String,
    },
    /// A stream import delivered the message into `acc` as `to`.
    #[serde(rename = "se")]
    Se {
        #[serde(serialize_with = "go_time")]
        ts: SystemTime,
        acc: String,
        to: String,
    },
    /// A service import sent the message from `from` into `acc` as `to`.
    #[serde(rename = "si")]
    Si {
        #[serde(serialize_with = "go_time")]
        ts: SystemTime,
        acc: String,
        from: String,
        to: String,
    },
    /// A stream took the message (`subject` once its checks passed).
    #[serde(rename = "js")]
    Js {
        #[serde(serialize_with = "go_time")]
        ts: SystemTime,
        stream: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        subject: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        nointerest: bool,
        #[serde(skip_serializing_if = "String::is_empty")]
        error: String,
    },
    #[serde(rename = "eg")]
    Eg {
        #[serde(serialize_with = "go_time")]
        ts: SystemTime,
        kind: u8,
        cid: u64,
        #[serde(skip_serializing_if = "String::is_empty")]
        name: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        hop: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        acc: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        sub: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        queue: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        error: String,
    },
}

#[derive(Serialize)]
struct Request<'a> {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    header: &'a BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "is_zero")]
    msgsize: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn no_hops(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize)]
struct Out<'a> {
    server: serde_json::Value,
    request: Request<'a>,
    #[serde(skip_serializing_if = "no_hops")]
    hops: u32,
    events: &'a [Event],
}

/// `{"server":…,"request":{"header":…,"msgsize":…},"hops":…,"events":[…]}`.
pub fn json(
    server: serde_json::Value,
    header: &BTreeMap<String, Vec<String>>,
    msgsize: usize,
    hops: u32,
    events: &[Event],
) -> Vec<u8> {
    let out = Out {
        server,
        request: Request { header, msgsize },
        hops,
        events,
    };
    serde_json::to_vec(&out).unwrap_or_default()
}
