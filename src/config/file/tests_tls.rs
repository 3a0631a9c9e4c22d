//! `verify_and_map`, `pinned_certs` and `verify_cert_and_check_known_urls` as nats-server
//! parses them.

use super::*;

/// A self-signed certificate and key on disk (the files are loaded at read time); the
/// `cert_file`/`key_file`/`ca_file` part of a tls block.
struct Files(std::path::PathBuf);

impl Files {
    fn new(tag: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("natsd-tlsmap-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
        std::fs::write(dir.join("c.pem"), ck.cert.pem()).expect("cert file");
        std::fs::write(dir.join("k.pem"), ck.signing_key.serialize_pem()).expect("key file");
        Files(dir)
    }

    fn block(&self, extra: &str) -> String {
        let c = self.0.join("c.pem").display().to_string();
        let k = self.0.join("k.pem").display().to_string();
        format!("tls {{ cert_file: \"{c}\", key_file: \"{k}\", ca_file: \"{c}\", {extra} }}")
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const KEY: &str = "0F1E2D3C4B5A69788796A5B4C3D2E1F00F1E2D3C4B5A69788796A5B4C3D2E1F0";

#[test]
fn verify_and_map_and_pinned_certs_on_the_client_port() {
    let f = Files::new("client");
    let t = load_str(&f.block(&format!(
        "verify_and_map: true, pinned_certs: [ \"{KEY}\" ]"
    )))
    .expect("load")
    .options
    .tls
    .expect("tls");
    // verify_and_map implies verify; keys are kept in lower case.
    assert!(t.verify_and_map && t.verify);
    let keys: Vec<&String> = t.pinned_certs.as_ref().expect("pinned").iter().collect();
    assert_eq!(keys, vec![&KEY.to_ascii_lowercase()]);
    // An empty list pins nothing.
    let t = load_str(&f.block("pinned_certs: []"))
        .expect("load")
        .options
        .tls;
    assert_eq!(t.expect("tls").pinned_certs, None);
    // verify_and_map without a CA: the verify error, not a panic.
    let c = f.0.join("c.pem").display().to_string();
    let k = f.0.join("k.pem").display().to_string();
    let e = load_str(&format!(
        "tls {{ cert_file: \"{c}\", key_file: \"{k}\", verify_and_map: true }}"
    ))
    .expect_err("no CA");
    assert!(e.msg.contains("needs a ca_file"), "{e}");
}

#[test]
fn bad_values_are_config_errors() {
    let f = Files::new("bad");
    for (extra, want) in [
        (
            "pinned_certs: [ \"abc\" ]",
            "'pinned_certs' key abc does not look like hex-encoded sha256 of DER encoded \
             SubjectPublicKeyInfo",
        ),
        ("pinned_certs: [ \"zz\" ]", "key zz does not look like"),
        (
            "pinned_certs: \"x\"",
            "expected 'pinned_certs' to be a list",
        ),
        (
            "verify_cert_and_check_known_urls: true",
            "verify_cert_and_check_known_urls not supported in this context",
        ),
        ("verify_and_map: 1", "verify_and_map"),
    ] {
        let e = load_str(&f.block(extra)).expect_err(extra);
        assert!(e.msg.contains(want), "{extra}: {e}");
    }
    // Leafnodes are a client context too.
    let e = load_str(&format!(
        "leafnodes {{ port: -1, {} }}",
        f.block("verify_cert_and_check_known_urls: true")
    ))
    .expect_err("leafnodes");
    assert!(e.msg.contains("not supported in this context"), "{e}");
    // verify_and_map is taken there too.
    let o = load_str(&format!(
        "leafnodes {{ port: -1, {} }}",
        f.block("verify_and_map: true")
    ))
    .expect("leafnodes")
    .options;
    let t = o.leafnodes.and_then(|l| l.tls).expect("leaf tls");
    assert!(t.verify_and_map && t.verify);
}

#[test]
fn routes_and_gateways_check_known_urls_and_pin() {
    let f = Files::new("peers");
    let extra = format!("verify_cert_and_check_known_urls: true, pinned_certs: [ \"{KEY}\" ]");
    let o = load_str(&format!(
        "cluster {{ port: -1, {} }}\ngateway {{ name: A, port: -1, {} }}",
        f.block(&extra),
        f.block(&extra)
    ))
    .expect("load")
    .options;
    let o2 = load_str(&format!(
        "cluster {{ port: -1, {} }}",
        f.block("verify_and_map: true")
    ))
    .expect("load")
    .options;
    assert!(o2
        .cluster
        .and_then(|c| c.tls)
        .is_some_and(|t| t.verify_and_map));
    // In a remote's block (a connection we dial) it is read and changes nothing, as in
    // nats-server: a config that reuses one tls block everywhere loads.
    let o3 = load_str(&format!(
        "gateway {{ name: A, port: -1, gateways [ {{ name: B, url: \"nats://h:1\", {} }} ] }}",
        f.block("verify_and_map: true")
    ))
    .expect("remote")
    .options;
    let remote = o3.gateway.map(|g| g.gateways[0].tls.clone());
    assert!(
        remote.is_some_and(|t| t.is_some_and(|t| !t.verify_and_map && !t.verify)),
        "the remote's block keeps no mapping"
    );
    let bad = load_str(&format!(
        "leafnodes {{ remotes [ {{ url: \"nats://h:1\", {} }} ] }}",
        f.block("verify_and_map: 3")
    ));
    assert!(bad.is_err(), "a bad value is still refused");
    // A leaf remote's pinned_certs: checked, then unused (nats-server checks a hub against
    // the leafnodes block's list).
    let pin = format!("pinned_certs: [\"{}\"]", "ab".repeat(32));
    let remote = |b: &str| {
        load_str(&format!(
            "leafnodes {{ remotes [ {{ url: \"nats://h:1\", {} }} ] }}",
            f.block(b)
        ))
    };
    assert!(remote(&pin).is_ok(), "{:?}", remote(&pin).err());
    assert!(remote("pinned_certs: [\"not hex\"]").is_err());
    for t in [
        o.cluster.and_then(|c| c.tls).expect("cluster tls"),
        o.gateway.and_then(|g| g.tls).expect("gateway tls"),
    ] {
        assert!(t.check_known_urls && t.verify);
        assert_eq!(t.pinned_certs.map(|p| p.len()), Some(1));
    }
}
