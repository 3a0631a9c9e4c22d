//! Route compression as nats-server 2.15.1 speaks it, watched on loopback: two 2.15.1 nodes
//! routed through a logging TCP proxy (the transcript is what docs/nats-server-behaviour.md
//! §18 records), decoded with natsd's own S2 decoder — so these tests also prove that natsd's
//! `compress::stream` reads what Go's klauspost/compress/s2 writes, and a raw route peer shows
//! that nats-server reads what natsd's encoder writes.

mod common;

use bytes::BytesMut;
use common::natsserver::assert_installed_215;
use common::s2proxy::{
    info_field, lines, lines_of, node, proxy, tempfile_path, transcript, wait_log, Log, Seen,
};
use common::DEADLINE;
use natsd::compress::{
    CompressionMode, CompressionOpts, Decoder, Encoder, InfoStep, Level, RouteCompression,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two 2.15.1 nodes, B dialling A through the proxy; returns once `done` holds on the log.
fn observe(a_extra: &str, b_extra: &str, done: impl Fn(&[Seen]) -> bool) -> Log {
    let bin = assert_installed_215();
    let log: Log = Arc::default();
    let (a, _ca) = node(&bin, "A", a_extra, None);
    let p = proxy(
        SocketAddr::from(([127, 0, 0, 1], a.route_port)),
        log.clone(),
    );
    let (_b, _cb) = node(&bin, "B", b_extra, Some(p));
    wait_log(&log, "the exchange", done);
    log
}

fn pongs(n: usize) -> impl Fn(&[Seen]) -> bool {
    move |s: &[Seen]| s.iter().filter(|x| x.line == "PONG").count() >= n
}

/// The negotiation as 2.15.1 runs it (one route, both `s2_fast`), every compressed byte read by
/// natsd's decoder: the dialler waits for the acceptor's INFO, answers with one INFO in clear
/// naming the chosen mode, and switches its writer; the acceptor answers with a second INFO
/// that opens its compressed stream; the dialler then sends its real INFO, compressed. PINGs
/// start only after that, compressed.
#[test]
fn two_215_nodes_negotiate_s2_fast_and_natsd_decodes_it() {
    let log = observe(
        "compression: s2_fast\n pool_size: -1",
        "compression: s2_fast\n pool_size: -1",
        pongs(2),
    );
    let t = transcript(&log);
    let dialler = lines_of(&log, 0, '>');
    let acceptor = lines_of(&log, 0, '<');
    assert!(t.lines().all(|l| !l.contains("decode error")), "{t}");
    // Dialler: CONNECT, INFO (clear, chosen mode), then its compressed stream opening with INFO.
    assert!(
        dialler[0].line.starts_with("CONNECT ") && !dialler[0].compressed,
        "{t}"
    );
    assert!(
        dialler[1].line.starts_with("INFO ") && !dialler[1].compressed,
        "{t}"
    );
    assert_eq!(
        info_field(&dialler[1].line, "compression"),
        Some("s2_fast".into()),
        "{t}"
    );
    assert_eq!(dialler[2].line, "[S2 stream]", "{t}");
    assert!(
        dialler[3].line.starts_with("INFO ") && dialler[3].compressed,
        "{t}"
    );
    // Acceptor: INFO in clear with its configured mode, then a compressed stream opening with
    // a second INFO.
    assert!(
        acceptor[0].line.starts_with("INFO ") && !acceptor[0].compressed,
        "{t}"
    );
    assert_eq!(
        info_field(&acceptor[0].line, "compression"),
        Some("s2_fast".into())
    );
    assert_eq!(acceptor[1].line, "[S2 stream]", "{t}");
    assert!(
        acceptor[2].line.starts_with("INFO ") && acceptor[2].compressed,
        "{t}"
    );
    assert_ne!(
        info_field(&acceptor[0].line, "nonce"),
        info_field(&acceptor[2].line, "nonce")
    );
    // Everything after the switch is compressed and parses: subscriptions, PING/PONG.
    for side in [&dialler, &acceptor] {
        assert!(
            side.iter()
                .filter(|s| s.line.starts_with("PING") || s.line.starts_with("RS+"))
                .all(|s| s.compressed),
            "{t}"
        );
        assert!(side.iter().any(|s| s.line.starts_with("RS+ ")), "{t}");
    }
}

/// `accept` against `s2_best`: the accepting side takes the peer's level, and says so in its
/// second INFO. Both `accept`: nobody compresses, and the dialler's INFO says `off`.
#[test]
fn accept_takes_the_peers_level_and_two_accepts_stay_clear() {
    let log = observe(
        "compression: accept\n pool_size: -1",
        "compression: s2_best\n pool_size: -1",
        pongs(2),
    );
    let t = transcript(&log);
    let acceptor = lines_of(&log, 0, '<');
    assert_eq!(
        info_field(&acceptor[0].line, "compression"),
        Some("accept".into()),
        "{t}"
    );
    assert_eq!(
        info_field(&acceptor[2].line, "compression"),
        Some("s2_best".into()),
        "{t}"
    );
    assert!(
        acceptor
            .iter()
            .filter(|s| s.line == "PING" || s.line == "PONG")
            .all(|s| s.compressed),
        "{t}"
    );

    let log = observe("pool_size: -1", "pool_size: -1", pongs(2));
    let t = transcript(&log);
    let dialler = lines_of(&log, 0, '>');
    let info = dialler
        .iter()
        .find(|s| s.line.starts_with("INFO "))
        .expect("dialler INFO");
    assert_eq!(
        info_field(&info.line, "compression"),
        Some("off".into()),
        "{t}"
    );
    assert!(
        log.lock().expect("log").iter().all(|s| !s.compressed),
        "{t}"
    );
}

/// A raw route peer on the far side of a compressed route: decodes what it reads, encodes
/// what it sends.
struct Peer {
    sock: TcpStream,
    enc: Encoder,
    dec: Decoder,
    out: BytesMut,
    got: Vec<String>,
}

impl Peer {
    /// Reads (through the decoder) until a decoded line satisfies `f`.
    fn read_until(&mut self, what: &str, f: impl Fn(&str) -> bool) {
        let end = Instant::now() + DEADLINE;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            while self
                .dec
                .decode(&mut self.out, usize::MAX)
                .expect("server's stream decodes")
            {}
            lines(&mut self.out, &mut |l| self.got.push(l));
            if self.got.iter().any(|l| f(l)) {
                return;
            }
            assert!(Instant::now() < end, "no {what}: {:?}", self.got);
            let n = self.sock.read(&mut buf).expect("read");
            assert!(n > 0, "server closed the route; got {:?}", self.got);
            self.dec.feed(&buf[..n]);
        }
    }

    /// One write batch: one S2 stream at `level`.
    fn send(&mut self, level: Level, text: &str) {
        let mut wire = BytesMut::new();
        self.enc.set_level(level);
        self.enc.encode(text.as_bytes(), &mut wire);
        self.sock.write_all(&wire).expect("write");
    }
}

/// Reads a plain client connection until `want` shows up.
fn client_read_until(client: &mut TcpStream, seen: &mut Vec<u8>, want: &str) {
    let end = Instant::now() + DEADLINE;
    let mut buf = vec![0u8; 16 * 1024];
    while !String::from_utf8_lossy(seen).contains(want) {
        assert!(
            Instant::now() < end,
            "client never saw {want:?}: {}",
            String::from_utf8_lossy(seen)
        );
        let n = client.read(&mut buf).expect("client read");
        assert!(n > 0, "client closed");
        seen.extend_from_slice(&buf[..n]);
    }
}

/// nats-server 2.15.1 reads what natsd's encoder writes, at every level: a raw route peer
/// negotiates s2_fast with it as the dialler, then sends its INFO, a subscription and
/// messages, each batch an S2 stream of its own at another level; a client on the server
/// receives the messages, and the server's RMSG back to the peer decodes.
#[test]
fn nats_server_215_reads_natsd_s2_streams() {
    let bin = assert_installed_215();
    let (a, _ca) = node(&bin, "A", "compression: s2_fast\n pool_size: -1", None);
    let mut sock = TcpStream::connect(("127.0.0.1", a.route_port)).expect("route connect");
    sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let id = "NFAKEROUTEPEER0000000000000000000000000000000000000000S2";
    let info = |nonce: &str| {
        format!(
            "INFO {{\"server_id\":\"{id}\",\"server_name\":\"fake\",\"version\":\"2.15.1\",\
             \"proto\":3,\"host\":\"127.0.0.1\",\"port\":1,\"headers\":true,\
             \"max_payload\":1048576,\"nonce\":\"{nonce}\",\"cluster\":\"C\",\
             \"compression\":\"s2_fast\"}}\r\n"
        )
    };
    let connect = format!(
        "CONNECT {{\"echo\":true,\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\
         \"headers\":true,\"name\":\"{id}\",\"cluster\":\"C\"}}\r\n"
    );
    sock.write_all(connect.as_bytes()).expect("CONNECT");
    // The acceptor's INFO in clear.
    let mut plain = BytesMut::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut clear = Vec::new();
    while clear.is_empty() {
        let n = sock.read(&mut buf).expect("read INFO");
        assert!(n > 0, "closed before INFO");
        plain.extend_from_slice(&buf[..n]);
        lines(&mut plain, &mut |l| clear.push(l));
    }
    assert!(clear[0].starts_with("INFO "), "{clear:?}");
    let remote = info_field(&clear[0], "compression");
    assert_eq!(remote, Some("s2_fast".into()));
    // The handshake as natsd's RouteCompression steps it, on the dialler's side.
    let mut rc = RouteCompression::new(CompressionOpts::new(CompressionMode::S2Fast), true);
    assert!(rc.hold_info() && rc.hold_pings());
    let step = rc.on_info(
        remote.as_ref().and_then(|v| v.as_str()),
        Duration::from_millis(1),
    );
    let Ok(InfoStep::Switch {
        level,
        info_mode,
        info_in_clear: true,
        ..
    }) = step
    else {
        panic!("expected a dialler's switch, got {step:?}");
    };
    assert_eq!((level, info_mode), (Level::Fast, CompressionMode::S2Fast));
    // Our negotiation INFO in clear; from then on both directions are compressed.
    sock.write_all(info("n1").as_bytes()).expect("INFO");
    let mut dec = Decoder::new();
    dec.feed(&plain);
    let mut p = Peer {
        sock,
        enc: Encoder::new(level),
        dec,
        out: BytesMut::new(),
        got: Vec::new(),
    };
    p.read_until("compressed INFO", |l| l.starts_with("INFO "));
    let second = p
        .got
        .iter()
        .find(|l| l.starts_with("INFO "))
        .cloned()
        .unwrap_or_default();
    let remote = info_field(&second, "compression");
    assert_eq!(
        rc.on_info(
            remote.as_ref().and_then(|v| v.as_str()),
            Duration::from_millis(1)
        ),
        Ok(InfoStep::AfterSwitch {
            info_mode: CompressionMode::S2Fast
        })
    );
    p.send(Level::Uncompressed, &info("n2"));
    p.send(Level::Fast, "RS+ $G s2.to.peer\r\nPING\r\n");
    p.read_until("PONG", |l| l == "PONG");
    // A client on A subscribes to what the peer sends, publishes to what the peer wants.
    let mut client = TcpStream::connect(a.client).expect("client");
    client.set_read_timeout(Some(DEADLINE)).expect("timeout");
    client
        .write_all(
            b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB s2.from.peer 1\r\nPING\r\n",
        )
        .expect("client");
    let mut seen = Vec::new();
    client_read_until(&mut client, &mut seen, "PONG");
    p.read_until("RS+ for the client", |l| {
        l.starts_with("RS+ $G s2.from.peer")
    });
    let body = "x".repeat(300);
    let levels = [Level::Uncompressed, Level::Fast, Level::Better, Level::Best];
    for (i, level) in levels.into_iter().enumerate() {
        p.send(
            level,
            &format!("RMSG $G s2.from.peer 304\r\nmsg{i}{body}\r\n"),
        );
    }
    client_read_until(&mut client, &mut seen, "msg3");
    let text = String::from_utf8_lossy(&seen).into_owned();
    for i in 0..4 {
        assert!(
            text.contains(&format!("msg{i}{body}")),
            "message {i} missing: {text}"
        );
    }
    // And the server's RMSG to the peer, compressed, decodes.
    client
        .write_all(b"PUB s2.to.peer 5\r\nhello\r\n")
        .expect("pub");
    p.read_until("RMSG", |l| l.starts_with("RMSG $G s2.to.peer"));
    p.read_until("payload", |l| l == "hello");
}

/// `natsd -t` accepts the `cluster { compression }` configs nats-server 2.15.1 accepts and
/// refuses those it refuses. nats-server's `-t` only parses (it validates the mode at
/// startup), so its verdict here is `-t` and then a start: ready = accepted, exit = refused.
#[test]
fn natsd_check_agrees_with_nats_server_215_on_compression_configs() {
    use common::binary::{line_channel, run_within, BIN};
    let bin = assert_installed_215();
    let cases = [
        ("s2_fast", true),
        ("on", true),
        ("off", true),
        ("accept", true),
        ("not_supported", true),
        ("\"S2_Best\"", true),
        ("{ mode: auto, rtt_thresholds: [1ms, 2ms, 3ms, 4ms] }", true),
        ("{ rtt_thresholds: [10ms, 5ms] }", true),
        ("{ mode: fast, rtt_thresholds: [10ms, 5ms] }", true),
        ("{ mode: auto, rtt: [1m] }", true),
        ("bogus", false),
        ("s2_uncompressed", false),
        ("5", false),
        ("{ mode: auto, rtt_thresholds: [10ms, 5ms] }", false),
        (
            "{ mode: auto, rtt_thresholds: [1ms, 2ms, 3ms, 4ms, 5ms] }",
            false,
        ),
        ("{ mode: auto, rtt_thresholds: [\"0s\"] }", false),
        ("{ mode: auto, foo: 1 }", false),
        ("{ mode: auto, rtt: [1m, 2m] }", false),
    ];
    for (i, (c, accepted)) in cases.into_iter().enumerate() {
        let conf = tempfile_path::write(
            &format!("check{i}"),
            &format!(
                "listen: \"127.0.0.1:-1\"\ncluster {{ name: C, listen: \"127.0.0.1:-1\", compression: {c} }}\n"
            ),
        );
        let path = conf.0.to_string_lossy().into_owned();
        let t = run_within(
            &bin,
            &["-t", "-c", &path],
            DEADLINE,
            Duration::from_millis(10),
        );
        let theirs = t.status.success() && {
            let mut child = std::process::Command::new(&bin)
                .args(["-c", &path])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn nats-server");
            let rx = line_channel(child.stderr.take().expect("stderr"));
            // Ready, or exited (the channel closes at EOF), within the deadline.
            let end = Instant::now() + DEADLINE;
            let mut ready = false;
            while let Ok(l) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                if l.ends_with("Server is ready") {
                    ready = true;
                    break;
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            ready
        };
        assert_eq!(theirs, accepted, "nats-server 2.15.1 on compression: {c}");
        let ours = run_within(
            BIN,
            &["-t", "-c", &path],
            DEADLINE,
            Duration::from_millis(10),
        );
        assert_eq!(
            ours.status.success(),
            accepted,
            "natsd -t on compression: {c}: {}",
            String::from_utf8_lossy(&ours.stderr)
        );
    }
}
