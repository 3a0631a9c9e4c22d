//! Fuzz the HTTP monitoring endpoints' query parsing: a request to one of `/varz`, `/connz`,
//! `/routez`, `/subsz`, `/subscriptionsz`, `/accountz`, `/accstatz`, `/leafz`, `/gatewayz`,
//! `/jsz`, `/healthz`, `/ipqueuesz` (the first byte picks it) with the rest of the input as
//! its query string, through natsd's own axum router (`natsd::monitor::router`: axum's
//! `Query` extraction, then each endpoint's parameter checks and its answer) on one running
//! server with JetStream on. Bytes a URI cannot carry are percent-encoded, `%` is kept, so
//! bad escapes reach the decoder. Asserts: the answer is 200 or 400, and a 200 without
//! `callback` is valid JSON. (`/topz` is left out: it asks the cluster and waits for
//! answers; its one parameter, `format`, is a plain match.)
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/http_query && cargo +nightly fuzz run http_query
//! fuzz/corpus/http_query fuzz/seeds/http_query -- -dict=fuzz/http_query.dict`
#![no_main]

use axum::body::Body;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tower::ServiceExt;

const ENDPOINTS: [&str; 12] = [
    "/varz",
    "/connz",
    "/routez",
    "/subsz",
    "/subscriptionsz",
    "/accountz",
    "/accstatz",
    "/leafz",
    "/gatewayz",
    "/jsz",
    "/healthz",
    "/ipqueuesz",
];

struct Fixture {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    _srv: natsd::Server,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = std::env::temp_dir().join(format!("natsd-fuzz-http-{}", std::process::id()));
        let opts = natsd::Options {
            jetstream: Some(natsd::config::JetStreamOpts {
                store_dir: Some(dir),
                ..Default::default()
            }),
            ..natsd::Options::local()
        };
        let srv = rt
            .block_on(natsd::Server::start(opts))
            .expect("server starts");
        let router = natsd::monitor::router(srv.shared().clone());
        Fixture {
            rt,
            router,
            _srv: srv,
        }
    })
}

/// `path?query` with every byte a URI's query may not hold percent-encoded (`%` kept as is).
fn uri(path: &str, query: &[u8]) -> String {
    let mut u = format!("{path}?");
    for &b in query {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b) {
            u.push(char::from(b));
        } else {
            u.push_str(&format!("%{b:02X}"));
        }
    }
    u
}

fuzz_target!(|data: &[u8]| {
    let [pick, query @ ..] = data else {
        return;
    };
    let f = fixture();
    let path = ENDPOINTS[usize::from(*pick) % ENDPOINTS.len()];
    let Ok(req) = http::Request::get(uri(path, query)).body(Body::empty()) else {
        return;
    };
    let callback = query.windows(9).any(|w| w == b"callback=");
    let (status, body) = f.rt.block_on(async {
        let resp = f.router.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, body)
    });
    // `/healthz` answers as nats-server 2.15.1: 404 for an account or stream it does not
    // know, 503 when a check fails, each with a JSON body.
    let health = path == "/healthz" && (status == 404 || status == 503);
    assert!(
        status == 200 || status == 400 || health,
        "{path}: status {status}: {}",
        String::from_utf8_lossy(&body)
    );
    if (status == 200 || health) && !callback {
        assert!(
            serde_json::from_slice::<serde_json::Value>(&body).is_ok(),
            "{path}: not JSON: {}",
            String::from_utf8_lossy(&body)
        );
    }
});
