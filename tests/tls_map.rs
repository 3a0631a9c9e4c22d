//! `verify_and_map`, `pinned_certs` and `verify_cert_and_check_known_urls`, with the same
//! assertions against natsd and nats-server 2.15.1 on the same config: users found from the
//! client certificate (SAN email, SAN DNS name, subject DN in order or reordered, in the
//! global account or another), refused with `Authorization Violation` when none matches, the
//! mapped user's permissions enforced; pinned certificates on the client, route and gateway
//! ports; routes and gateways accepted by a certificate naming a configured URL's host.

mod common;

use common::natsserver::{assert_installed_215, launch_bin, NatsServer, Wait};
use common::pki::{Issued, Pki};
use common::tlsclient::{tls_to, Tls};
use common::{conf_opts, free_port, http_json};
use natsd::Server;
use rcgen::{DnType, SanType};
use std::net::SocketAddr;

/// natsd embedded or nats-server 2.15.1, on the same config text.
enum Srv {
    Natsd(Server),
    Go(NatsServer),
}

impl Srv {
    async fn natsd(conf: &str) -> Srv {
        let mut o = conf_opts(conf);
        o.http_port = Some(0);
        Srv::Natsd(common::start(o).await)
    }

    fn go(conf: &str, name: &str, wait: Wait) -> Srv {
        let dir = common::binary::tmp_dir("tls-map", name);
        let text = format!("listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n{conf}");
        let path = common::binary::write_conf(&dir, "nats.conf", &text);
        let args = ["-c".to_string(), path.to_string_lossy().into_owned()];
        Srv::Go(launch_bin(&assert_installed_215(), &args, wait))
    }

    /// nats-server 2.15.1 when `go`, else natsd.
    async fn start(go: bool, conf: &str, name: &str, wait: Wait) -> Srv {
        if go {
            Srv::go(conf, name, wait)
        } else {
            Srv::natsd(conf).await
        }
    }

    /// Both servers on `conf` (natsd first).
    async fn both(conf: &str, name: &str, wait: Wait) -> [Srv; 2] {
        [Srv::natsd(conf).await, Srv::go(conf, name, wait)]
    }

    fn client(&self) -> SocketAddr {
        match self {
            Srv::Natsd(s) => s.client_addr(),
            Srv::Go(g) => g.client,
        }
    }

    fn http(&self) -> SocketAddr {
        match self {
            Srv::Natsd(s) => common::http_addr(s),
            Srv::Go(g) => g.http,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Srv::Natsd(_) => "natsd",
            Srv::Go(_) => "nats-server 2.15.1",
        }
    }

    async fn stop(self) {
        if let Srv::Natsd(s) = self {
            s.shutdown().await;
        }
    }
}

const CLIENT: Wait = Wait {
    client: true,
    ..Wait::READY
};

/// CONNECT without credentials, then PING: what the client port answers (`None`: closed
/// without a word).
async fn login(
    t: &Srv,
    pki: &Pki,
    cert: Option<&Issued>,
    then: &str,
) -> (Option<Tls>, Option<String>) {
    let Some(mut c) = tls_to(t.client(), pki, cert, true).await else {
        return (None, None);
    };
    c.send(&format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"protocol\":1}}\r\n{then}PING\r\n"
    ))
    .await;
    let a = c.answer().await;
    (Some(c), a)
}

/// The user and account `/connz?auth=1` shows for the newest connection.
async fn whoami(t: &Srv) -> (String, String) {
    let v = http_json(t.http(), "/connz?auth=1&sort=cid").await;
    let c = v["connections"]
        .as_array()
        .and_then(|a| a.last().cloned())
        .unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("authorized_user"), s("account"))
}

fn tls_block(pki: &Pki, extra: &str) -> String {
    format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", timeout: 3, {extra} }}",
        pki.dir.join("cert.pem").display(),
        pki.dir.join("key.pem").display(),
        pki.dir.join("ca.pem").display()
    )
}

const DN_USER: &str = "CN=carol,OU=NATS.io,O=Synadia,L=Los Angeles,ST=CA,C=US";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_and_map_finds_the_user_as_nats_server() {
    let pki = Pki::new("tlsmap");
    let email = SanType::Rfc822Name("alice@example.com".try_into().expect("email"));
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    // The email comes first even when a DNS name would match too.
    let alice = pki.issue(
        "alice",
        &[(DnType::CommonName, "x")],
        vec![dns("bob.example.com"), email],
    );
    let bob = pki.issue(
        "bob",
        &[(DnType::CommonName, "y")],
        vec![dns("nobody.example.com"), dns("bob.example.com")],
    );
    // Certificate order C, ST, L, O, OU, CN: the user is written CN first.
    let carol = pki.issue(
        "carol",
        &[
            (DnType::CountryName, "US"),
            (DnType::StateOrProvinceName, "CA"),
            (DnType::LocalityName, "Los Angeles"),
            (DnType::OrganizationName, "Synadia"),
            (DnType::OrganizationalUnitName, "NATS.io"),
            (DnType::CommonName, "carol"),
        ],
        vec![],
    );
    // A user written in another RDN order still matches.
    let dave = pki.issue(
        "dave",
        &[
            (DnType::CommonName, "dave"),
            (DnType::OrganizationName, "Acme"),
            (DnType::CountryName, "US"),
        ],
        vec![],
    );
    let mallory = pki.issue(
        "mallory",
        &[(DnType::CommonName, "mallory")],
        vec![dns("evil.example.com")],
    );
    let conf = format!(
        "{}\n\
         authorization {{ users [\n\
           {{ user: \"alice@example.com\", permissions {{ publish: \"alice.>\", subscribe: \"_INBOX.>\" }} }}\n\
           {{ user: \"{DN_USER}\" }}\n\
           {{ user: \"O=Acme, C=US, CN=dave\" }}\n\
         ] }}\n\
         accounts {{ B {{ users [ {{ user: \"bob.example.com\" }} ] }} }}",
        tls_block(&pki, "verify_and_map: true")
    );
    for t in Srv::both(&conf, "map", CLIENT).await {
        let who = t.name();
        let (c, a) = login(&t, &pki, Some(&alice), "").await;
        assert_eq!(a.as_deref(), Some("PONG"), "{who}: alice");
        assert_eq!(whoami(&t).await.0, "alice@example.com", "{who}");
        // Her permissions apply.
        let mut c = c.expect("alice");
        c.send("PUB alice.x 1\r\nx\r\nPUB other 1\r\nx\r\nPING\r\n")
            .await;
        assert_eq!(
            c.answer().await.as_deref(),
            Some("-ERR 'Permissions Violation for Publish to \"other\"'"),
            "{who}"
        );
        let (_bob, a) = login(&t, &pki, Some(&bob), "").await;
        assert_eq!(a.as_deref(), Some("PONG"), "{who}: bob");
        assert_eq!(
            whoami(&t).await,
            ("bob.example.com".into(), "B".into()),
            "{who}"
        );
        let (_carol, a) = login(&t, &pki, Some(&carol), "").await;
        assert_eq!(a.as_deref(), Some("PONG"), "{who}: carol");
        assert_eq!(whoami(&t).await.0, DN_USER, "{who}");
        let (_dave, a) = login(&t, &pki, Some(&dave), "").await;
        assert_eq!(a.as_deref(), Some("PONG"), "{who}: dave");
        assert_eq!(whoami(&t).await.0, "O=Acme, C=US, CN=dave", "{who}");
        // No user for this certificate; CONNECT credentials do not help.
        let (mut c, a) = login(&t, &pki, Some(&mallory), "").await;
        assert_eq!(
            a.as_deref(),
            Some("-ERR 'Authorization Violation'"),
            "{who}"
        );
        assert_eq!(c.as_mut().expect("tls").line().await, None, "{who}: closed");
        let mut m = tls_to(t.client(), &pki, Some(&mallory), true)
            .await
            .expect("tls");
        m.send("CONNECT {\"user\":\"alice@example.com\",\"verbose\":false}\r\nPING\r\n")
            .await;
        assert_eq!(
            m.answer().await.as_deref(),
            Some("-ERR 'Authorization Violation'"),
            "{who}"
        );
        // Without a certificate the handshake (verify) fails.
        let (_, a) = login(&t, &pki, None, "").await;
        assert_eq!(a, None, "{who}: no certificate");
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_certs_on_the_client_port_as_nats_server() {
    let pki = Pki::new("pinclient");
    let good = pki.issue("good", &[(DnType::CommonName, "good")], vec![]);
    let bad = pki.issue("bad", &[(DnType::CommonName, "bad")], vec![]);
    // Upper case in the config is fine.
    let conf = tls_block(
        &pki,
        &format!(
            "verify: true, pinned_certs: [ \"{}\" ]",
            good.spki_sha256.to_uppercase()
        ),
    );
    for t in Srv::both(&conf, "pinclient", CLIENT).await {
        let who = t.name();
        let (_, a) = login(&t, &pki, Some(&good), "").await;
        assert_eq!(a.as_deref(), Some("PONG"), "{who}: pinned");
        // Closed after the handshake without a word.
        let (_, a) = login(&t, &pki, Some(&bad), "").await;
        assert_eq!(a, None, "{who}: not pinned");
        t.stop().await;
    }
}

fn route_conf(pki: &Pki, port: u16, extra: &str, routes: &str) -> String {
    format!(
        "cluster {{ name: C, listen: 127.0.0.1:{port}, {}\n routes: [ {routes} ] }}",
        tls_block(pki, &format!("verify: true, {extra}"))
    )
}

/// A route peer over TLS: the handshake first, then CONNECT and PING; what the route port
/// answers (`None`: closed without a word, or the handshake failed).
async fn route_peer(port: u16, pki: &Pki, cert: &Issued, connect: &str) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut c = tls_to(addr, pki, Some(cert), false).await?;
    c.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
    c.answer().await
}

const ROUTE_CONNECT: &str = "{\"verbose\":false,\"pedantic\":false,\"tls_required\":true,\
    \"name\":\"peer-node\",\"cluster\":\"C\",\"headers\":true}";

const ROUTE: Wait = Wait {
    client: true,
    route: true,
    ..Wait::READY
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_certs_on_routes_as_nats_server() {
    let pki = Pki::new("pinroute");
    let good = pki.issue("good", &[(DnType::CommonName, "good")], vec![]);
    let bad = pki.issue("bad", &[(DnType::CommonName, "bad")], vec![]);
    for go in [false, true] {
        let port = free_port();
        let conf = route_conf(
            &pki,
            port,
            &format!("pinned_certs: [ \"{}\" ]", good.spki_sha256),
            "",
        );
        let t = Srv::start(go, &conf, "pinroute", ROUTE).await;
        let who = t.name();
        assert_eq!(
            route_peer(port, &pki, &good, ROUTE_CONNECT)
                .await
                .as_deref(),
            Some("PONG"),
            "{who}"
        );
        assert_eq!(
            route_peer(port, &pki, &bad, ROUTE_CONNECT).await,
            None,
            "{who}"
        );
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_nodes_route_only_to_a_pinned_peer() {
    use common::cluster::{cluster_opts, node_opts, route_port};
    // B dials A; A pins B's certificate (the node certificate), or another one.
    let pki = Pki::new("pinmesh");
    let other = pki.issue("other", &[(DnType::CommonName, "other")], vec![]);
    let node = |name: &str, seed: Option<u16>, pin: Option<&String>| {
        let mut tls = pki.opts();
        tls.pinned_certs = pin.map(|p| [p.clone()].into_iter().collect());
        natsd::Options {
            cluster: Some(natsd::config::ClusterOpts {
                tls: Some(tls),
                ..cluster_opts(seed)
            }),
            ..node_opts(name, seed)
        }
    };
    for (pin, joins) in [
        (pki.node_spki_sha256(), true),
        (other.spki_sha256.clone(), false),
    ] {
        let a = common::start(node("a", None, Some(&pin))).await;
        let b = common::start(node("b", Some(route_port(&a)), None)).await;
        let routes = || a.shared().cluster.as_ref().map_or(0, |c| c.num_routes());
        if joins {
            common::wait_for("the pinned route", || async { routes() > 0 }).await;
        } else {
            // B keeps retrying; A refuses each try after the handshake.
            let ok = tokio::time::timeout(std::time::Duration::from_millis(1500), async {
                while routes() == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            })
            .await;
            assert!(ok.is_err(), "an unpinned peer routed");
        }
        b.shutdown().await;
        a.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_known_urls_on_routes_as_nats_server() {
    let pki = Pki::new("knownurls");
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    let named = pki.issue(
        "named",
        &[(DnType::CommonName, "x")],
        vec![dns("other.example.com"), dns("Node-B.Example.com")],
    );
    let wild = pki.issue(
        "wild",
        &[(DnType::CommonName, "y")],
        vec![dns("*.example.com")],
    );
    let stranger = pki.issue(
        "stranger",
        &[(DnType::CommonName, "node-b.example.com")],
        vec![
            dns("node-c.example.com"),
            SanType::IpAddress([127, 0, 0, 1].into()),
        ],
    );
    // The route URL is never dialled successfully: only its host matters. Credentials
    // configured for routes are not asked for.
    let block = format!(
        "{}\n authorization {{ user: r, password: p }}\n \
         routes: [ \"nats://node-b.example.com:1\", \"nats://127.0.0.1:1\" ]",
        tls_block(&pki, "verify_cert_and_check_known_urls: true")
    );
    let cases = [
        (&named, "PONG"),
        (&wild, "PONG"),
        // Neither an IP SAN nor the subject counts.
        (&stranger, "-ERR 'Authorization Violation'"),
    ];
    route_answers(&pki, "knownurls", &block, &cases).await;
}

/// What a route port whose cluster block holds `block` answers a peer's CONNECT over TLS
/// with each certificate, on natsd and on nats-server 2.15.1.
async fn route_answers(pki: &Pki, name: &str, block: &str, cases: &[(&Issued, &str)]) {
    for go in [false, true] {
        let port = free_port();
        let conf = format!("cluster {{ name: C, listen: 127.0.0.1:{port}, {block} }}");
        let t = Srv::start(go, &conf, name, ROUTE).await;
        let who = t.name();
        for (cert, want) in cases {
            let got = route_peer(port, pki, cert, ROUTE_CONNECT).await;
            assert_eq!(
                got.as_deref(),
                Some(*want),
                "{who}: {}",
                cert.cert.display()
            );
        }
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_pin_and_check_known_urls() {
    let pki = Pki::new("gwtls");
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    let named = pki.issue(
        "named",
        &[(DnType::CommonName, "x")],
        vec![dns("gw-b.example.com")],
    );
    let stranger = pki.issue(
        "stranger",
        &[(DnType::CommonName, "x")],
        vec![dns("gw-c.example.com")],
    );
    // Pinned, but naming no configured gateway's host.
    let unnamed = pki.issue(
        "unnamed",
        &[(DnType::CommonName, "gw-b.example.com")],
        vec![dns("gw-d.example.com")],
    );
    let connect = "{\"verbose\":false,\"pedantic\":false,\"tls_required\":true,\
        \"name\":\"peer-gw\",\"gateway\":\"B\"}";
    for go in [false, true] {
        let port = free_port();
        let conf = format!(
            "gateway {{ name: A, listen: 127.0.0.1:{port}, {}\n \
             gateways: [ {{ name: B, url: \"nats://gw-b.example.com:1\" }} ] }}",
            tls_block(
                &pki,
                &format!(
                    "verify_cert_and_check_known_urls: true, pinned_certs: [ \"{}\", \"{}\" ]",
                    named.spki_sha256, unnamed.spki_sha256
                )
            )
        );
        let t = Srv::start(
            go,
            &conf,
            "gwtls",
            Wait {
                gateway: true,
                ..CLIENT
            },
        )
        .await;
        let who = t.name();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        // Pinned and named: the gateway CONNECT is taken (no error before our PING's PONG).
        let mut c = tls_to(addr, &pki, Some(&named), false).await.expect("tls");
        c.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
        assert_eq!(c.answer().await.as_deref(), Some("PONG"), "{who}");
        // Pinned but not named: refused at CONNECT.
        let mut c = tls_to(addr, &pki, Some(&unnamed), false)
            .await
            .expect("tls");
        c.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
        assert_eq!(
            c.answer().await.as_deref(),
            Some("-ERR 'Authorization Violation'"),
            "{who}"
        );
        // Not pinned: closed after the handshake.
        let mut c = tls_to(addr, &pki, Some(&stranger), false)
            .await
            .expect("tls");
        c.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
        assert_eq!(c.answer().await, None, "{who}");
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_user_cannot_log_in_by_name_on_the_leafnode_port() {
    // nats-server 2.15: a user without a password that the client port maps is a
    // certificate identity; the leafnode port (no mapping there) does not take its name.
    let pki = Pki::new("tlsmapleaf");
    for go in [false, true] {
        let lport = free_port();
        let conf = format!(
            "{}\nauthorization {{ users [ {{ user: \"alice@example.com\" }}, \
             {{ user: leaf, password: pw }} ] }}\nleafnodes {{ listen: 127.0.0.1:{lport} }}",
            tls_block(&pki, "verify_and_map: true")
        );
        let t = Srv::start(go, &conf, "tlsmapleaf", CLIENT).await;
        let who = t.name();
        for (creds, want) in [
            (
                "\"user\":\"alice@example.com\"",
                "-ERR 'Authorization Violation'",
            ),
            ("\"user\":\"leaf\",\"pass\":\"pw\"", "PONG"),
        ] {
            let addr: SocketAddr = ([127, 0, 0, 1], lport).into();
            let mut r = common::Raw::at(addr).await;
            r.send(&format!(
                "CONNECT {{{creds},\"verbose\":false}}\r\nPING\r\n"
            ))
            .await;
            let got = loop {
                let l = r.next_non_ping().await;
                if l == "PONG" || l.starts_with("-ERR") {
                    break l;
                }
            };
            assert_eq!(got, want, "{who}: {creds}");
        }
        t.stop().await;
    }
}

/// A leaf CONNECT with `fields` over TLS to the leafnode port, then PING: the answer.
async fn leaf_login(lport: u16, pki: &Pki, cert: &Issued, fields: &str) -> Option<String> {
    let addr: SocketAddr = ([127, 0, 0, 1], lport).into();
    let mut c = tls_to(addr, pki, Some(cert), true).await?;
    c.send(&format!(
        "CONNECT {{{fields}\"verbose\":false}}\r\nPING\r\n"
    ))
    .await;
    loop {
        let l = c.answer().await?;
        if l == "PONG" || l.starts_with("-ERR") {
            return Some(l);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_and_map_on_the_leafnode_port_as_nats_server() {
    let pki = Pki::new("tlsmapleafport");
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    let named = pki.issue(
        "named",
        &[(DnType::CommonName, "x")],
        vec![dns("leaf.example.com")],
    );
    let dn = pki.issue(
        "dn",
        &[
            (DnType::OrganizationName, "Acme"),
            (DnType::CommonName, "leafy"),
        ],
        vec![],
    );
    let stranger = pki.issue("stranger", &[(DnType::CommonName, "nobody")], vec![]);
    let deny = "-ERR 'Authorization Violation'";
    for go in [false, true] {
        // The server's users, found from the certificate.
        let lport = free_port();
        let conf = format!(
            "authorization {{ users [ {{ user: \"leaf.example.com\" }}, {{ user: \"CN=leafy, O=Acme\" }} ] }}\n\
             leafnodes {{ listen: 127.0.0.1:{lport}, {} }}",
            tls_block(&pki, "verify_and_map: true")
        );
        let t = Srv::start(go, &conf, "tlsmapleafport", CLIENT).await;
        let who = t.name();
        for (cert, want) in [(&named, "PONG"), (&dn, "PONG"), (&stranger, deny)] {
            let got = leaf_login(lport, &pki, cert, "").await;
            assert_eq!(got.as_deref(), Some(want), "{who}: {}", cert.cert.display());
        }
        // The client port (no mapping there) does not take the mapped user's name.
        let mut r = common::Raw::at(t.client()).await;
        r.send("CONNECT {\"user\":\"leaf.example.com\",\"verbose\":false}\r\nPING\r\n")
            .await;
        assert_eq!(r.next_non_ping().await, deny, "{who}: client port");
        t.stop().await;
        // The leafnodes block's own users: mapped by the names as they are, the password
        // still asked for.
        let lport = free_port();
        let conf = format!(
            "leafnodes {{ listen: 127.0.0.1:{lport}, {}\n \
             authorization {{ users [ {{ user: \"leaf.example.com\", password: pw }} ] }} }}",
            tls_block(&pki, "verify_and_map: true")
        );
        let t = Srv::start(go, &conf, "tlsmapleafusers", CLIENT).await;
        let who = t.name();
        for (cert, fields, want) in [
            (&named, "\"pass\":\"pw\",", "PONG"),
            (&named, "", deny),
            (
                &stranger,
                "\"user\":\"leaf.example.com\",\"pass\":\"pw\",",
                deny,
            ),
        ] {
            let got = leaf_login(lport, &pki, cert, fields).await;
            assert_eq!(got.as_deref(), Some(want), "{who}: {fields}");
        }
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_checks_its_hub_against_the_leafnodes_pinned_certs() {
    // As nats-server: the leafnodes block's `pinned_certs` also applies to the hubs its
    // remotes dial (the hub presents the node certificate).
    let pki = Pki::new("pinleafremote");
    let other = pki.issue("other", &[(DnType::CommonName, "other")], vec![]);
    let remote_tls = format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\" }}",
        pki.dir.join("cert.pem").display(),
        pki.dir.join("key.pem").display(),
        pki.dir.join("ca.pem").display()
    );
    for (pin, joins) in [
        (pki.node_spki_sha256(), true),
        (other.spki_sha256.clone(), false),
    ] {
        let lport = free_port();
        let hub = Srv::natsd(&format!(
            "leafnodes {{ listen: 127.0.0.1:{lport}, {} }}",
            tls_block(&pki, "verify: true")
        ))
        .await;
        let leaf = Srv::natsd(&format!(
            "leafnodes {{ {}\n remotes [ {{ url: \"nats://127.0.0.1:{lport}\", {remote_tls} }} ] }}",
            tls_block(&pki, &format!("pinned_certs: [ \"{pin}\" ]"))
        ))
        .await;
        let leafs = || async {
            let v = http_json(hub.http(), "/varz").await;
            v["leafnodes"].as_u64().unwrap_or(0)
        };
        if joins {
            common::wait_for("the leaf", || async { leafs().await > 0 }).await;
        } else {
            let ok = tokio::time::timeout(std::time::Duration::from_millis(1500), async {
                while leafs().await == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            })
            .await;
            assert!(ok.is_err(), "a leaf connected to a hub it does not pin");
        }
        leaf.stop().await;
        hub.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_and_map_on_routes_as_nats_server() {
    // The cluster's authorization user is the name the certificate must carry; its
    // password is not asked for.
    let pki = Pki::new("tlsmaproute");
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    let named = pki.issue(
        "named",
        &[(DnType::CommonName, "x")],
        vec![dns("route.example.com")],
    );
    let subject = pki.issue(
        "subject",
        &[(DnType::CommonName, "route.example.com")],
        vec![],
    );
    let stranger = pki.issue(
        "stranger",
        &[(DnType::CommonName, "y")],
        vec![dns("z.example.com")],
    );
    let block = format!(
        "{}\n authorization {{ user: \"route.example.com\", password: secret }}",
        tls_block(&pki, "verify_and_map: true")
    );
    let cases = [
        (&named, "PONG"),
        // The subject's string is `CN=route.example.com`: not the user's name.
        (&subject, "-ERR 'Authorization Violation'"),
        (&stranger, "-ERR 'Authorization Violation'"),
    ];
    route_answers(&pki, "tlsmaproute", &block, &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_and_map_on_gateways_as_nats_server() {
    let pki = Pki::new("tlsmapgw");
    let dns = |n: &str| SanType::DnsName(n.try_into().expect("dns"));
    let named = pki.issue(
        "named",
        &[(DnType::CommonName, "x")],
        vec![dns("gw.example.com")],
    );
    let stranger = pki.issue(
        "stranger",
        &[(DnType::CommonName, "y")],
        vec![dns("z.example.com")],
    );
    let connect = "{\"verbose\":false,\"pedantic\":false,\"tls_required\":true,\
        \"name\":\"peer-gw\",\"gateway\":\"B\"}";
    let gw = Wait {
        gateway: true,
        ..CLIENT
    };
    for go in [false, true] {
        let port = free_port();
        let conf = format!(
            "gateway {{ name: A, listen: 127.0.0.1:{port}, {}\n \
             authorization {{ user: \"gw.example.com\", password: secret }} }}",
            tls_block(&pki, "verify_and_map: true")
        );
        let t = Srv::start(go, &conf, "tlsmapgw", gw).await;
        let who = t.name();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        for (cert, want) in [
            (&named, "PONG"),
            (&stranger, "-ERR 'Authorization Violation'"),
        ] {
            let mut c = tls_to(addr, &pki, Some(cert), false).await.expect("tls");
            c.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
            assert_eq!(c.answer().await.as_deref(), Some(want), "{who}");
        }
        t.stop().await;
    }
}
