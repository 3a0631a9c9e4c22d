//! Leafnode S2 compression as nats-server 2.10+ negotiates it (docs/nats-server-behaviour.md
//! §33): the hub's INFO names its mode; a leaf that compresses too answers with an INFO in
//! clear, then both sides' bytes are S2 streams (the hub's INFO again first, then the leaf's
//! CONNECT); a side that does not compress sends no INFO and the link stays plain, its
//! CONNECT `compress_mode` saying why. Watched through a proxy that decodes S2 with natsd's
//! own decoder; natsd in both roles, with nats-server 2.15.1 and 2.9.10.

mod common;

use common::leaf::{go_server, hub_opts, leaf_opts, leaf_port, wait_links};
use common::natsserver::{self, NatsServer};
use common::s2proxy::{lines_of, proxy, wait_log, Log, Seen};
use common::{free_port, http_addr, http_json, start, until_delivered, wait_for, Raw};
use natsd::compress::{CompressionMode, CompressionOpts};
use natsd::{Options, Server};
use std::net::SocketAddr;

fn mode(m: CompressionMode) -> CompressionOpts {
    CompressionOpts::new(m)
}

/// A natsd hub with `comp` on its leafnode listener, monitored.
async fn natsd_hub(comp: CompressionOpts) -> Server {
    let mut o = hub_opts(Options {
        http_port: Some(0),
        ..Options::local()
    });
    if let Some(l) = o.leafnodes.as_mut() {
        l.compression = comp;
    }
    start(o).await
}

/// A natsd leaf dialling `port` with `comp` on its remote (None: the default), monitored.
async fn natsd_leaf(port: u16, comp: Option<CompressionOpts>) -> Server {
    let mut o = leaf_opts(
        Options {
            http_port: Some(0),
            ..Options::local()
        },
        &format!("nats-leaf://127.0.0.1:{port}"),
    );
    if let Some(l) = o.leafnodes.as_mut() {
        l.remotes[0].compression = comp;
    }
    start(o).await
}

fn go_hub(bin: &str, test: &str, port: u16, comp: &str) -> NatsServer {
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\", compression: {comp} }}\n"
    );
    go_server(bin, "leafnode_compression", test, &conf)
}

fn go_leaf(bin: &str, test: &str, port: u16, comp: &str) -> NatsServer {
    let comp = if comp.is_empty() {
        String::new()
    } else {
        format!(", compression: {comp}")
    };
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ url: \
         \"nats-leaf://127.0.0.1:{port}\"{comp} }} ] }}\n"
    );
    go_server(bin, "leafnode_compression", test, &conf)
}

/// The mode natsd's `/leafz` shows for its one leaf connection.
async fn leafz_mode(s: &Server) -> String {
    let v = http_json(http_addr(s), "/leafz").await;
    v["leafs"][0]["compression"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Messages both ways between clients `a` and `b`, a 4 KiB compressible payload included.
async fn traffic(a: &mut Raw, b: &mut Raw) {
    b.send("SUB ab 1\r\n").await;
    until_delivered(a, b, "ab").await;
    a.send("SUB ba 1\r\n").await;
    until_delivered(b, a, "ba").await;
    let big = "natsd ".repeat(700);
    a.send(&format!("PUB ab {}\r\n{big}\r\n", big.len())).await;
    let (s, _, _, p) = b.msg().await;
    assert_eq!((s.as_str(), p.as_slice()), ("ab", big.as_bytes()));
    b.send(&format!("PUB ba {}\r\n{big}\r\n", big.len())).await;
    let (s, _, _, p) = a.msg().await;
    assert_eq!((s.as_str(), p.as_slice()), ("ba", big.as_bytes()));
}

fn first<'a>(lines: &'a [Seen], prefix: &str) -> &'a Seen {
    lines
        .iter()
        .find(|s| s.line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {lines:#?}"))
}

/// The proxied link compressed: the leaf (`>`) sent an INFO in clear naming `leaf_info`,
/// then its CONNECT (naming `leaf_mode`) compressed; the hub (`<`) its INFO in clear, then
/// again compressed.
fn compressed_exchange(log: &Log, leaf_info: &str, leaf_mode: &str) {
    wait_log(log, "the leaf's interest, compressed", |l| {
        l.iter()
            .any(|s| s.dir == '>' && s.compressed && s.line.starts_with("LS+"))
    });
    let up = lines_of(log, 0, '>');
    let info = first(&up, "INFO ");
    assert!(!info.compressed, "{info:?}");
    assert_eq!(
        common::s2proxy::info_field(&info.line, "compression"),
        Some(serde_json::json!(leaf_info)),
        "{info:?}"
    );
    let connect = first(&up, "CONNECT ");
    assert!(connect.compressed, "{connect:?}");
    assert!(
        connect
            .line
            .contains(&format!("\"compress_mode\":\"{leaf_mode}\"")),
        "{connect:?}"
    );
    let down = lines_of(log, 0, '<');
    let infos: Vec<&Seen> = down
        .iter()
        .filter(|s| s.line.starts_with("INFO "))
        .collect();
    assert!(
        infos.len() >= 2 && !infos[0].compressed && infos[1].compressed,
        "{down:#?}"
    );
}

/// The link stayed plain: no INFO from the leaf, its CONNECT naming `leaf_mode`.
fn plain_exchange(log: &Log, leaf_mode: &str) {
    wait_log(log, "the leaf's interest", |l| {
        l.iter().any(|s| s.dir == '>' && s.line.starts_with("LS+"))
    });
    let up = lines_of(log, 0, '>');
    assert!(up.iter().all(|s| !s.compressed), "{up:#?}");
    assert!(up.iter().all(|s| !s.line.starts_with("INFO ")), "{up:#?}");
    let connect = first(&up, "CONNECT ");
    assert!(
        connect
            .line
            .contains(&format!("\"compress_mode\":\"{leaf_mode}\"")),
        "{connect:?}"
    );
}

fn via_proxy(port: u16) -> (Log, u16) {
    let log = Log::default();
    let p = proxy(SocketAddr::from(([127, 0, 0, 1], port)), log.clone());
    (log, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_and_hub_compress_at_their_modes() {
    let hub = natsd_hub(mode(CompressionMode::S2Fast)).await;
    let (log, p) = via_proxy(leaf_port(&hub));
    let leaf = natsd_leaf(p, Some(mode(CompressionMode::S2Best))).await;
    wait_links(&hub, 1).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    traffic(&mut l, &mut h).await;
    compressed_exchange(&log, "s2_best", "s2_best");
    assert_eq!(leafz_mode(&hub).await, "s2_fast");
    assert_eq!(leafz_mode(&leaf).await, "s2_best");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_loopback_link_is_s2_framed_uncompressed() {
    let hub = natsd_hub(CompressionOpts::leaf_default()).await;
    let (log, p) = via_proxy(leaf_port(&hub));
    let leaf = natsd_leaf(p, None).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    traffic(&mut h, &mut l).await;
    // s2_auto picks by RTT: on loopback, S2 frames without compression; INFO says s2_auto.
    compressed_exchange(&log, "s2_auto", "s2_uncompressed");
    assert_eq!(leafz_mode(&hub).await, "s2_uncompressed");
    assert_eq!(leafz_mode(&leaf).await, "s2_uncompressed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_with_compression_off_stays_plain() {
    let hub = natsd_hub(mode(CompressionMode::S2Fast)).await;
    let (log, p) = via_proxy(leaf_port(&hub));
    let leaf = natsd_leaf(p, Some(mode(CompressionMode::Off))).await;
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    traffic(&mut h, &mut l).await;
    plain_exchange(&log, "off");
    assert_eq!(leafz_mode(&hub).await, "off");
    assert_eq!(leafz_mode(&leaf).await, "off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_of_a_nats_server_215_hub_compresses() {
    let bin = natsserver::assert_installed_215();
    let port = free_port();
    let go = go_hub(&bin, "hub215", port, "s2_fast");
    let (log, p) = via_proxy(port);
    let leaf = natsd_leaf(p, Some(mode(CompressionMode::S2Better))).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    traffic(&mut l, &mut h).await;
    compressed_exchange(&log, "s2_better", "s2_better");
    assert_eq!(leafz_mode(&leaf).await, "s2_better");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_server_215_leaf_of_a_natsd_hub_compresses() {
    let bin = natsserver::assert_installed_215();
    let hub = natsd_hub(mode(CompressionMode::S2Best)).await;
    let (log, p) = via_proxy(leaf_port(&hub));
    let go = go_leaf(&bin, "leaf215", p, "s2_fast");
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    traffic(&mut h, &mut l).await;
    compressed_exchange(&log, "s2_fast", "s2_fast");
    assert_eq!(leafz_mode(&hub).await, "s2_best");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_29_leaf_is_not_supported_and_plain() {
    natsserver::assert_installed();
    let hub = natsd_hub(mode(CompressionMode::S2Fast)).await;
    let (log, p) = via_proxy(leaf_port(&hub));
    let go = go_leaf(natsserver::NATS_SERVER, "leaf29", p, "");
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    traffic(&mut h, &mut l).await;
    wait_log(&log, "the leaf's CONNECT", |l| {
        l.iter().any(|s| s.line.starts_with("CONNECT "))
    });
    assert!(lines_of(&log, 0, '>').iter().all(|s| !s.compressed));
    wait_for("/leafz says not supported", || {
        let hub = &hub;
        async move { leafz_mode(hub).await == "not supported" }
    })
    .await;
}

#[test]
fn leafnode_compression_is_read_as_nats_server_reads_it() {
    let o = common::conf_opts(
        "leafnodes { port: -1, compression: s2_fast, remotes [ { url: \"nats://127.0.0.1:7422\", \
         compression: { mode: s2_auto, rtt_thresholds: [5ms, 20ms, 40ms] } }, \
         { url: \"nats://127.0.0.1:7423\", compression: true }, \
         { url: \"nats://127.0.0.1:7424\" } ] }",
    );
    let l = o.leafnodes.expect("leafnodes");
    assert_eq!(l.compression.mode, CompressionMode::S2Fast);
    let r0 = l.remotes[0].compression.clone().expect("set");
    assert_eq!(r0.mode, CompressionMode::S2Auto);
    assert_eq!(r0.rtt_thresholds.len(), 3);
    // `true` on a leafnode means s2_auto (s2_fast on routes); unset is the default.
    assert_eq!(
        l.remotes[1].compression.as_ref().map(|c| c.mode),
        Some(CompressionMode::S2Auto)
    );
    assert_eq!(l.remotes[2].compression, None);
    let bad = natsd::config::file::load_str("leafnodes { port: -1, compression: bogus }")
        .expect_err("a bad mode");
    assert!(
        bad.to_string()
            .contains("unsupported compression mode \"bogus\""),
        "{bad}"
    );
}

/// A client on the leaf that reads slower than the hub can send: the leaf's reader waits for
/// it (as nats-server's readers, which write to such clients themselves), the hub's
/// publisher slows down behind the link, and nothing is lost. Before, the leaf's reader ran
/// on at the link's pace (an S2 link reads in large blocks) and cut the client at its
/// `max_pending`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_on_the_leaf_slows_the_link_instead_of_being_cut() {
    use tokio::io::AsyncReadExt;
    const N: usize = 20_000;
    const PAYLOAD: usize = 1000;
    let hub = natsd_hub(CompressionOpts::leaf_default()).await;
    let mut o = leaf_opts(
        Options {
            max_pending: 4 * 1024 * 1024,
            ..Options::local()
        },
        &format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub)),
    );
    if let Some(l) = o.leafnodes.as_mut() {
        l.remotes[0].compression = None;
    }
    let leaf = start(o).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB slow 1\r\n").await;
    until_delivered(&mut h, &mut l, "slow").await;
    let frame = format!("PUB slow {PAYLOAD}\r\n{}\r\n", "x".repeat(PAYLOAD));
    let batch = frame.repeat(100);
    let publisher = tokio::spawn(async move {
        for _ in 0..N / 100 {
            h.send(&batch).await;
        }
        h.flush().await;
    });
    // Each delivery is `MSG slow 1 1000\r\n` and the payload with its CRLF.
    let want = N * (format!("MSG slow 1 {PAYLOAD}\r\n").len() + PAYLOAD + 2);
    let mut got = l.buf.len();
    let mut buf = vec![0u8; 256 * 1024];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while got < want {
        assert!(
            std::time::Instant::now() < deadline,
            "{got} of {want} bytes"
        );
        let n = l.stream.read(&mut buf).await.expect("read");
        assert!(
            n > 0,
            "the leaf closed its slow client after {got} of {want} bytes"
        );
        got += n;
        // A reader of at most 256 KiB a millisecond: slower than the link.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(got, want);
    publisher.await.expect("publisher");
}
