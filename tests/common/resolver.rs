//! Operator mode with the full account resolver, for `tests/resolver_full.rs` and
//! `tests/resolver_js.rs`: an operator and its system account made with the `nkeys` crate,
//! natsd or nats-server 2.15.1 with the resolver in a fresh directory, `$SYS` requests, and
//! clients of pushed accounts.

use super::auth::{open_limits, refused, user_jwt, Target};
use super::binary::tmp_dir;
use natsd::jwt::encode;
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// An operator, its system account and a user of it.
pub struct Op {
    pub op: KeyPair,
    pub sys: KeyPair,
    pub admin: KeyPair,
}

impl Op {
    pub fn new() -> Op {
        Op {
            op: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
            admin: KeyPair::new_user(),
        }
    }

    pub fn account(&self, acc: &KeyPair, name: &str, extra: Value) -> String {
        let mut nats = json!({"type": "account", "version": 2, "limits": open_limits()});
        if let (Some(n), Value::Object(e)) = (nats.as_object_mut(), extra) {
            n.extend(e);
        }
        let jti = format!("{name}-{}", rand::random::<u64>());
        let c = json!({"sub": acc.public_key(), "name": name, "jti": jti, "nats": nats});
        encode(&c, &self.op).expect("account JWT")
    }

    fn operator_jwt(&self) -> String {
        let opc = json!({"sub": self.op.public_key(), "name": "O", "nats": {"type": "operator",
            "version": 2, "system_account": self.sys.public_key()}});
        encode(&opc, &self.op).expect("operator JWT")
    }

    /// Operator mode with the URL resolver at `url` (it serves the system account too; the
    /// resolver is read-only, no preloads); `extra` is appended.
    pub fn url_conf(&self, url: &str, extra: &str) -> String {
        format!(
            "operator: \"{}\"\nsystem_account: {}\nresolver: URL(\"{url}\")\n{extra}\n",
            self.operator_jwt(),
            self.sys.public_key()
        )
    }

    /// Operator mode with the full resolver in `dir` (deletes allowed, packs compared every
    /// second) and the system account preloaded; `extra` is appended.
    pub fn conf(&self, dir: &Path, extra: &str) -> String {
        let op_jwt = self.operator_jwt();
        format!(
            "operator: \"{op_jwt}\"\nsystem_account: {sys}\n\
             resolver {{ type: full, dir: \"{dir}\", allow_delete: true, interval: \"1s\" }}\n\
             resolver_preload {{ {sys}: \"{sys_jwt}\" }}\n{extra}\n",
            sys = self.sys.public_key(),
            sys_jwt = self.account(&self.sys, "SYS", json!({})),
            dir = dir.display(),
        )
    }

    /// natsd (or nats-server 2.15.1 when `go`) with the full resolver in a fresh directory,
    /// and a system-account client of it; `extra` (where `{dir}` names that directory) is
    /// appended to the config.
    pub async fn start(
        &self,
        go: bool,
        tag: &str,
        extra: &str,
    ) -> (Target, std::path::PathBuf, async_nats::Client) {
        let name = format!("{tag}-{}", if go { "go" } else { "natsd" });
        let dir = tmp_dir("resolver", &name);
        let conf = self.conf(&dir, &extra.replace("{dir}", &dir.display().to_string()));
        let t = if go {
            Target::go(&conf, &format!("resolver-{name}"))
        } else {
            Target::natsd(&conf).await
        };
        let admin = self.admin(t.client()).await;
        (t, dir, admin)
    }

    /// [`Op::start`] with JetStream (stored in `<dir>.js`; [`remove_js`] removes both) and
    /// the account JWTs `tokens` pushed.
    pub async fn start_js(
        &self,
        go: bool,
        tag: &str,
        tokens: &[(&KeyPair, String)],
    ) -> (Target, std::path::PathBuf, async_nats::Client) {
        let (t, dir, admin) = self
            .start(go, tag, "jetstream { store_dir: \"{dir}.js\" }")
            .await;
        for (acc, token) in tokens {
            let answer = json_request(&admin, "$SYS.REQ.CLAIMS.UPDATE", token).await;
            assert_eq!(answer["data"], jwt_updated(acc), "{}: {answer}", t.name());
        }
        (t, dir, admin)
    }

    /// A three-node natsd JetStream cluster (`jsc::cluster_with`), each node in operator
    /// mode with the full resolver in `root/<node name>`.
    pub async fn js_cluster(&self, name: &str, root: &Path) -> super::jsc::Js {
        super::jsc::cluster_with(name, 3, |node, opts| {
            let conf = self.conf(&root.join(node), "");
            let base = opts.clone();
            *opts = super::conf_opts(&conf);
            opts.server_name = base.server_name;
            opts.cluster = base.cluster;
            opts.http_port = base.http_port;
            opts.jetstream = base.jetstream;
        })
        .await
    }

    pub async fn admin(&self, addr: SocketAddr) -> async_nats::Client {
        client(addr, &self.admin, &self.sys)
            .await
            .expect("system user")
    }
}

/// A client of a new user of `acc`.
pub async fn client(
    addr: SocketAddr,
    user: &KeyPair,
    acc: &KeyPair,
) -> Result<async_nats::Client, async_nats::ConnectError> {
    let creds = super::auth::creds(&user_jwt(user, acc, json!({})), user);
    async_nats::ConnectOptions::with_credentials(&creds)
        .expect("creds")
        .max_reconnects(Some(0))
        .connect(format!("nats://{addr}"))
        .await
}

pub async fn request(nc: &async_nats::Client, subject: &str, body: &str) -> Vec<u8> {
    let m = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .expect("answer in time")
    .expect("request");
    m.payload.to_vec()
}

pub async fn json_request(nc: &async_nats::Client, subject: &str, body: &str) -> Value {
    serde_json::from_slice(&request(nc, subject, body).await).expect("JSON answer")
}

/// A message published by a user of `acc` at `from` reaches a user of `acc` at `to`.
pub async fn reaches(from: SocketAddr, to: SocketAddr, acc: &KeyPair) {
    use futures::StreamExt;
    let rx = served(to, acc).await;
    let tx = served(from, acc).await;
    let mut sub = rx.subscribe("orders").await.expect("subscribe");
    rx.flush().await.expect("flush");
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            tx.publish("orders", "one".into()).await.expect("publish");
            tx.flush().await.expect("flush");
            if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await
            {
                return m;
            }
        }
    })
    .await
    .expect("the message arrives");
    assert_eq!(&got.payload[..], b"one");
}

/// What the server said before closing, its INFO updates left out (nats-server 2.15.1
/// sends one to the account's clients when the account changes).
pub async fn last_words(r: &mut super::Raw) -> Option<String> {
    let said = refused(r).await?;
    let lines: Vec<&str> = said
        .split('|')
        .filter(|l| !l.starts_with("INFO "))
        .collect();
    Some(lines.join("|"))
}

pub fn stored(dir: &Path, acc: &KeyPair) -> Option<String> {
    std::fs::read_to_string(dir.join(format!("{}.jwt", acc.public_key()))).ok()
}

pub fn jwt_updated(acc: &KeyPair) -> Value {
    json!({"account": acc.public_key(), "code": 200, "message": "jwt updated"})
}

/// `nc` answers "helped" to every request on `help` (until it closes); subscribed and
/// flushed when this returns.
pub async fn serve_help(nc: &async_nats::Client) {
    use futures::StreamExt;
    let mut helper = nc.subscribe("help").await.expect("subscribe");
    nc.flush().await.expect("flush");
    let responder = nc.clone();
    tokio::spawn(async move {
        while let Some(m) = helper.next().await {
            if let Some(r) = m.reply {
                let _ = responder.publish(r, "helped".into()).await;
                let _ = responder.flush().await;
            }
        }
    });
}

/// A client of a new user of `acc` at `addr`, polled for up to 10 s: a server stores a
/// pushed JWT just before it applies it (off the async workers), so "stored" is not yet
/// "served".
pub async fn served(addr: SocketAddr, acc: &KeyPair) -> async_nats::Client {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match client(addr, &KeyPair::new_user(), acc).await {
            Ok(nc) => return nc,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "a user of {} at {addr}: {e}",
                acc.public_key()
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The answer to a request on `subject`, asked again while nobody answers, for up to 10 s.
pub async fn answered(nc: &async_nats::Client, subject: &str, who: &str) -> async_nats::Message {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            nc.request(subject.to_string(), "?".into()),
        )
        .await;
        match r {
            Ok(Ok(m)) => return m,
            Ok(Err(e)) => assert!(
                tokio::time::Instant::now() < deadline,
                "{who}: {subject} never answered: {e}"
            ),
            Err(_) => panic!("{who}: {subject}: no answer in 2 s"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A server name and a `cluster {}` listening on `port`, seeded with `routes`.
pub fn cluster_conf(port: u16, routes: &[u16]) -> String {
    let routes: Vec<String> = routes
        .iter()
        .map(|p| format!("\"nats://127.0.0.1:{p}\""))
        .collect();
    format!(
        "server_name: s{port}\ncluster {{ name: C, listen: \"127.0.0.1:{port}\", routes: [{}] }}",
        routes.join(", ")
    )
}

/// Removes the directories of [`Op::start_js`].
pub fn remove_js(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(format!("{}.js", dir.display()));
}
