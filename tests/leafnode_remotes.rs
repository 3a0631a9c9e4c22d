//! A leafnode remote's connection options, as nats-server reads them (issue 18):
//! `no_randomize` (the URLs in the written order; shuffled otherwise), `disabled` (never
//! dialled), `first_info_timeout` (how long the leaf waits for the hub's INFO) and
//! `ignore_discovered_servers` (never the hub cluster's `leafnode_urls`, only ours).

mod common;

use common::cluster::{mesh_with, node_opts};
use common::leaf::{hub_opts, leaf_port, links, wait_links};
use common::start;
use natsd::config::leaf::{LeafOpts, RemoteLeafOpts};
use natsd::{Options, Server};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

fn url(s: &Server) -> String {
    format!("nats-leaf://127.0.0.1:{}", leaf_port(s))
}

/// A leaf with these remotes, retrying after `retry`.
fn leaf(remotes: Vec<RemoteLeafOpts>, retry: Duration) -> Options {
    Options {
        leafnodes: Some(LeafOpts {
            reconnect: Some(retry),
            remotes,
            ..LeafOpts::default()
        }),
        ..Options::local()
    }
}

/// `s` keeps `n` leaf connections for `d` (a "nothing more happens" check, bounded).
async fn holds(s: &Server, n: usize, d: Duration, what: &str) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        assert_eq!(links(s), n, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_randomize_dials_the_first_url_first() {
    let h1 = start(hub_opts(Options::local())).await;
    let h2 = start(hub_opts(Options::local())).await;
    // Shuffled, four leaves would all pick h1 one time in 16.
    let mut leaves = Vec::new();
    for _ in 0..4 {
        let r = RemoteLeafOpts {
            urls: vec![url(&h1), url(&h2)],
            no_randomize: true,
            ..RemoteLeafOpts::default()
        };
        leaves.push(start(leaf(vec![r], Duration::from_millis(100))).await);
    }
    wait_links(&h1, 4).await;
    assert_eq!(links(&h2), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_remote_is_never_dialled() {
    let off = start(hub_opts(Options::local())).await;
    let on = start(hub_opts(Options::local())).await;
    let remotes = vec![
        RemoteLeafOpts {
            urls: vec![url(&off)],
            disabled: true,
            ..RemoteLeafOpts::default()
        },
        RemoteLeafOpts {
            urls: vec![url(&on)],
            ..RemoteLeafOpts::default()
        },
    ];
    let _leaf = start(leaf(remotes, Duration::from_millis(100))).await;
    // Both dial loops would have started together: the enabled one got through.
    wait_links(&on, 1).await;
    holds(&off, 0, Duration::from_secs(1), "the disabled remote's hub").await;
}

/// A proxy in front of `hub` that reaches it only `delay` after a leaf connects: the leaf
/// waits that long for the hub's first INFO.
async fn slow_proxy(hub: u16, delay: Duration) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut leaf, _)) = l.accept().await {
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let Ok(mut h) = TcpStream::connect(("127.0.0.1", hub)).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut leaf, &mut h).await;
                let _ = h.shutdown().await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_info_timeout_lets_a_slow_hub_answer() {
    let hub = start(hub_opts(Options::local())).await;
    // 3 s: longer than the default wait (2 s), shorter than the configured one.
    let port = slow_proxy(leaf_port(&hub), Duration::from_secs(3)).await;
    let r = RemoteLeafOpts {
        urls: vec![format!("nats-leaf://127.0.0.1:{port}")],
        first_info_timeout: Some(Duration::from_secs(20)),
        ..RemoteLeafOpts::default()
    };
    let leaf = start(leaf(vec![r], Duration::from_millis(100))).await;
    wait_links(&hub, 1).await;
    wait_links(&leaf, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_discovered_servers_keeps_to_the_configured_urls() {
    let nodes = mesh_with(2, |name, seed| hub_opts(node_opts(name, seed))).await;
    let mut nodes = nodes.into_iter();
    let (Some(a), Some(b)) = (nodes.next(), nodes.next()) else {
        panic!("two nodes");
    };
    let r = RemoteLeafOpts {
        urls: vec![url(&a)],
        ignore_discovered: true,
        ..RemoteLeafOpts::default()
    };
    // Retrying every 200 ms: B (which A's INFO named) would be tried within the wait below.
    let leaf = start(leaf(vec![r], Duration::from_millis(200))).await;
    wait_links(&a, 1).await;
    a.shutdown().await;
    wait_links(&leaf, 0).await;
    holds(
        &b,
        0,
        Duration::from_secs(2),
        "the node the leaf only learned of",
    )
    .await;
}
