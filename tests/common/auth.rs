//! Servers and raw clients for the auth tests (`nkeys.rs`, `operator.rs`,
//! `operator_claims.rs`): natsd or nats-server 2.15.1 on the same config, the INFO `nonce`,
//! signing it, reading a refusal, and account and user JWTs made with the `nkeys` crate.

use super::natsserver::{assert_installed_215, launch_bin, NatsServer, Wait};
use super::{conf_opts, http_get, Raw};
use natsd::jwt::encode;
use natsd::Server;
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// One server under test: natsd embedded, or nats-server 2.15.1 as a child process.
pub enum Target {
    Natsd(Server),
    Go(NatsServer),
}

impl Target {
    pub async fn natsd(conf: &str) -> Target {
        let mut o = conf_opts(conf);
        o.http_port = Some(0);
        Target::Natsd(super::start(o).await)
    }

    pub fn go(conf: &str, name: &str) -> Target {
        let dir = super::binary::tmp_dir("nkeys", name);
        let text = format!("listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\n{conf}");
        let path = super::binary::write_conf(&dir, "nats.conf", &text);
        let bin = assert_installed_215();
        let args = ["-c".to_string(), path.to_string_lossy().into_owned()];
        Target::Go(launch_bin(
            &bin,
            &args,
            Wait {
                client: true,
                ..Wait::READY
            },
        ))
    }

    pub fn client(&self) -> SocketAddr {
        match self {
            Target::Natsd(s) => s.client_addr(),
            Target::Go(g) => g.client,
        }
    }

    pub fn http(&self) -> SocketAddr {
        match self {
            Target::Natsd(s) => super::http_addr(s),
            Target::Go(g) => g.http,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Target::Natsd(_) => "natsd",
            Target::Go(_) => "nats-server 2.15.1",
        }
    }

    pub async fn connz(&self, query: &str) -> Value {
        let (code, body) = http_get(self.http(), &format!("/connz?{query}")).await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("connz JSON")
    }

    pub async fn stop(self) {
        if let Target::Natsd(s) = self {
            s.shutdown().await;
        }
    }
}

/// A raw connection and the INFO it got.
pub async fn hello(addr: SocketAddr) -> (Raw, Value) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let mut r = Raw {
        stream,
        buf: Vec::new(),
    };
    let line = r.line().await;
    let json = line.strip_prefix("INFO ").expect("INFO first");
    (r, serde_json::from_str(json).expect("INFO is JSON"))
}

pub fn nonce_of(info: &Value) -> String {
    info["nonce"].as_str().unwrap_or_default().to_string()
}

pub fn sign(kp: &KeyPair, nonce: &str) -> String {
    let raw = kp.sign(nonce.as_bytes()).expect("sign");
    data_encoding::BASE64URL_NOPAD.encode(&raw)
}

/// A CONNECT line to send, made from the nonce the INFO carried.
pub type Attempt<'a> = Box<dyn Fn(&str) -> String + 'a>;

/// What the server answered before closing (`None`: it did not close).
pub async fn refused(r: &mut Raw) -> Option<String> {
    let mut lines = Vec::new();
    while let Some(l) = r.try_line().await {
        lines.push(l);
    }
    (!lines.is_empty() || r.closed().await).then(|| lines.join("|"))
}

// ----- operator mode: JWTs made with the `nkeys` crate -----

/// An account JWT for `acc`, signed by `op`, with `limits` and plain signing keys.
pub fn account_jwt(acc: &KeyPair, op: &KeyPair, limits: Value, signing: &[String]) -> String {
    let c = json!({"sub": acc.public_key(), "name": "acc", "nats": {"type": "account",
        "version": 2, "limits": limits, "signing_keys": signing}});
    encode(&c, op).expect("account JWT")
}

pub fn open_limits() -> Value {
    json!({"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1})
}

/// A user JWT for `user`, issued by `issuer`, with extra `nats` fields.
pub fn user_jwt(user: &KeyPair, issuer: &KeyPair, extra: Value) -> String {
    let mut nats = json!({"type": "user", "version": 2, "subs": -1, "data": -1,
        "payload": -1, "pub": {}, "sub": {}});
    if let (Some(n), Value::Object(e)) = (nats.as_object_mut(), extra) {
        n.extend(e);
    }
    bare_user_jwt(user, issuer, nats)
}

/// A user JWT whose `nats` object is `nats` and nothing else (no limits: a v2 user without
/// them has 0, as a scoped signing key's users must); `exp`, `iat` and `tags` in it move to
/// the claims' top level where the jwt library keeps them (`tags` stays in `nats`).
pub fn bare_user_jwt(user: &KeyPair, issuer: &KeyPair, nats: Value) -> String {
    let mut nats = nats;
    if let Some(n) = nats.as_object_mut() {
        n.entry("type").or_insert("user".into());
        n.entry("version").or_insert(2.into());
    }
    let mut c = json!({"sub": user.public_key(), "name": "u", "nats": nats});
    for k in ["exp", "iat"] {
        if let Some(v) = c["nats"].as_object_mut().and_then(|n| n.remove(k)) {
            c[k] = v;
        }
    }
    encode(&c, issuer).expect("user JWT")
}

pub fn creds(jwt: &str, user: &KeyPair) -> String {
    format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().expect("seed")
    )
}

pub fn connect_jwt(jwt: &str, sig: Option<&str>) -> String {
    let mut c = json!({"verbose": false, "pedantic": false, "protocol": 1, "headers": true,
        "jwt": jwt});
    if let Some(s) = sig {
        c["sig"] = Value::String(s.to_string());
    }
    format!("CONNECT {c}\r\nPING\r\n")
}

/// A raw client logged in with `jwt`, signing with `user`.
pub async fn logged_in(t: &Target, jwt: &str, user: &KeyPair) -> Raw {
    let (mut r, info) = hello(t.client()).await;
    r.send(&connect_jwt(jwt, Some(&sign(user, &nonce_of(&info)))))
        .await;
    assert_eq!(r.line().await, "PONG", "{}", t.name());
    r
}

/// What the server says to `cmds` (INFO lines skipped) up to the PONG of a PING sent after
/// them.
pub async fn answers(r: &mut Raw, cmds: &str) -> Vec<String> {
    r.send(&format!("{cmds}PING\r\n")).await;
    let mut out = Vec::new();
    loop {
        let l = r.next_non_ping().await;
        if l == "PONG" {
            return out;
        }
        if !l.starts_with("INFO ") {
            out.push(l);
        }
    }
}

pub fn pub_denied(s: &str) -> String {
    format!("-ERR 'Permissions Violation for Publish to \"{s}\"'")
}

/// Operator mode with a system account and account `a` (its limits `limits`), as config
/// text: the operator JWT, `system_account`, `resolver: MEMORY` and both account JWTs
/// preloaded.
pub fn operator_conf(a: &KeyPair, limits: Value) -> String {
    let (op, sys) = (KeyPair::new_operator(), KeyPair::new_account());
    let opc = json!({"sub": op.public_key(), "name": "O", "nats": {"type": "operator",
        "version": 2, "system_account": sys.public_key()}});
    let op_jwt = encode(&opc, &op).expect("operator JWT");
    format!(
        "operator: \"{op_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
         resolver_preload {{\n  {sys}: \"{}\"\n  {a}: \"{}\"\n}}\n",
        account_jwt(&sys, &op, open_limits(), &[]),
        account_jwt(a, &op, limits, &[]),
        sys = sys.public_key(),
        a = a.public_key(),
    )
}

/// A raw leaf at leafnode port `port` that sent CONNECT with user JWT `jwt` (the hub's
/// nonce signed with `user`) and a PING.
pub async fn jwt_leaf(port: u16, jwt: &str, user: &KeyPair) -> Raw {
    let mut raw = Raw::at_any(SocketAddr::from(([127, 0, 0, 1], port))).await;
    let first = raw.line().await;
    let info: Value = serde_json::from_str(&first[5..]).expect("INFO");
    let sig = sign(user, info["nonce"].as_str().expect("nonce"));
    let c = json!({"name": "raw", "jwt": jwt, "sig": sig});
    raw.send(&format!("CONNECT {c}\r\nPING\r\n")).await;
    raw
}
