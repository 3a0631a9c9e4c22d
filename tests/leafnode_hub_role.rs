//! A remote with `hub: true`: the server that dials acts as the hub of the connection (its
//! CONNECT says `"is_hub": true`, the server it dials becomes its spoke). Seen from a cluster
//! X–Y whose X dials a standalone S that way: S's clients reach Y's subscribers and Y's
//! clients reach S's, through X — which a leaf (a spoke) would not do, since a spoke tells its
//! hub only of its own clients' interest and never hands its hub's messages to its routes.
//! natsd both ends, a nats-server 2.15.1 S, and a nats-server 2.15.1 cluster dialling a natsd S.

mod common;

use common::cluster::{cluster_opts, node_opts, route_port, routes};
use common::leaf::{go_server, hub_opts, leaf_port, wait_links};
use common::natsserver;
use common::{free_port, start, until_delivered, wait_for, Raw};
use natsd::config::leaf::{LeafOpts, RemoteLeafOpts};
use natsd::Options;
use std::net::SocketAddr;

/// Node `name` of cluster C1 (seeded to `seed`), dialling the leafnode port `s_port` with
/// `hub: true`.
fn hub_role_node(name: &str, seed: Option<u16>, s_port: Option<u16>) -> Options {
    Options {
        cluster: Some(cluster_opts(seed)),
        leafnodes: s_port.map(|p| LeafOpts {
            reconnect: Some(std::time::Duration::from_millis(100)),
            remotes: vec![RemoteLeafOpts {
                urls: vec![format!("nats-leaf://127.0.0.1:{p}")],
                hub: true,
                ..RemoteLeafOpts::default()
            }],
            ..LeafOpts::default()
        }),
        ..node_opts(name, seed)
    }
}

/// Messages flow both ways between a client of S and a client of Y.
async fn s_and_y_reach_each_other(s: SocketAddr, y: SocketAddr) {
    let mut on_s = Raw::client_at(s).await;
    let mut on_y = Raw::client_at(y).await;
    on_y.send("SUB to.y 1\r\n").await;
    until_delivered(&mut on_s, &mut on_y, "to.y").await;
    on_s.send("SUB to.s 1\r\n").await;
    until_delivered(&mut on_y, &mut on_s, "to.s").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_cluster_is_the_hub_of_the_natsd_server_it_dials() {
    let s = start(hub_opts(Options::local())).await;
    let x = start(hub_role_node("x", None, Some(leaf_port(&s)))).await;
    let y = start(hub_role_node("y", Some(route_port(&x)), None)).await;
    wait_for("the route", || {
        let ok = routes(&y) == 1;
        async move { ok }
    })
    .await;
    wait_links(&s, 1).await;
    s_and_y_reach_each_other(s.client_addr(), y.client_addr()).await;
    // Roles as nats-server reports them: S is the spoke, X the hub.
    let spoke = |srv: &natsd::Server| {
        srv.shared()
            .leafnodes
            .as_ref()
            .map(|l| l.links().iter().map(|k| k.spoke).collect::<Vec<_>>())
    };
    assert_eq!(spoke(&s), Some(vec![true]));
    assert_eq!(spoke(&x), Some(vec![false]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_cluster_is_the_hub_of_a_nats_server_215_it_dials() {
    let bin = natsserver::assert_installed_215();
    let port = free_port();
    let conf = format!("listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\" }}\n");
    let s = go_server(&bin, "leafnode_hub_role", "s215", &conf);
    let x = start(hub_role_node("x", None, Some(port))).await;
    let y = start(hub_role_node("y", Some(route_port(&x)), None)).await;
    wait_for("the route", || {
        let ok = routes(&y) == 1;
        async move { ok }
    })
    .await;
    wait_links(&x, 1).await;
    s_and_y_reach_each_other(s.client, y.client_addr()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_cluster_is_the_hub_of_the_natsd_server_it_dials() {
    let bin = natsserver::assert_installed_215();
    let s = start(hub_opts(Options::local())).await;
    let (xr, yr) = (free_port(), free_port());
    let x = go_server(
        &bin,
        "leafnode_hub_role",
        "x215",
        &format!(
            "listen: 127.0.0.1:-1\nserver_name: x\ncluster {{ name: C1, listen: \"127.0.0.1:{xr}\" }}\n\
             leafnodes {{ reconnect: 1, remotes [ {{ url: \"nats-leaf://127.0.0.1:{}\", hub: true }} ] }}\n",
            leaf_port(&s)
        ),
    );
    let y = go_server(
        &bin,
        "leafnode_hub_role",
        "y215",
        &format!(
            "listen: 127.0.0.1:-1\nserver_name: y\ncluster {{ name: C1, listen: \"127.0.0.1:{yr}\", \
             routes: [\"nats-route://127.0.0.1:{xr}\"] }}\n"
        ),
    );
    wait_links(&s, 1).await;
    let _ = &x;
    s_and_y_reach_each_other(s.client_addr(), y.client).await;
    let spoke = s
        .shared()
        .leafnodes
        .as_ref()
        .map(|l| l.links().iter().map(|k| k.spoke).collect::<Vec<_>>());
    assert_eq!(spoke, Some(vec![true]), "natsd takes the spoke's role");
}
