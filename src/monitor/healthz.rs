//! `/healthz` as nats-server 2.15.1 answers it (`HandleHealthz`, `healthz` in its
//! `monitor.go`; docs/nats-server-behaviour.md section 27): the booleans `js-enabled`,
//! `js-enabled-only`, `js-server-only`, `js-meta-only` and `details` (Go's `ParseBool`; a bad
//! value is a plain-text 400 naming the first bad one, in that order), and `account`,
//! `stream`, `consumer`, checked against this server's JetStream: the Helm chart's probes
//! (`?js-enabled-only=true`, `?js-server-only=true`) and tools that ask after one stream.
//! On one node the checks are those of a single nats-server (no meta group), an account
//! counting as found once it has a stream. In a JetStream cluster, everything past
//! `js-enabled-only` first needs a known meta leader (503 with nats-server's "JetStream is
//! still recovering meta layer" before one was ever known, "JetStream has not established
//! contact with a meta leader" after), and `js-meta-only` stops there.

use crate::server::ServerShared;
use axum::http::StatusCode;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Serialize, Debug, Default)]
pub struct Health {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `details=true`: one entry per problem instead of `error`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<HealthError>,
}

/// One problem, as nats-server's `HealthzError` writes it.
#[derive(Serialize, Debug, Default, PartialEq, Eq)]
pub struct HealthError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stream: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub consumer: String,
    pub error: String,
}

/// What a health check asks (nats-server's `HealthzOptions`).
#[derive(Debug, Default, Clone)]
pub struct HealthOpts {
    pub js_enabled_only: bool,
    pub js_server_only: bool,
    pub js_meta_only: bool,
    pub details: bool,
    pub account: String,
    pub stream: String,
    pub consumer: String,
}

impl HealthOpts {
    /// From the query; `Err` is the 400's text (nats-server's `decodeBool`).
    pub fn parse(p: &HashMap<String, String>) -> Result<HealthOpts, String> {
        let b = |k: &str| -> Result<bool, String> {
            match p.get(k).map(String::as_str).unwrap_or("") {
                "" => Ok(false),
                "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
                "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
                v => Err(format!(
                    "Error decoding boolean for '{k}': strconv.ParseBool: parsing {v:?}: invalid syntax"
                )),
            }
        };
        let js_enabled = b("js-enabled")?;
        if js_enabled {
            tracing::warn!("Healthcheck: js-enabled deprecated, use js-enabled-only instead");
        }
        let js_enabled_only = b("js-enabled-only")? || js_enabled;
        let js_server_only = b("js-server-only")?;
        let js_meta_only = b("js-meta-only")?;
        let details = b("details")?;
        let s = |k: &str| p.get(k).cloned().unwrap_or_default();
        Ok(HealthOpts {
            js_enabled_only,
            js_server_only,
            js_meta_only,
            details,
            account: s("account"),
            stream: s("stream"),
            consumer: s("consumer"),
        })
    }
}

impl Health {
    fn ok() -> Health {
        Health {
            status: "ok",
            ..Health::default()
        }
    }

    /// A failed check: `error` (or, with details, one `errors` entry) and its status.
    fn fail(
        details: bool,
        status: &'static str,
        code: StatusCode,
        e: HealthError,
    ) -> (Health, StatusCode) {
        let h = if details {
            Health {
                status: "error",
                errors: vec![e],
                ..Health::default()
            }
        } else {
            Health {
                status,
                error: Some(e.error),
                ..Health::default()
            }
        };
        (h, code)
    }
}

/// The answer to a health check and its HTTP status.
pub fn health(srv: &ServerShared, o: &HealthOpts) -> (Health, StatusCode) {
    let bad = |what: &str, needs: &str| {
        let e = HealthError {
            kind: "BAD_REQUEST",
            error: format!("{what:?} must not be empty when checking {needs} health"),
            ..HealthError::default()
        };
        Health::fail(o.details, "error", StatusCode::BAD_REQUEST, e)
    };
    if o.account.is_empty() && !o.stream.is_empty() {
        return bad("account", "stream");
    }
    if o.stream.is_empty() && !o.consumer.is_empty() {
        return bad("stream", "consumer");
    }
    if srv.is_shutting_down() {
        let h = Health {
            status: "unavailable",
            status_code: Some(503),
            error: Some("server is shutting down".into()),
            ..Health::default()
        };
        return (h, StatusCode::SERVICE_UNAVAILABLE);
    }
    if srv.is_lame_duck() {
        // The client listener is closed: nats-server 2.9.10's exact answer and log line.
        let msg = "failed to be ready for connections after 1ms: server";
        let h = Health {
            status: "error",
            error: Some(msg.into()),
            ..Health::default()
        };
        return (h, StatusCode::SERVICE_UNAVAILABLE);
    }
    if o.js_server_only || srv.opts.jetstream.is_none() {
        return (Health::ok(), StatusCode::OK);
    }
    let Some(js) = srv.jetstream.get() else {
        let e = HealthError {
            kind: "JETSTREAM",
            error: "JetStream not enabled (10076)".into(),
            ..HealthError::default()
        };
        return Health::fail(o.details, "unavailable", StatusCode::SERVICE_UNAVAILABLE, e);
    };
    if o.js_enabled_only {
        return (Health::ok(), StatusCode::OK);
    }
    let cluster = js.engine().cluster.clone();
    let clustered = cluster.is_some();
    if let Some(msg) = cluster.and_then(|c| c.meta_health()) {
        let e = HealthError {
            kind: "JETSTREAM",
            error: msg.into(),
            ..HealthError::default()
        };
        return Health::fail(o.details, "unavailable", StatusCode::SERVICE_UNAVAILABLE, e);
    }
    // `js-meta-only` stops after the meta check; a single server has none and goes on.
    if (clustered && o.js_meta_only) || o.account.is_empty() {
        return (Health::ok(), StatusCode::OK);
    }
    let not_found =
        |e: HealthError| Health::fail(o.details, "unavailable", StatusCode::NOT_FOUND, e);
    let engine = js.engine();
    let Some(ja) = engine
        .accounts
        .get(&o.account)
        .filter(|a| !a.streams.is_empty())
    else {
        return not_found(HealthError {
            kind: "ACCOUNT",
            account: o.account.clone(),
            error: format!("JetStream account {:?} not found", o.account),
            ..HealthError::default()
        });
    };
    if o.stream.is_empty() {
        return (Health::ok(), StatusCode::OK);
    }
    let Some(stream) = ja.streams.get(&o.stream) else {
        return not_found(HealthError {
            kind: "STREAM",
            account: o.account.clone(),
            stream: o.stream.clone(),
            error: format!(
                "JetStream stream {:?} not found on account {:?}",
                o.stream, o.account
            ),
            ..HealthError::default()
        });
    };
    if !o.consumer.is_empty() && !stream.consumers.contains_key(&o.consumer) {
        return not_found(HealthError {
            kind: "CONSUMER",
            account: o.account.clone(),
            stream: o.stream.clone(),
            consumer: o.consumer.clone(),
            error: format!(
                "JetStream consumer {:?} not found for stream {:?} on account {:?}",
                o.consumer, o.stream, o.account
            ),
        });
    }
    (Health::ok(), StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn booleans_as_go_parses_them_and_the_first_bad_one_named() {
        for v in ["1", "t", "T", "TRUE", "true", "True"] {
            let o = HealthOpts::parse(&q(&[("js-enabled-only", v)])).expect("true");
            assert!(o.js_enabled_only, "{v}");
        }
        let o =
            HealthOpts::parse(&q(&[("js-enabled-only", "False"), ("details", "")])).expect("false");
        assert!(!o.js_enabled_only && !o.details);
        let e = HealthOpts::parse(&q(&[("details", "bogus"), ("js-meta-only", "no")]))
            .expect_err("bad");
        assert_eq!(
            e,
            "Error decoding boolean for 'js-meta-only': strconv.ParseBool: parsing \"no\": invalid syntax"
        );
        assert!(HealthOpts::parse(&q(&[("js-enabled", "yes")])).is_err());
    }

    #[test]
    fn a_failure_is_an_error_or_with_details_an_entry() {
        let e = || HealthError {
            kind: "ACCOUNT",
            account: "A".into(),
            error: "JetStream account \"A\" not found".into(),
            ..HealthError::default()
        };
        let (h, code) = Health::fail(false, "unavailable", StatusCode::NOT_FOUND, e());
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert_eq!(
            serde_json::to_string(&h).expect("json"),
            r#"{"status":"unavailable","error":"JetStream account \"A\" not found"}"#
        );
        let (h, _) = Health::fail(true, "unavailable", StatusCode::NOT_FOUND, e());
        assert_eq!(
            serde_json::to_string(&h).expect("json"),
            r#"{"status":"error","errors":[{"type":"ACCOUNT","account":"A","error":"JetStream account \"A\" not found"}]}"#
        );
    }
}
