//! The JetStream API's JSON: stream and consumer configurations (fields in nats-server 2.9's
//! order and `omitempty` rules), API errors with nats-server's codes, times and headers.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// Go's json treats `null` as "leave the zero value": so do we.
fn nd<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
/// Decode an API request as Go's `json.Unmarshal` does: a `null` member of any object, at any
/// depth, leaves the field as it was (absent). Clients (the v2 Python packages) send
/// `{"subjects_filter": null, "offset": null}` and the like. Except in the fields of
/// nats-server's enum types (`ENUM_FIELDS`), whose decoders refuse `null` (10025).
pub fn from_json<T: serde::de::DeserializeOwned>(p: &[u8]) -> serde_json::Result<T> {
    let mut v: serde_json::Value = serde_json::from_slice(p)?;
    drop_nulls(&mut v);
    T::deserialize(v)
}

/// Stream and consumer fields of nats-server's enum types (retention, discard, storage;
/// deliver, ack and replay policies).
pub const ENUM_FIELDS: [&str; 6] = [
    "retention",
    "discard",
    "storage",
    "deliver_policy",
    "ack_policy",
    "replay_policy",
];

fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|k, x| !x.is_null() || ENUM_FIELDS.contains(&k.as_str()));
            m.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero(v: &i64) -> bool {
    *v == 0
}
fn is_zero_u(v: &u64) -> bool {
    *v == 0
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Retention {
    #[default]
    Limits,
    Interest,
    Workqueue,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DiscardPolicy {
    #[default]
    Old,
    New,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    #[default]
    File,
    Memory,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StreamConfig {
    #[serde(default, deserialize_with = "nd")]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "Option::is_none"
    )]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub subjects: Vec<String>,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub retention: Retention,
    #[serde(default, deserialize_with = "nd")]
    pub max_consumers: i64,
    #[serde(default, deserialize_with = "nd")]
    pub max_msgs: i64,
    #[serde(default, deserialize_with = "nd")]
    pub max_bytes: i64,
    #[serde(default, deserialize_with = "nd")]
    pub max_age: i64,
    #[serde(default, deserialize_with = "nd")]
    pub max_msgs_per_subject: i64,
    #[serde(default, deserialize_with = "nd")]
    pub max_msg_size: i32,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub discard: DiscardPolicy,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub storage: Storage,
    #[serde(default, deserialize_with = "nd")]
    pub num_replicas: i64,
    /// The stream template that created the stream (nats-server's `template_owner`).
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub template_owner: String,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub no_ack: bool,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub duplicate_window: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<RePublish>,
    #[serde(default, deserialize_with = "nd")]
    pub allow_direct: bool,
    #[serde(default, deserialize_with = "nd")]
    pub mirror_direct: bool,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub discard_new_per_subject: bool,
    #[serde(default, deserialize_with = "nd")]
    pub sealed: bool,
    #[serde(default, deserialize_with = "nd")]
    pub deny_delete: bool,
    #[serde(default, deserialize_with = "nd")]
    pub deny_purge: bool,
    #[serde(default, deserialize_with = "nd")]
    pub allow_rollup_hdrs: bool,
}

/// A stream's `republish`: every stored message whose subject matches `src` is also
/// published on `dest` (mapped), with `Nats-Stream`/`Nats-Subject`/`Nats-Sequence`/
/// `Nats-Last-Sequence` headers (and only the headers plus `Nats-Msg-Size` with
/// `headers_only`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RePublish {
    #[serde(default, deserialize_with = "nd")]
    pub src: String,
    #[serde(default, deserialize_with = "nd")]
    pub dest: String,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub headers_only: bool,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DeliverPolicy {
    #[default]
    All,
    Last,
    New,
    ByStartSequence,
    ByStartTime,
    LastPerSubject,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AckPolicy {
    #[default]
    None,
    All,
    Explicit,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReplayPolicy {
    #[default]
    Instant,
    Original,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ConsumerConfig {
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub durable_name: String,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub deliver_policy: DeliverPolicy,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero_u")]
    pub opt_start_seq: u64,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "Option::is_none"
    )]
    pub opt_start_time: Option<String>,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub ack_policy: AckPolicy,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub ack_wait: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_deliver: i64,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub backoff: Vec<i64>,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter_subject: String,
    /// `null` is invalid JSON here, as nats-server's enum types say.
    #[serde(default)]
    pub replay_policy: ReplayPolicy,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero_u")]
    pub rate_limit_bps: u64,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub sample_freq: String,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_waiting: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_ack_pending: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub idle_heartbeat: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub flow_control: bool,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub headers_only: bool,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_batch: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_expires: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_bytes: i64,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub deliver_subject: String,
    #[serde(
        default,
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub deliver_group: String,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub inactive_threshold: i64,
    #[serde(default, deserialize_with = "nd")]
    pub num_replicas: i64,
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub mem_storage: bool,
    /// A server's own consumer for a mirror or source elsewhere (nats-server's `direct`):
    /// not listed and not counted.
    #[serde(default, deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub direct: bool,
}

/// An API error as nats-server writes it: HTTP-like `code`, JetStream `err_code`, text.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub err_code: u16,
    pub description: String,
}

impl ApiError {
    pub fn new(code: u16, err_code: u16, description: impl Into<String>) -> ApiError {
        ApiError {
            code,
            err_code,
            description: description.into(),
        }
    }
    pub fn invalid_json() -> ApiError {
        ApiError::new(400, 10025, "invalid JSON")
    }
    pub fn stream_not_found() -> ApiError {
        ApiError::new(404, 10059, "stream not found")
    }
    pub fn consumer_not_found() -> ApiError {
        ApiError::new(404, 10014, "consumer not found")
    }
    pub fn stream_mismatch() -> ApiError {
        ApiError::new(400, 10056, "stream name in subject does not match request")
    }
    /// nats-server's `NewJSStreamInvalidConfigError` (and update errors).
    pub fn stream_config(desc: impl Into<String>) -> ApiError {
        ApiError::new(500, 10052, desc)
    }
    pub fn replicas() -> ApiError {
        ApiError::new(
            500,
            10074,
            "replicas > 1 not supported in non-clustered mode",
        )
    }
    pub fn no_message() -> ApiError {
        ApiError::new(404, 10037, "no message found")
    }
    pub fn sealed() -> ApiError {
        ApiError::new(400, 10109, "invalid operation on sealed stream")
    }
    pub fn bad_request() -> ApiError {
        ApiError::new(400, 10003, "bad request")
    }
    /// `NewJSConsumerCreateError`.
    pub fn consumer_create(desc: impl Into<String>) -> ApiError {
        ApiError::new(500, 10012, desc)
    }
}

/// A JSON object built field by field in a fixed order (nats-server's field order), each
/// value serialized on its own (so nested structs keep their declared order too).
pub struct Obj(String);

impl Obj {
    pub fn typed(t: &str) -> Obj {
        let mut o = Obj(String::from("{"));
        o.field("type", &format!("io.nats.jetstream.api.v1.{t}"));
        o
    }
    pub fn new() -> Obj {
        Obj(String::from("{"))
    }
    pub fn field<T: Serialize + ?Sized>(&mut self, k: &str, v: &T) -> &mut Obj {
        let json = serde_json::to_string(v).unwrap_or_else(|e| {
            tracing::error!("JetStream API: field {k} not encoded: {e}");
            "null".into()
        });
        self.raw(k, &go_escape(json))
    }
    pub fn raw(&mut self, k: &str, json: &str) -> &mut Obj {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        let _ = write!(self.0, "\"{k}\":{json}");
        self
    }
    pub fn done(&mut self) -> String {
        let mut s = std::mem::take(&mut self.0);
        s.push('}');
        s
    }
}

impl Default for Obj {
    fn default() -> Self {
        Obj::new()
    }
}

/// Go's encoding/json escapes `<`, `>` and `&` (they can only occur inside strings).
pub fn go_escape(json: String) -> String {
    if !json.contains(['<', '>', '&']) {
        return json;
    }
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Unix nanoseconds now.
pub fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos().min(i64::MAX as u128) as i64)
        .unwrap_or(0)
}

/// Go's RFC3339Nano of unix nanos; 0 is Go's zero time `0001-01-01T00:00:00Z`.
pub fn time_str(nanos: i64) -> String {
    if nanos <= 0 {
        return "0001-01-01T00:00:00Z".into();
    }
    crate::util::time::rfc3339_nano(UNIX_EPOCH + std::time::Duration::from_nanos(nanos as u64))
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parse an RFC 3339 time (`2026-11-29T12:07:11.77Z`, `…+01:00`) into unix nanos.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let frac = &s[start..i];
        if frac.is_empty() {
            return None;
        }
        let mut f = frac.chars().take(9).collect::<String>();
        while f.len() < 9 {
            f.push('0');
        }
        nanos = f.parse().ok()?;
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(c @ (b'+' | b'-')) if i + 6 == b.len() => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let o = oh * 3600 + om * 60;
            if *c == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset;
    // Beyond what unix nanos hold (year 2262): the farthest time there is.
    Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// The value of header `key` in a NATS header block (exact key, as nats-server's lookup).
pub fn header<'a>(hdr: Option<&'a [u8]>, key: &str) -> Option<&'a str> {
    let h = std::str::from_utf8(hdr?).ok()?;
    for line in h.split("\r\n").skip(1) {
        if let Some((k, v)) = line.split_once(':') {
            if k == key {
                return Some(v.trim());
            }
        }
    }
    None
}

/// A header block with `extra` lines (`Key: value`) appended to `hdr` (or a new block).
pub fn with_headers(hdr: Option<&[u8]>, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut out = match hdr {
        Some(h) if h.ends_with(b"\r\n\r\n") => h[..h.len() - 2].to_vec(),
        _ => b"NATS/1.0\r\n".to_vec(),
    };
    for (k, v) in extra {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A status-only header block: `NATS/1.0 404 No Messages` plus `extra` lines.
pub fn status_header(status: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("NATS/1.0 {status}\r\n").into_bytes();
    for (k, v) in extra {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A stream or consumer name nats-server accepts: non-empty, no `.`, `*`, `>`, whitespace.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && !n
            .chars()
            .any(|c| matches!(c, '.' | '*' | '>' | ' ' | '\t' | '\r' | '\n' | '/' | '\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        let n = parse_time("2026-11-29T12:07:11.772030128Z").unwrap();
        assert_eq!(time_str(n), "2026-11-29T12:07:11.772030128Z");
        assert_eq!(time_str(0), "0001-01-01T00:00:00Z");
        assert_eq!(
            parse_time("2026-11-29T13:07:11+01:00"),
            parse_time("2026-11-29T12:07:11Z")
        );
        assert!(parse_time("nope").is_none());
    }

    #[test]
    fn headers() {
        let h = b"NATS/1.0\r\nNats-Msg-Id: x1\r\nA: b\r\n\r\n";
        assert_eq!(header(Some(h), "Nats-Msg-Id"), Some("x1"));
        assert_eq!(header(Some(h), "B"), None);
        let h2 = with_headers(Some(h), &[("Nats-Msg-Size", "3")]);
        assert_eq!(header(Some(&h2), "Nats-Msg-Size"), Some("3"));
        assert!(h2.ends_with(b"\r\n\r\n"));
    }

    #[test]
    fn configs_parse_like_go() {
        let c: StreamConfig =
            serde_json::from_str(r#"{"name":"S","subjects":null,"bogus":1,"max_age":5}"#).unwrap();
        assert_eq!((c.name.as_str(), c.max_age), ("S", 5));
        assert!(serde_json::from_str::<StreamConfig>(r#"{"storage":"bogus"}"#).is_err());
        let c: ConsumerConfig =
            serde_json::from_str(r#"{"durable_name":"D","ack_policy":"explicit"}"#).unwrap();
        assert_eq!(c.ack_policy, AckPolicy::Explicit);
    }
}
