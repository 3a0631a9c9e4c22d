//! `/healthz` with nats-server 2.15.1's parameters (`js-enabled-only`, `js-server-only`,
//! `js-meta-only`, `details`, `account`, `stream`, `consumer`), side by side with 2.15.1: the
//! same status and the same body for every query, with and without JetStream. The Helm chart's
//! probes use the first two; tools ask after one stream or consumer with the others.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use common::binary::tmp_dir;
use common::natsserver::{self, Wait};
use common::{http_get, start, start_monitored};
use natsd::config::{JetStreamOpts, Options};
use std::net::SocketAddr;

const QUERIES: &[&str] = &[
    "",
    "?js-enabled-only=true",
    "?js-server-only=true",
    "?js-meta-only=true",
    "?details=true",
    "?js-enabled=true",
    "?js-enabled-only=1",
    "?js-enabled-only=False",
    "?js-enabled-only=bogus",
    "?js-meta-only=no&details=bogus",
    "?details=yes",
    "?stream=S",
    "?stream=S&details=true",
    "?account=$G&consumer=C",
    "?account=$G&consumer=C&details=true",
    "?account=$G",
    "?account=NOPE",
    "?account=NOPE&details=true",
    "?js-enabled-only=true&account=NOPE",
    "?js-server-only=true&account=NOPE",
    "?account=$G&stream=S",
    "?account=$G&stream=X",
    "?account=$G&stream=X&details=true",
    "?account=$G&stream=S&consumer=C",
    "?account=$G&stream=S&consumer=Z",
    "?details=t&account=$G&stream=S&consumer=Z",
    "?account=",
    "?js-meta-only=true&account=NOPE",
];

/// Every query's (status, body) at the monitor `http`.
async fn answers(http: SocketAddr) -> Vec<(String, u16, String)> {
    let mut out = Vec::new();
    for q in QUERIES {
        let (code, body) = http_get(http, &format!("/healthz{q}")).await;
        out.push((q.to_string(), code, body.trim_end().to_string()));
    }
    out
}

/// Stream `S` with consumer `C` in `$G`.
async fn make_stream(client: SocketAddr) {
    let nc = async_nats::connect(client.to_string())
        .await
        .expect("connect");
    let js = jetstream::new(nc);
    let s = js
        .create_stream(stream::Config {
            name: "S".into(),
            subjects: vec!["s.>".into()],
            ..Default::default()
        })
        .await
        .expect("stream");
    s.create_consumer(consumer::pull::Config {
        durable_name: Some("C".into()),
        ..Default::default()
    })
    .await
    .expect("consumer");
}

fn go(js: Option<&std::path::Path>) -> natsserver::NatsServer {
    let mut args: Vec<String> = ["-a", "127.0.0.1", "-p", "-1", "-m", "-1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(d) = js {
        args.extend(["-js".to_string(), "-sd".into(), d.display().to_string()]);
    }
    natsserver::launch_bin(
        &natsserver::assert_installed_215(),
        &args,
        Wait {
            client: true,
            ..Wait::READY
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_as_nats_server_215_with_jetstream() {
    let dir = tmp_dir("healthz", "js");
    let g = go(Some(&dir.join("go")));
    let n = start(Options {
        http_port: Some(0),
        jetstream: Some(JetStreamOpts {
            store_dir: Some(dir.join("natsd")),
            ..Default::default()
        }),
        ..Options::local()
    })
    .await;
    let http = n.http_addr().expect("monitor");
    // Before any stream, `$G` is not a JetStream account yet (404 on both).
    let before = (answers(g.http).await, answers(http).await);
    assert_eq!(before.1, before.0);
    make_stream(g.client).await;
    make_stream(n.client_addr()).await;
    let (want, got) = (answers(g.http).await, answers(http).await);
    assert_eq!(got, want);
    // What the chart's probes and a stream check rely on, spelled out.
    let find = |q: &str| got.iter().find(|a| a.0 == q).expect("query").clone();
    assert_eq!(find("?js-enabled-only=true").1, 200);
    assert_eq!(find("?account=$G&stream=X").1, 404);
    assert_eq!(find("?js-enabled-only=bogus").1, 400);
    n.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_as_nats_server_215_without_jetstream() {
    let g = go(None);
    let n = start_monitored().await;
    let http = n.http_addr().expect("monitor");
    assert_eq!(answers(http).await, answers(g.http).await);
    n.shutdown().await;
}

/// One node of a 3-node JetStream cluster whose peers never come: no meta leader yet. The
/// chart's startup probe (`/healthz`) and the meta checks wait (503, "still recovering"),
/// its liveness (`js-enabled-only`) and readiness (`js-server-only`) probes pass — as
/// nats-server 2.15.1 answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_in_a_jetstream_cluster_without_a_meta_leader_answers_as_nats_server_215() {
    let dir = tmp_dir("healthz", "jsc");
    let (p1, p2) = (common::free_port(), common::free_port());
    let conf = |name: &str| {
        format!(
            "server_name: {name}\njetstream {{ store_dir: \"{}\" }}\n\
             cluster {{ name: c, listen: \"127.0.0.1:-1\", routes: \
             [\"nats-route://127.0.0.1:{p1}\", \"nats-route://127.0.0.1:{p2}\"] }}\n",
            dir.join(name).display()
        )
    };
    let g = natsserver::standalone_conf_215(
        "healthz-jsc",
        "go",
        &format!("http_port: -1\n{}", conf("go")),
    );
    let mut o = common::conf_opts(&conf("natsd"));
    o.http_port = Some(0);
    let n = start(o).await;
    let http = n.http_addr().expect("monitor");
    let q = [
        "",
        "?js-meta-only=true",
        "?details=true",
        "?account=$G",
        "?js-enabled-only=true",
        "?js-server-only=true",
    ];
    for q in q {
        let want = http_get(g.http, &format!("/healthz{q}")).await;
        let got = http_get(http, &format!("/healthz{q}")).await;
        assert_eq!(
            (got.0, got.1.trim_end()),
            (want.0, want.1.trim_end()),
            "/healthz{q}"
        );
    }
    let (code, body) = http_get(http, "/healthz").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("JetStream is still recovering meta layer"),
        "{body}"
    );
    n.shutdown().await;
}
