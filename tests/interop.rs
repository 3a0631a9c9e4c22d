//! Mixed clusters of natsd and Debian's real nats-server (installed by `.ci/run`): they form
//! one full mesh through gossip and pass pub/sub, queues (exactly once), headers and
//! request/reply in every direction. Never skipped: a missing nats-server is a failure.

mod common;

use common::cluster::{node_opts as natsd_opts, route_port, routes};
use common::natsserver::{self, NatsServer};
use common::traffic::{check_requests, check_traffic};
use common::{http_json, start, wait_for};

/// A real nats-server child process, killed on drop.
type Go = NatsServer;

fn go_server(name: &str, seed: Option<u16>) -> Go {
    natsserver::clustered(name, seed, false)
}

async fn go_routes(g: &Go) -> u64 {
    http_json(g.http, "/routez").await["num_routes"]
        .as_u64()
        .unwrap_or(0)
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_natsd_and_one_nats_server_form_one_cluster() {
    let a = start(natsd_opts("rust-a", None)).await;
    let seed = route_port(&a);
    let g = go_server("go-b", Some(seed));
    let c = start(natsd_opts("rust-c", Some(seed))).await;
    wait_for("full mesh", || {
        let g = &g;
        let (ra, rc) = (routes(&a), routes(&c));
        async move { ra == 2 && rc == 2 && go_routes(g).await == 2 }
    })
    .await;
    let addrs = [a.client_addr(), g.client, c.client_addr()];
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    a.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_natsd_and_two_nats_servers_form_one_cluster() {
    let g1 = go_server("go-a", None);
    let r = start(natsd_opts("rust-b", Some(g1.route_port))).await;
    let g2 = go_server("go-c", Some(g1.route_port));
    wait_for("full mesh", || {
        let (g1, g2) = (&g1, &g2);
        let rr = routes(&r);
        async move { rr == 2 && go_routes(g1).await == 2 && go_routes(g2).await == 2 }
    })
    .await;
    let addrs = [g1.client, r.client_addr(), g2.client];
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    r.shutdown().await;
}
