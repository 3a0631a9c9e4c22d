//! JetStream across a leaf link, as nats-server 2.15.1 (docs/nats-server-behaviour.md §33):
//! `$JS.API.>` (and `$KV.>`, `$OBJ.>`) never cross, so each side's JetStream answers only its
//! own clients; the other side's is reached by its domain, `$JS.<domain>.API.>`. natsd both
//! ends, and with nats-server 2.15.1 as hub and as leaf.

mod common;

use common::leaf::{go_hub_natsd_leaf, natsd_hub_go_leaf, natsd_js_pair};

const SUITE: &str = "leafnode_js";
use common::natsserver;
use common::Raw;

/// Request `subject` with `body` from `c` (inbox `_INBOX.<tag>`); returns every answer that
/// came before a later request through the same link (`barrier`, a subject answered on the
/// far side) was answered: a second answer from the far side would have come before it.
async fn answers(c: &mut Raw, tag: &str, subject: &str, body: &str, barrier: &str) -> Vec<String> {
    c.send(&format!(
        "SUB _INBOX.{tag} {tag}1\r\nSUB _INBOX.{tag}b {tag}2\r\n"
    ))
    .await;
    c.send(&format!(
        "PUB {subject} _INBOX.{tag} {}\r\n{body}\r\n",
        body.len()
    ))
    .await;
    // The barrier goes out once the first answer is in (late probe answers are skipped).
    let (ours, theirs) = (format!("_INBOX.{tag}"), format!("_INBOX.{tag}b"));
    let mut got = Vec::new();
    while got.is_empty() {
        let (s, _, _, p) = c.msg().await;
        if s == ours {
            got.push(String::from_utf8_lossy(&p).into_owned());
        }
    }
    c.send(&format!("PUB {barrier} {theirs} 0\r\n\r\n")).await;
    loop {
        let (s, _, _, p) = c.msg().await;
        if s == theirs {
            return got;
        }
        if s == ours {
            got.push(String::from_utf8_lossy(&p).into_owned());
        }
    }
}

/// The one answer to a request, checked to be the only one.
async fn only_answer(c: &mut Raw, tag: &str, subject: &str, body: &str, barrier: &str) -> String {
    let mut a = answers(c, tag, subject, body, barrier).await;
    assert_eq!(a.len(), 1, "{subject}: {a:?}");
    a.remove(0)
}

fn stream(name: &str) -> String {
    format!(
        "{{\"name\":\"{name}\",\"subjects\":[\"{}.>\"]}}",
        name.to_lowercase()
    )
}

/// `c` on the leaf, `h` on the hub (domain `hub`; the leaf's is `leaf`): creates stream L on
/// the leaf and H on the hub from the leaf, then checks each side lists its own only.
async fn streams_stay_in_their_domain(h: &mut Raw, l: &mut Raw) {
    // The hub's domain API must have crossed first (its interest reaches the leaf).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        l.send("SUB _INBOX.probe p1\r\nPUB $JS.hub.API.INFO _INBOX.probe 0\r\n\r\n")
            .await;
        let got = l.sync().await.contains("MSG _INBOX.probe");
        l.send("UNSUB p1\r\n").await;
        if got {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the hub's domain API never reached the leaf"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    l.sync().await;
    let barrier = "$JS.hub.API.INFO";
    let a = only_answer(l, "c1", "$JS.API.STREAM.CREATE.L", &stream("L"), barrier).await;
    assert!(a.contains("\"name\":\"L\""), "{a}");
    let a = only_answer(
        l,
        "c2",
        "$JS.hub.API.STREAM.CREATE.H",
        &stream("H"),
        barrier,
    )
    .await;
    assert!(a.contains("\"name\":\"H\""), "{a}");
    let a = only_answer(l, "n1", "$JS.API.STREAM.NAMES", "", barrier).await;
    assert!(a.contains("[\"L\"]"), "the leaf lists L alone: {a}");
    let a = only_answer(l, "n2", "$JS.hub.API.STREAM.NAMES", "", barrier).await;
    assert!(a.contains("[\"H\"]"), "the hub lists H alone: {a}");
    let a = only_answer(h, "n3", "$JS.API.STREAM.NAMES", "", "$JS.hub.API.INFO").await;
    assert!(a.contains("[\"H\"]"), "the hub's own client: H alone: {a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sides_jetstream_answers_its_own_clients() {
    let (hub, leaf, _) = natsd_js_pair(SUITE, "natsd").await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    streams_stay_in_their_domain(&mut h, &mut l).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_of_a_nats_server_215_hub_keeps_its_jetstream_apart() {
    let bin = natsserver::assert_installed_215();
    let (go, leaf) = go_hub_natsd_leaf(&bin, SUITE, "hub215").await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    streams_stay_in_their_domain(&mut h, &mut l).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_leaf_of_a_natsd_hub_keeps_its_jetstream_apart() {
    let bin = natsserver::assert_installed_215();
    let (hub, go) = natsd_hub_go_leaf(&bin, SUITE, "leaf215").await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    streams_stay_in_their_domain(&mut h, &mut l).await;
}
