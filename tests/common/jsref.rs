//! One JetStream configuration served by natsd (embedded) and by the real nats-server 2.15.1
//! and 2.9.10 (child processes), each with its own store directory, so a test runs the same
//! scenario against all three and compares what a client sees.

use super::natsserver::{self, NatsServer, Wait};
use natsd::Server;
use std::path::PathBuf;

/// One server of the three.
pub struct Ref {
    /// `natsd`, `nats-server 2.15.1` or `nats-server 2.9.10`.
    pub name: &'static str,
    pub url: String,
    dir: PathBuf,
    natsd: Option<Server>,
    _go: Option<NatsServer>,
}

impl Ref {
    pub fn is_natsd(&self) -> bool {
        self.natsd.is_some()
    }

    /// Connect a client (user `u`, password `u`, when given).
    pub async fn client(&self, user: Option<&str>) -> async_nats::Client {
        let o = match user {
            Some(u) => async_nats::ConnectOptions::with_user_and_password(u.into(), u.into()),
            None => async_nats::ConnectOptions::new(),
        };
        o.connect(self.url.as_str())
            .await
            .unwrap_or_else(|e| panic!("{}: connect: {e}", self.name))
    }

    /// Stop the server and remove its store.
    pub async fn stop(mut self) {
        if let Some(s) = self.natsd.take() {
            s.shutdown().await;
        }
        drop(self._go.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// natsd, nats-server 2.15.1 and 2.9.10, each running `conf` (config-file text without a
/// listen address) with `jetstream { store_dir: … }` appended unless `conf` has a
/// `jetstream` block naming `STORE_DIR`, which is replaced by the store directory.
pub async fn each(tag: &str, conf: &str) -> Vec<Ref> {
    natsserver::assert_installed();
    let v215 = natsserver::assert_installed_215();
    let mut out = Vec::new();
    for (name, bin) in [
        ("natsd", None),
        ("nats-server 2.15.1", Some(v215.as_str())),
        ("nats-server 2.9.10", Some(natsserver::NATS_SERVER)),
    ] {
        let dir = super::js_dir(&format!("{tag}-{}", name.replace([' ', '.'], "")));
        std::fs::create_dir_all(&dir).expect("store dir");
        let store = dir.join("store");
        let store = store.to_string_lossy();
        let text = if conf.contains("STORE_DIR") {
            conf.replace("STORE_DIR", &store)
        } else {
            format!("{conf}\njetstream {{ store_dir: \"{store}\" }}\n")
        };
        let r = match bin {
            None => {
                let srv = super::start(super::conf_opts(&text)).await;
                Ref {
                    name,
                    url: srv.client_url(),
                    dir,
                    natsd: Some(srv),
                    _go: None,
                }
            }
            Some(bin) => {
                let path = dir.join("server.conf");
                std::fs::write(&path, format!("listen: 127.0.0.1:-1\n{text}")).expect("conf");
                let go = natsserver::launch_bin(
                    bin,
                    &["-c".to_string(), path.to_string_lossy().into_owned()],
                    Wait {
                        client: true,
                        ..Wait::READY
                    },
                );
                Ref {
                    name,
                    url: format!("nats://{}", go.client),
                    dir,
                    natsd: None,
                    _go: Some(go),
                }
            }
        };
        out.push(r);
    }
    out
}
