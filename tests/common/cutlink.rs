//! A TCP link between two test processes that the test can cut and heal: a network
//! partition on loopback. While cut, the link's connections are closed and new ones are
//! accepted and closed at once (as a peer behind a dropped network path never answers,
//! the dialer sees no route); healed, it carries connections again.

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Link {
    pub port: u16,
    open: watch::Sender<bool>,
}

impl Link {
    /// A link to `127.0.0.1:target` on a fresh port, open.
    pub async fn start(target: u16) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind link");
        let port = listener.local_addr().expect("link address").port();
        let (open, rx) = watch::channel(true);
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                if *rx.borrow() {
                    tokio::spawn(carry(s, target, rx.clone()));
                }
            }
        });
        Link { port, open }
    }

    pub fn cut(&self) {
        self.open.send_replace(false);
    }

    pub fn heal(&self) {
        self.open.send_replace(true);
    }
}

async fn carry(mut a: TcpStream, target: u16, mut open: watch::Receiver<bool>) {
    let Ok(mut b) = TcpStream::connect(("127.0.0.1", target)).await else {
        return;
    };
    // As natsd's own route sockets: small writes go at once (with Nagle's algorithm a
    // proxy holds a route's small Raft messages back for a delayed ACK, ~40 ms).
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
        _ = open.wait_for(|o| !*o) => {}
    }
}
