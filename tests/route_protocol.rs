//! The route wire protocol, black-box: a raw TCP socket impersonates a peer server on natsd's
//! route port (INFO/CONNECT/RS+/RMSG written by hand, spec §1–3 and §10.5) and the exact bytes
//! natsd sends back are asserted. Every test runs its own server on 127.0.0.1, port 0.

mod common;

use common::{start, wait_for, Raw, DEADLINE};
use natsd::cluster::Cluster;
use natsd::config::ClusterOpts;
use natsd::{Options, Server};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn copts() -> ClusterOpts {
    ClusterOpts {
        name: Some("C1".into()),
        host: "127.0.0.1".into(),
        port: 0,
        ..ClusterOpts::default()
    }
}

async fn node(co: ClusterOpts) -> Server {
    start(Options {
        cluster: Some(co),
        ..Options::local()
    })
    .await
}

fn cluster(s: &Server) -> &Arc<Cluster> {
    s.shared().cluster.as_ref().expect("cluster configured")
}

fn route_addr(s: &Server) -> SocketAddr {
    *cluster(s).listen_addr.get().expect("route listener")
}

/// A 56-char server id in nats-server's style (`N…`), distinct per tag.
fn fake_id(tag: &str) -> String {
    let mut s = format!("NFAKE{}", tag.to_uppercase().replace(['_', '-'], ""));
    while s.len() < 56 {
        s.push('A');
    }
    s.truncate(56);
    s
}

fn connect_json(id: &str, cluster: &str, extra: &str) -> String {
    format!(
        r#"{{"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"{id}","cluster":"{cluster}"{extra}}}"#
    )
}

fn info_json(id: &str, headers: bool) -> String {
    format!(
        r#"{{"server_id":"{id}","server_name":"FAKE","version":"2.9.10","proto":2,"go":"go1.19.8","host":"127.0.0.1","port":0,"headers":{headers},"max_payload":1048576,"nonce":"abcdefghijklmno","cluster":"C1","connect_urls":["127.0.0.1:14999"],"lnoc":true}}"#
    )
}

/// Our fake peer server: a raw socket on natsd's route port.
struct Peer {
    raw: Raw,
    id: String,
}

impl Peer {
    /// Connect and read natsd's INFO (which must be the first thing it sends).
    async fn dial(srv: &Server, tag: &str) -> (Peer, serde_json::Value) {
        let stream = TcpStream::connect(route_addr(srv)).await.expect("connect");
        stream.set_nodelay(true).ok();
        let mut raw = Raw {
            stream,
            buf: Vec::new(),
        };
        let line = raw.line().await;
        let json = line
            .strip_prefix("INFO ")
            .unwrap_or_else(|| panic!("expected INFO first, got {line:?}"));
        let v: serde_json::Value = serde_json::from_str(json).expect("INFO is JSON");
        (
            Peer {
                raw,
                id: fake_id(tag),
            },
            v,
        )
    }

    /// A registered route: CONNECT and INFO in one write; returns natsd's interest dump.
    async fn join(srv: &Server, tag: &str, headers: bool) -> (Peer, Vec<String>) {
        let (mut p, _) = Peer::dial(srv, tag).await;
        let hello = format!(
            "CONNECT {}\r\nINFO {}\r\n",
            connect_json(&p.id, "C1", ""),
            info_json(&p.id, headers)
        );
        p.send(&hello).await;
        wait_route(srv, &p.id).await;
        let dump = p.sync().await;
        (p, dump)
    }

    async fn send(&mut self, s: &str) {
        self.raw.send(s).await;
    }

    /// Round trip: every line natsd sent before our PING's PONG (its PINGs answered and left
    /// out, and the system account's interest too: the `$SYS` services' subscriptions, which
    /// tests/sys.rs covers).
    async fn sync(&mut self) -> Vec<String> {
        let text = self.raw.sync().await;
        let mut out = Vec::new();
        for l in text.split("\r\n") {
            if l == "PING" {
                self.raw.send("PONG\r\n").await;
            } else if l.starts_with("RS+ $SYS ") || l.starts_with("RS- $SYS ") {
                continue;
            } else {
                out.push(l.to_string());
            }
        }
        // The text ends with CRLF: drop the empty tail.
        if out.last().is_some_and(String::is_empty) {
            out.pop();
        }
        out
    }

    /// Read until natsd closes the connection; everything it sent meanwhile, as text.
    async fn closed(&mut self) -> String {
        assert!(self.raw.closed().await, "natsd did not close the route");
        String::from_utf8_lossy(&self.raw.buf).into_owned()
    }
}

async fn wait_route(srv: &Server, id: &str) {
    let cl = cluster(srv).clone();
    let id = id.to_string();
    wait_for("route registered", || {
        let ok = cl.has_route(&id);
        async move { ok }
    })
    .await;
}

async fn wait_no_routes(srv: &Server) {
    let cl = cluster(srv).clone();
    wait_for("no routes", || {
        let ok = cl.num_routes() == 0;
        async move { ok }
    })
    .await;
}

async fn wait_interest(srv: &Server, subject: &str, want: bool) {
    let acc = srv.shared().accounts.global();
    let subject = subject.to_string();
    wait_for("interest", || {
        let ok = acc.sublist.has_interest(subject.as_bytes()) == want;
        async move { ok }
    })
    .await;
}

/// A client that does not take async INFOs (protocol 0), with headers.
async fn client(srv: &Server) -> Raw {
    Raw::connected(
        srv,
        r#"{"verbose":false,"pedantic":false,"headers":true,"protocol":0}"#,
    )
    .await
}

/// Everything a client got before the PONG of a fresh PING, as lines.
async fn client_lines(c: &mut Raw) -> Vec<String> {
    let text = c.sync().await;
    let mut out: Vec<String> = text
        .split("\r\n")
        .filter(|l| !l.starts_with("INFO "))
        .map(str::to_string)
        .collect();
    if out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// natsd still serves clients: a local round trip works.
async fn still_serves_clients(srv: &Server) {
    let mut c = client(srv).await;
    c.send("SUB alive 9\r\nPUB alive 2\r\nok\r\n").await;
    assert_eq!(client_lines(&mut c).await, strs(&["MSG alive 9 2", "ok"]));
}

// 1. Accept-side handshake -----------------------------------------------------------------

#[tokio::test]
async fn accept_side_handshake_connect_and_info_in_one_write() {
    let srv = node(copts()).await;
    let (mut p, info) = Peer::dial(&srv, "hs1").await;
    // 3: message tracing (nats-server 2.11+), see tests/msg_trace.rs.
    assert_eq!(info["proto"], 3);
    assert_eq!(info["server_id"], srv.id());
    assert_eq!(info["cluster"], "C1");
    assert_eq!(info["headers"], true);
    assert_eq!(info["port"], route_addr(&srv).port());
    assert!(
        info["nonce"].as_str().is_some_and(|n| !n.is_empty()),
        "nonce: {info}"
    );
    let own = format!("127.0.0.1:{}", srv.client_addr().port());
    assert_eq!(info["connect_urls"], serde_json::json!([own]));
    // Pools by default, as nats-server 2.10+; this fake peer (a 2.9) gets one route.
    assert_eq!(info["route_pool_size"], 3, "{info}");
    assert!(info.get("route_pool_idx").is_none(), "{info}");
    assert!(info.get("ip").is_none(), "{info}");
    // Nothing else before our CONNECT.
    assert!(p.raw.buf.is_empty());

    let hello = format!(
        "CONNECT {}\r\nINFO {}\r\n",
        connect_json(&p.id, "C1", r#","lnoc":true"#),
        info_json(&p.id, true)
    );
    p.send(&hello).await;
    wait_route(&srv, &p.id).await;
    let registered = Instant::now();
    // Nothing subscribed: an empty dump.
    assert_eq!(p.sync().await, Vec::<String>::new());
    // natsd's first PING about a second after registration; we answer.
    let l = p.raw.line().await;
    assert_eq!(l, "PING");
    let after = registered.elapsed();
    assert!(
        after > Duration::from_millis(500) && after < Duration::from_secs(3),
        "first PING after {after:?}"
    );
    p.send("PONG\r\n").await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    assert_eq!(cluster(&srv).num_routes(), 1);
    let routes = cluster(&srv).routes();
    assert_eq!(routes[0].remote_id, p.id);
    assert_eq!(routes[0].remote_name, "FAKE");
    assert!(!routes[0].did_solicit);
    srv.shutdown().await;
}

#[tokio::test]
async fn accept_side_handshake_connect_first_info_later() {
    let srv = node(copts()).await;
    let mut c = client(&srv).await;
    c.send("SUB early 1\r\n").await;
    c.flush().await;
    let (mut p, _) = Peer::dial(&srv, "hs2").await;
    p.send(&format!("CONNECT {}\r\n", connect_json(&p.id, "C1", "")))
        .await;
    // After CONNECT, before INFO: PING is answered, nothing registered, no dump yet.
    assert_eq!(p.sync().await, Vec::<String>::new());
    assert_eq!(cluster(&srv).num_routes(), 0);
    p.send(&format!("INFO {}\r\n", info_json(&p.id, true)))
        .await;
    wait_route(&srv, &p.id).await;
    assert_eq!(p.sync().await, strs(&["RS+ $G early"]));
    srv.shutdown().await;
}

// 2. Interest dump and updates -----------------------------------------------------------

#[tokio::test]
async fn interest_dump_and_aggregated_updates() {
    let srv = node(copts()).await;
    let mut a = client(&srv).await;
    a.send("SUB foo 1\r\nSUB bar q1 2\r\nSUB svc.> 4\r\n").await;
    a.flush().await;
    let mut b = client(&srv).await;
    b.send("SUB bar q1 1\r\n").await;
    b.flush().await;

    let (mut p, dump) = Peer::join(&srv, "dump", true).await;
    assert_eq!(
        sorted(dump),
        strs(&["RS+ $G bar q1 2", "RS+ $G foo", "RS+ $G svc.>"])
    );

    // Another plain sub on an existing subject: nothing.
    b.send("SUB foo 2\r\n").await;
    b.flush().await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    // A new subject.
    b.send("SUB x 3\r\n").await;
    b.flush().await;
    assert_eq!(p.sync().await, strs(&["RS+ $G x"]));
    // A third queue member: the weight goes up.
    let mut c = client(&srv).await;
    c.send("SUB bar q1 1\r\n").await;
    c.flush().await;
    assert_eq!(p.sync().await, strs(&["RS+ $G bar q1 3"]));
    // Members leave one by one.
    c.send("UNSUB 1\r\n").await;
    c.flush().await;
    assert_eq!(p.sync().await, strs(&["RS+ $G bar q1 2"]));
    b.send("UNSUB 1\r\n").await;
    b.flush().await;
    assert_eq!(p.sync().await, strs(&["RS+ $G bar q1 1"]));
    a.send("UNSUB 2\r\n").await;
    a.flush().await;
    assert_eq!(p.sync().await, strs(&["RS- $G bar q1"]));
    // Plain interest: only the last one out withdraws.
    a.send("UNSUB 1\r\n").await;
    a.flush().await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    b.send("UNSUB 2\r\n").await;
    b.flush().await;
    assert_eq!(p.sync().await, strs(&["RS- $G foo"]));
    // A disconnect withdraws that client's interest.
    drop(a);
    let mut got = Vec::new();
    let end = Instant::now() + DEADLINE;
    while got.is_empty() && Instant::now() < end {
        got = p.sync().await;
    }
    assert_eq!(got, strs(&["RS- $G svc.>"]));
    drop(b);
    let mut got = Vec::new();
    while got.is_empty() && Instant::now() < end {
        got = p.sync().await;
    }
    assert_eq!(got, strs(&["RS- $G x"]));
    srv.shutdown().await;
}

// 3. Messages to the peer -----------------------------------------------------------------

#[tokio::test]
async fn messages_to_peer_use_rmsg_forms_of_the_spec() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "tous", true).await;
    p.send("RS+ $G fake.sub\r\nRS+ $G fake.q qq 5\r\n").await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    let acc = srv.shared().accounts.global();
    let r = acc.sublist.matches(b"fake.q");
    assert_eq!(r.qsubs.len(), 1);
    assert_eq!(r.qsubs[0].total_weight, 5);
    assert!(acc.sublist.has_interest(b"fake.sub"));

    let mut c = client(&srv).await;
    c.send("PUB fake.sub r.1 2\r\nhi\r\nPUB fake.q 2\r\nq0\r\nPUB fake.q r.2 2\r\nr0\r\n")
        .await;
    c.flush().await;
    assert_eq!(
        p.sync().await,
        strs(&[
            "RMSG $G fake.sub r.1 2",
            "hi",
            "RMSG $G fake.q | qq 2",
            "q0",
            "RMSG $G fake.q + r.2 qq 2",
            "r0",
        ])
    );

    // Plain and queue interest of the same peer: ONE message, with the queue listed.
    p.send("RS+ $G fake.*\r\n").await;
    p.sync().await;
    c.send("PUB fake.q 2\r\nq1\r\nPUB fake.sub 2\r\ns1\r\n")
        .await;
    c.flush().await;
    assert_eq!(
        p.sync().await,
        strs(&["RMSG $G fake.q | qq 2", "q1", "RMSG $G fake.sub 2", "s1"])
    );

    // Headers go as HMSG to a peer that advertised headers.
    c.send("HPUB fake.sub 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n")
        .await;
    c.send("HPUB fake.q r.h 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n")
        .await;
    c.flush().await;
    let hmsg = strs(&["NATS/1.0", "X-K: v", "", "hello"]);
    let mut want = vec!["HMSG $G fake.sub 20 25".to_string()];
    want.extend(hmsg.clone());
    want.push("HMSG $G fake.q + r.h qq 20 25".to_string());
    want.extend(hmsg);
    assert_eq!(p.sync().await, want);

    // Withdrawn interest: nothing more.
    p.send("RS- $G fake.sub\r\nRS- $G fake.*\r\nRS- $G fake.q qq\r\n")
        .await;
    p.sync().await;
    assert!(!acc.sublist.has_interest(b"fake.q"));
    c.send("PUB fake.q 2\r\nq2\r\nPUB fake.sub 2\r\ns2\r\n")
        .await;
    c.flush().await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    srv.shutdown().await;
}

#[tokio::test]
async fn headers_are_stripped_towards_a_peer_without_headers() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "nohdr", false).await;
    p.send("RS+ $G h.sub\r\n").await;
    p.sync().await;
    let mut c = client(&srv).await;
    c.send("HPUB h.sub r.1 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n")
        .await;
    c.send("HPUB h.sub 12 12\r\nNATS/1.0\r\n\r\n\r\n").await;
    c.flush().await;
    assert_eq!(
        p.sync().await,
        strs(&["RMSG $G h.sub r.1 5", "hello", "RMSG $G h.sub 0", ""])
    );
    srv.shutdown().await;
}

// 4. Messages from the peer ---------------------------------------------------------------

#[tokio::test]
async fn messages_from_peer_reach_local_clients_only() {
    let srv = node(copts()).await;
    let mut c = client(&srv).await;
    c.send("SUB fromfake 1\r\nSUB fromfake qg 2\r\n").await;
    c.flush().await;
    let (mut p, dump) = Peer::join(&srv, "fromus", true).await;
    assert_eq!(
        sorted(dump),
        strs(&["RS+ $G fromfake", "RS+ $G fromfake qg 1"])
    );
    // Our own interest in the same subject: natsd must still never send our messages back.
    p.send("RS+ $G fromfake\r\nRS+ $G fromfake qg 1\r\n").await;
    p.send(concat!(
        "RMSG $G fromfake r.x 3\r\nabc\r\n",
        "RMSG $G fromfake | qg 3\r\ndef\r\n",
        "HMSG $G fromfake + r.y qg 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    ))
    .await;
    assert_eq!(p.sync().await, Vec::<String>::new(), "one hop only");
    assert_eq!(
        client_lines(&mut c).await,
        strs(&[
            "MSG fromfake 1 r.x 3",
            "abc",
            "MSG fromfake 1 3",
            "def",
            "MSG fromfake 2 3",
            "def",
            "HMSG fromfake 1 r.y 12 14",
            "NATS/1.0",
            "",
            "hi",
            "HMSG fromfake 2 r.y 12 14",
            "NATS/1.0",
            "",
            "hi",
        ])
    );
    // Unknown account: dropped, the route stays up.
    p.send("RMSG NOPE fromfake 1\r\nx\r\n").await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    assert!(cluster(&srv).has_route(&p.id));
    assert_eq!(client_lines(&mut c).await, Vec::<String>::new());
    // Tab separators and lower-case verbs are legal (spec conventions).
    p.send("rmsg\t$G\tfromfake\t2\r\nok\r\n").await;
    p.sync().await;
    assert_eq!(
        client_lines(&mut c).await,
        strs(&["MSG fromfake 1 2", "ok"])
    );
    srv.shutdown().await;
}

// 5. Weighted queues ----------------------------------------------------------------------

#[tokio::test]
async fn queue_weight_of_the_peer_steers_selection() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "weight", true).await;
    p.send("RS+ $G work grp 3\r\n").await;
    p.sync().await;
    let mut member = client(&srv).await;
    member.send("SUB work grp 1\r\n").await;
    member.flush().await;
    assert_eq!(p.sync().await, strs(&["RS+ $G work grp 1"]));
    let acc = srv.shared().accounts.global();
    assert_eq!(acc.sublist.matches(b"work").qsubs[0].total_weight, 4);

    let n = 2000;
    let mut publ = client(&srv).await;
    let mut batch = String::new();
    for i in 0..n {
        batch.push_str(&format!("PUB work 4\r\n{i:04}\r\n"));
    }
    publ.send(&batch).await;
    publ.flush().await;

    let mut seen = std::collections::HashSet::new();
    let mut to_peer = 0;
    let lines = p.sync().await;
    let mut it = lines.iter();
    while let Some(l) = it.next() {
        assert_eq!(l, "RMSG $G work | grp 4");
        let body = it.next().expect("payload");
        assert!(seen.insert(body.clone()), "{body} twice");
        to_peer += 1;
    }
    let lines = client_lines(&mut member).await;
    let mut it = lines.iter();
    while let Some(l) = it.next() {
        assert_eq!(l, "MSG work 1 4");
        let body = it.next().expect("payload");
        assert!(seen.insert(body.clone()), "{body} twice");
    }
    assert_eq!(seen.len(), n, "every message exactly once");
    let share = to_peer as f64 / n as f64;
    assert!((0.6..=0.9).contains(&share), "peer got {share:.3}");
    srv.shutdown().await;
}

// 6. Bad input ----------------------------------------------------------------------------

/// Each bad input closes only its own route, without `-ERR` for parse errors.
#[tokio::test]
async fn bad_input_closes_only_that_route() {
    let srv = node(copts()).await;
    let (mut good, _) = Peer::join(&srv, "good", true).await;
    let cases: [(&str, &[u8]); 5] = [
        ("missingargs", b"RMSG $G\r\n"),
        ("badreplyind", b"RMSG $G foo x q 3\r\nabc\r\n"),
        ("garbage", b"\x00\x01\x02 GARBAGE \xff\r\n"),
        ("oversized", b"RMSG $G foo 999999999\r\n"),
        ("hdrbig", b"HMSG $G foo 9 3\r\nabc\r\n"),
    ];
    for (tag, bytes) in cases {
        let (mut p, _) = Peer::join(&srv, tag, true).await;
        p.raw.send_bytes(bytes).await;
        let text = p.closed().await;
        assert!(!text.contains("-ERR"), "{tag}: {text:?}");
        let cl = cluster(&srv).clone();
        let id = p.id.clone();
        wait_for("bad route gone", || {
            let ok = !cl.has_route(&id);
            async move { ok }
        })
        .await;
    }
    // The good route is untouched; it only heard gossip about each newcomer (spec §1.4:
    // the newcomer's INFO forwarded with the nonce cleared and `ip` set).
    let gossip = good.sync().await;
    assert_eq!(gossip.len(), cases.len(), "{gossip:?}");
    for g in &gossip {
        let info: serde_json::Value =
            serde_json::from_str(g.strip_prefix("INFO ").expect("INFO")).expect("json");
        assert_eq!(info["ip"], "nats-route://127.0.0.1:0/", "{g}");
        assert!(info.get("nonce").is_none(), "{g}");
        assert_eq!(info["server_name"], "FAKE");
    }
    assert_eq!(cluster(&srv).num_routes(), 1);
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn handshake_violations_are_rejected() {
    let srv = node(copts()).await;
    // First op is not CONNECT: closed, the PING is not answered.
    let (mut p, _) = Peer::dial(&srv, "noconnect").await;
    p.send("PING\r\n").await;
    let text = p.closed().await;
    assert!(!text.contains("PONG"), "{text:?}");
    let (mut p, _) = Peer::dial(&srv, "infofirst").await;
    p.send(&format!("INFO {}\r\n", info_json(&p.id, true)))
        .await;
    p.closed().await;

    // A client on the route port (CONNECT with lang).
    let (mut p, _) = Peer::dial(&srv, "client").await;
    p.send(
        "CONNECT {\"verbose\":false,\"pedantic\":false,\"lang\":\"go\",\"version\":\"1.30.0\"}\r\n",
    )
    .await;
    assert_eq!(
        p.closed().await,
        "-ERR 'attempted to connect to route port'\r\n"
    );

    // A gateway on the route port.
    let (mut p, _) = Peer::dial(&srv, "gw").await;
    p.send(&format!(
        "CONNECT {}\r\n",
        connect_json(&p.id, "", r#","gateway":"C2""#)
    ))
    .await;
    assert_eq!(
        p.closed().await,
        "-ERR 'Rejecting connection from gateway \"C2\" on the Route port'\r\n"
    );

    // Wrong cluster name.
    let (mut p, _) = Peer::dial(&srv, "wrongcl").await;
    let hello = format!(
        "CONNECT {}\r\nINFO {}\r\n",
        connect_json(&p.id, "C2", ""),
        info_json(&p.id, true)
    );
    p.send(&hello).await;
    assert_eq!(
        p.closed().await,
        "-ERR 'Rejecting connection, cluster name \"C2\" does not match \"C1\"'\r\n"
    );
    // Malformed CONNECT JSON.
    let (mut p, _) = Peer::dial(&srv, "badjson").await;
    p.send("CONNECT {not json\r\n").await;
    p.closed().await;

    assert_eq!(cluster(&srv).num_routes(), 0);
    assert_eq!(cluster(&srv).name(), "C1");
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn route_authorization() {
    let srv = node(ClusterOpts {
        username: Some("ru".into()),
        password: Some("rp".into()),
        ..copts()
    })
    .await;
    let creds = [
        ("nocreds", ""),
        ("wronguser", r#","user":"xx","pass":"rp""#),
        ("wrongpass", r#","user":"ru","pass":"xx""#),
    ];
    for (tag, extra) in creds {
        let (mut p, info) = Peer::dial(&srv, tag).await;
        assert_eq!(info["auth_required"], true);
        let hello = format!(
            "CONNECT {}\r\nINFO {}\r\n",
            connect_json(&p.id, "C1", extra),
            info_json(&p.id, true)
        );
        p.send(&hello).await;
        assert_eq!(
            p.closed().await,
            "-ERR 'Authorization Violation'\r\n",
            "{tag}"
        );
    }
    assert_eq!(cluster(&srv).num_routes(), 0);
    let (mut p, _) = Peer::dial(&srv, "rightcreds").await;
    let hello = format!(
        "CONNECT {}\r\nINFO {}\r\n",
        connect_json(&p.id, "C1", r#","user":"ru","pass":"rp""#),
        info_json(&p.id, true)
    );
    p.send(&hello).await;
    wait_route(&srv, &p.id).await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

// 7. Route to self, duplicates ------------------------------------------------------------

#[tokio::test]
async fn route_to_self_is_closed() {
    let srv = node(copts()).await;
    let (mut p, info) = Peer::dial(&srv, "self").await;
    let own = info["server_id"].as_str().expect("id").to_string();
    assert_eq!(own, srv.id());
    let hello = format!(
        "CONNECT {}\r\nINFO {}\r\n",
        connect_json(&own, "C1", ""),
        info_json(&own, true)
    );
    p.send(&hello).await;
    let text = p.closed().await;
    assert!(!text.contains("RS+"), "{text:?}");
    assert_eq!(cluster(&srv).num_routes(), 0);
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn duplicate_route_to_same_server_id_leaves_one() {
    let srv = node(copts()).await;
    let (mut first, _) = Peer::join(&srv, "dup", true).await;
    let (mut second, _) = Peer::dial(&srv, "dup").await;
    assert_eq!(first.id, second.id);
    let hello = format!(
        "CONNECT {}\r\nINFO {}\r\n",
        connect_json(&second.id, "C1", ""),
        info_json(&second.id, true)
    );
    second.send(&hello).await;
    // natsd keeps the existing route (both are accepted, neither preferred): the newcomer goes.
    second.closed().await;
    assert_eq!(cluster(&srv).num_routes(), 1);
    assert_eq!(first.sync().await, Vec::<String>::new());
    // The survivor is live: interest reaches it, its interest is honoured.
    let mut c = client(&srv).await;
    c.send("SUB after.dup 1\r\n").await;
    c.flush().await;
    assert_eq!(first.sync().await, strs(&["RS+ $G after.dup"]));
    first.send("RS+ $G to.first\r\n").await;
    first.sync().await;
    c.send("PUB to.first 1\r\nz\r\n").await;
    c.flush().await;
    assert_eq!(first.sync().await, strs(&["RMSG $G to.first 1", "z"]));
    assert_eq!(cluster(&srv).num_routes(), 1);
    srv.shutdown().await;
}

// 8. Liveness -----------------------------------------------------------------------------

#[tokio::test]
async fn peer_that_never_answers_pings_is_closed_and_forgotten() {
    let srv = node(ClusterOpts {
        ping_interval: Some(Duration::from_millis(200)),
        ping_max: Some(2),
        ..copts()
    })
    .await;
    let (mut p, _) = Peer::join(&srv, "stale", true).await;
    p.send("RS+ $G live.x\r\nRS+ $G live.q g 2\r\n").await;
    p.sync().await;
    assert!(srv
        .shared()
        .accounts
        .global()
        .sublist
        .has_interest(b"live.x"));
    let start = Instant::now();
    // Never answer: read until natsd gives up.
    let text = p.closed().await;
    let took = start.elapsed();
    let pings = text.matches("PING\r\n").count();
    assert!(pings >= 2, "{text:?}");
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    wait_no_routes(&srv).await;
    wait_interest(&srv, "live.x", false).await;
    assert!(!srv
        .shared()
        .accounts
        .global()
        .sublist
        .has_interest(b"live.q"));
    // Publishing there is now a no-op; the server is fine.
    let mut c = client(&srv).await;
    c.send("PUB live.x 1\r\nz\r\nPUB live.q 1\r\nz\r\n").await;
    c.flush().await;
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn peer_that_answers_pings_stays() {
    let srv = node(ClusterOpts {
        ping_interval: Some(Duration::from_millis(100)),
        ping_max: Some(2),
        ..copts()
    })
    .await;
    let (mut p, _) = Peer::join(&srv, "lively", true).await;
    let end = Instant::now() + Duration::from_millis(1800);
    let mut pings = 0;
    while Instant::now() < end {
        let l = p.raw.line().await;
        assert_eq!(l, "PING");
        pings += 1;
        p.send("PONG\r\n").await;
    }
    assert!(pings >= 3, "{pings} pings");
    assert!(cluster(&srv).has_route(&p.id));
    srv.shutdown().await;
}

// Beyond the list: one hop between routes, several queue groups, split reads, auto-unsub. ---

/// Lines that are not gossip INFOs.
fn no_info(v: Vec<String>) -> Vec<String> {
    v.into_iter().filter(|l| !l.starts_with("INFO ")).collect()
}

#[tokio::test]
async fn nothing_is_forwarded_or_readvertised_between_routes() {
    let srv = node(copts()).await;
    let (mut p1, _) = Peer::join(&srv, "hopone", true).await;
    let (mut p2, _) = Peer::join(&srv, "hoptwo", true).await;
    p1.sync().await; // gossip about p2
                     // p1's interest is not re-advertised to p2.
    p1.send("RS+ $G hop\r\nRS+ $G hop q 2\r\n").await;
    p1.sync().await;
    assert_eq!(no_info(p2.sync().await), Vec::<String>::new());
    // p2's interest exists, but messages from p1 never go to p2 (plain or queue).
    p2.send("RS+ $G hop\r\nRS+ $G hop q 1\r\n").await;
    p2.sync().await;
    p1.send("RMSG $G hop 1\r\na\r\nRMSG $G hop | q 1\r\nb\r\nRMSG $G hop + r q 1\r\nc\r\n")
        .await;
    assert_eq!(no_info(p1.sync().await), Vec::<String>::new());
    assert_eq!(no_info(p2.sync().await), Vec::<String>::new());
    // A local client reaches both, one RMSG each; the queue goes to exactly one of them.
    let mut c = client(&srv).await;
    c.send("PUB hop 1\r\nz\r\n").await;
    c.flush().await;
    let a = no_info(p1.sync().await);
    let b = no_info(p2.sync().await);
    let queued = [&a, &b]
        .iter()
        .filter(|v| v.first().is_some_and(|l| l == "RMSG $G hop | q 1"))
        .count();
    assert_eq!(queued, 1, "{a:?} {b:?}");
    for v in [&a, &b] {
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[0] == "RMSG $G hop 1" || v[0] == "RMSG $G hop | q 1");
        assert_eq!(v[1], "z");
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn several_queue_groups_and_overlapping_interest_make_one_rmsg() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "multiq", true).await;
    p.send("RS+ $G m.*\r\nRS+ $G m.>\r\nRS+ $G m.x g1 1\r\nRS+ $G m.* g2 4\r\n")
        .await;
    p.sync().await;
    // A repeated RS+ for a queue key is a weight update, not a second member.
    p.send("RS+ $G m.* g2 2\r\n").await;
    p.sync().await;
    let acc = srv.shared().accounts.global();
    let r = acc.sublist.matches(b"m.x");
    let mut weights: Vec<(String, u64)> = r
        .qsubs
        .iter()
        .map(|g| {
            (
                String::from_utf8_lossy(&g.name).into_owned(),
                g.total_weight,
            )
        })
        .collect();
    weights.sort();
    assert_eq!(weights, vec![("g1".into(), 1), ("g2".into(), 2)]);
    let mut c = client(&srv).await;
    c.send("PUB m.x r.9 2\r\nmx\r\n").await;
    c.flush().await;
    let lines = p.sync().await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let t: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(&t[..5], &["RMSG", "$G", "m.x", "+", "r.9"], "{lines:?}");
    let mut qs = t[5..t.len() - 1].to_vec();
    qs.sort();
    assert_eq!(qs, vec!["g1", "g2"]);
    assert_eq!(t[t.len() - 1], "2");
    assert_eq!(lines[1], "mx");

    // Receiving: both groups listed (with Go's extra space before the size), one member each.
    let mut m = client(&srv).await;
    m.send("SUB in.x g1 1\r\nSUB in.x g1 2\r\nSUB in.x g2 3\r\n")
        .await;
    m.flush().await;
    p.sync().await;
    p.send("RMSG $G in.x | g1 g2  2\r\nab\r\n").await;
    p.sync().await;
    let got = client_lines(&mut m).await;
    assert_eq!(got.len(), 4, "{got:?}");
    let mut sids: Vec<&str> = got
        .iter()
        .step_by(2)
        .map(|l| l.split(' ').nth(2).expect("sid"))
        .collect();
    sids.sort();
    assert!(sids == ["1", "3"] || sids == ["2", "3"], "{got:?}");
    srv.shutdown().await;
}

#[tokio::test]
async fn routed_message_split_across_reads() {
    let srv = node(copts()).await;
    let mut c = client(&srv).await;
    c.send("SUB split 1\r\n").await;
    c.flush().await;
    let (mut p, _) = Peer::join(&srv, "split", true).await;
    let payload: String = (0..200_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let frame = format!("RMSG $G split r.s {}\r\n{payload}\r\n", payload.len());
    let bytes = frame.as_bytes();
    for chunk in [
        &bytes[..5],
        &bytes[5..30],
        &bytes[30..70_000],
        &bytes[70_000..],
    ] {
        p.raw.send_bytes(chunk).await;
        p.raw.stream.flush().await.expect("flush");
        tokio::task::yield_now().await;
    }
    p.sync().await;
    let (subj, sid, reply, got) = c.msg().await;
    assert_eq!(
        (subj.as_str(), sid.as_str(), reply.as_deref()),
        ("split", "1", Some("r.s"))
    );
    assert_eq!(got.len(), payload.len());
    assert!(got == payload.as_bytes());
    srv.shutdown().await;
}

#[tokio::test]
async fn auto_unsubscribe_reached_by_routed_messages_withdraws_interest() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "autounsub", true).await;
    let mut c = client(&srv).await;
    c.send("SUB auto 1\r\nUNSUB 1 2\r\nSUB autoq g 2\r\nUNSUB 2 1\r\n")
        .await;
    c.flush().await;
    assert_eq!(
        sorted(p.sync().await),
        strs(&["RS+ $G auto", "RS+ $G autoq g 1"])
    );
    p.send("RMSG $G auto 1\r\n1\r\nRMSG $G auto 1\r\n2\r\nRMSG $G auto 1\r\n3\r\n")
        .await;
    p.send("RMSG $G autoq | g 1\r\n4\r\nRMSG $G autoq | g 1\r\n5\r\n")
        .await;
    assert_eq!(
        sorted(p.sync().await),
        strs(&["RS- $G auto", "RS- $G autoq g"])
    );
    assert_eq!(
        client_lines(&mut c).await,
        strs(&[
            "MSG auto 1 1",
            "1",
            "MSG auto 1 1",
            "2",
            "MSG autoq 2 1",
            "4"
        ])
    );
    assert!(!srv.shared().accounts.global().sublist.has_interest(b"auto"));
    srv.shutdown().await;
}

#[tokio::test]
async fn peer_errors_and_ok_are_tolerated_and_headers_reach_old_clients_stripped() {
    let srv = node(copts()).await;
    let mut old = Raw::connected(&srv, r#"{"verbose":false,"pedantic":false}"#).await;
    old.send("SUB hdr 1\r\n").await;
    old.flush().await;
    let (mut p, _) = Peer::join(&srv, "tolerant", true).await;
    p.send("-ERR 'something odd'\r\n+OK\r\n").await;
    assert_eq!(p.sync().await, Vec::<String>::new());
    p.send("HMSG $G hdr 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n")
        .await;
    p.sync().await;
    assert_eq!(
        client_lines(&mut old).await,
        strs(&["MSG hdr 1 5", "hello"])
    );
    assert!(cluster(&srv).has_route(&p.id));
    srv.shutdown().await;
}

/// natsd as the dialling side: a gossiped INFO (with `ip`) about an unknown server makes it
/// dial that address and send CONNECT and INFO in one write, without waiting for ours.
#[tokio::test]
async fn gossiped_peer_is_dialled_with_connect_then_info() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "gossiper", true).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let other = fake_id("dialled");
    let gossip = format!(
        r#"INFO {{"server_id":"{other}","server_name":"OTHER","version":"2.9.10","proto":2,"host":"127.0.0.1","port":{port},"headers":true,"max_payload":1048576,"ip":"nats-route://127.0.0.1:{port}/","cluster":"C1"}}"#
    );
    p.send(&format!("{gossip}\r\n")).await;
    p.sync().await;
    let (stream, _) = tokio::time::timeout(DEADLINE, listener.accept())
        .await
        .expect("natsd dials the gossiped peer")
        .expect("accept");
    let mut d = Peer {
        raw: Raw {
            stream,
            buf: Vec::new(),
        },
        id: other.clone(),
    };
    let l = d.raw.line().await;
    let ci: serde_json::Value =
        serde_json::from_str(l.strip_prefix("CONNECT ").expect("CONNECT first")).expect("json");
    assert_eq!(ci["echo"], true);
    assert_eq!(ci["verbose"], false);
    assert_eq!(ci["pedantic"], false);
    assert_eq!(ci["tls_required"], false);
    assert_eq!(ci["headers"], true);
    assert_eq!(ci["name"], srv.id());
    assert_eq!(ci["cluster"], "C1");
    assert!(
        ci.get("lang").is_none() && ci.get("gateway").is_none(),
        "{l}"
    );
    // Our (acceptor's) INFO, without pools or compression (a 2.9). natsd, configured for
    // compression (`accept`, the default), held its INFO until now, as nats-server 2.10+
    // does: it names the outcome (`not supported`) and the slot the mesh dialled (0: no
    // `route_pool_idx`); natsd registers the route.
    let mut mine = serde_json::from_str::<serde_json::Value>(&info_json(&other, true)).expect("j");
    mine["port"] = port.into();
    d.send(&format!("INFO {mine}\r\n")).await;
    let l = d.raw.line().await;
    let info: serde_json::Value =
        serde_json::from_str(l.strip_prefix("INFO ").expect("INFO second")).expect("json");
    assert_eq!(info["server_id"], srv.id());
    assert_eq!(info["proto"], 3);
    assert_eq!(info["route_pool_size"], 3);
    assert_eq!(info["compression"], "not supported");
    assert!(info.get("route_pool_idx").is_none(), "{info}");
    wait_route(&srv, &other).await;
    let routes = cluster(&srv).routes();
    let r = routes.iter().find(|r| r.remote_id == other).expect("route");
    assert!(r.did_solicit && !r.is_configured);
    assert_eq!(cluster(&srv).num_routes(), 2);
    // The dialled route works both ways.
    d.send("RS+ $G via.dial\r\n").await;
    d.sync().await;
    let mut c = client(&srv).await;
    c.send("PUB via.dial 1\r\nd\r\n").await;
    c.flush().await;
    assert_eq!(no_info(d.sync().await), strs(&["RMSG $G via.dial 1", "d"]));
    srv.shutdown().await;
}

#[tokio::test]
async fn silent_connection_times_out_during_handshake() {
    let srv = node(ClusterOpts {
        username: Some("ru".into()),
        password: Some("rp".into()),
        auth_timeout: Duration::from_millis(500),
        ..copts()
    })
    .await;
    let (mut p, _) = Peer::dial(&srv, "silent").await;
    let start = Instant::now();
    assert_eq!(p.closed().await, "-ERR 'Authentication Timeout'\r\n");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(cluster(&srv).num_routes(), 0);
    still_serves_clients(&srv).await;
    srv.shutdown().await;
}

/// A peer's interest on behalf of a leaf cluster (`LS+ <origin>`) is kept apart from its own
/// (`RS+`): the same subject may come both ways, and each goes on its own. A peer without
/// `lnocu` (2.9.10) takes its leaf interest back with `LS-` and no origin.
#[tokio::test]
async fn leaf_cluster_interest_from_a_peer_is_kept_apart_from_its_own() {
    let srv = node(copts()).await;
    let (mut p, _) = Peer::join(&srv, "lsplus", true).await;
    p.send("LS+ LC $G foo\r\nRS+ $G foo\r\nLS+ LC $G bar q 2\r\n")
        .await;
    wait_interest(&srv, "foo", true).await;
    wait_interest(&srv, "bar", true).await;
    // The leaf cluster's `foo` goes; the peer's own stays.
    p.send("LS- $G foo\r\n").await;
    p.sync().await;
    assert!(common::leaf::has_interest(&srv, "$G", "foo"));
    p.send("RS- $G foo\r\nLS- $G bar q\r\n").await;
    wait_interest(&srv, "foo", false).await;
    wait_interest(&srv, "bar", false).await;
    srv.shutdown().await;
}
