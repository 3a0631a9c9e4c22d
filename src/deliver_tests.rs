//! The fan-out on its own: a stub `Fabric` instead of a server, so what the fan-out tells
//! the rest of the server is visible.

use super::*;
use crate::account::Accounts;
use crate::fabric::Stats;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

#[derive(Default)]
struct Stub {
    stats: Stats,
    accounts: Option<Accounts>,
    internal: Option<Arc<Conn>>,
    /// (subject, delta) of every interest change reported.
    interest: Mutex<Vec<(Bytes, i32)>>,
}

impl Fabric for Stub {
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn no_fast_producer_stall(&self) -> bool {
        false
    }
    fn accounts(&self) -> &Accounts {
        self.accounts.as_ref().expect("accounts")
    }
    fn internal_conn(&self) -> &Arc<Conn> {
        self.internal.as_ref().expect("internal conn")
    }
    fn interest_changed_deferred(
        &self,
        _acc: &Account,
        subject: &Bytes,
        _queue: Option<&Bytes>,
        delta: i32,
        _kicks: &mut Vec<Arc<Conn>>,
    ) {
        self.interest
            .lock()
            .expect("lock")
            .push((subject.clone(), delta));
    }
    fn has_gateways(&self) -> bool {
        false
    }
    fn trace_server_info(&self) -> Option<serde_json::Value> {
        None
    }
    fn to_gateways(
        &self,
        _fan: &mut Fanout,
        _acc: &Account,
        _r: &SublistResult<SubRef>,
        _m: &Msg<'_>,
    ) -> u64 {
        0
    }
}

fn client(cid: u64) -> Arc<Conn> {
    Arc::new(Conn::new(
        cid,
        ConnKind::Client,
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        1 << 20,
    ))
}

fn subscribe(acc: &Account, conn: &Arc<Conn>, subject: &str, max: u64) -> Arc<Subscription> {
    let sub = Arc::new(Subscription {
        conn: conn.clone(),
        subject: Bytes::copy_from_slice(subject.as_bytes()),
        queue: None,
        sid: Bytes::from_static(b"1"),
        max: AtomicU64::new(max),
        delivered: AtomicU64::new(0),
        deny: None,
        weight: 1,
        handler: None,
        traced: false,
    });
    acc.sublist
        .insert(subject.as_bytes(), None, SubRef(sub.clone()))
        .expect("insert");
    conn.subs().insert(sub.clone());
    sub
}

fn written(conn: &Conn) -> String {
    let mut buf = BytesMut::new();
    conn.out.take(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

const HI: Msg<'static> = Msg {
    subject: b"a.b",
    reply: None,
    header: None,
    payload: b"hi",
};

#[test]
fn delivers_and_counts_into_its_fabric() {
    let stub = Arc::new(Stub::default());
    let acc = Account::new("A");
    let sub_conn = client(7);
    subscribe(&acc, &sub_conn, "a.*", 0);
    let mut fan = Fanout::new(stub.clone());
    let origin = Origin::Client { cid: 8, echo: true };
    assert_eq!(fan.publish_in(&acc, &HI, origin), 1);
    fan.flush_counters();
    assert_eq!(written(&sub_conn), "MSG a.b 1 2\r\nhi\r\n");
    assert_eq!(stub.stats.out_msgs.load(Relaxed), 1);
    assert_eq!(stub.stats.out_client_msgs.load(Relaxed), 1);
    assert_eq!(stub.stats.out_client_bytes.load(Relaxed), 2);
}

#[test]
fn retiring_an_auto_unsubscribed_subscription_withdraws_its_interest() {
    let stub = Arc::new(Stub::default());
    let acc = Account::new("A");
    let sub_conn = client(7);
    subscribe(&acc, &sub_conn, "a.b", 1);
    let mut fan = Fanout::new(stub.clone());
    let origin = Origin::Client { cid: 8, echo: true };
    assert_eq!(fan.publish_in(&acc, &HI, origin), 1);
    assert_eq!(fan.retired.len(), 1);
    fan.retire_in(&acc, 0);
    assert!(fan.retired.is_empty());
    assert_eq!(
        *stub.interest.lock().expect("lock"),
        vec![(Bytes::from_static(b"a.b"), -1)]
    );
    assert!(sub_conn.subs().is_empty());
    // Gone from the sublist: the next message reaches nobody.
    assert_eq!(fan.publish_in(&acc, &HI, origin), 0);
}

/// A queue group with a member on the server's own internal connection and one elsewhere:
/// the server's publish without echo (a request for the other servers) always goes to the
/// other member, never to its own handler.
#[test]
fn a_publish_without_echo_skips_the_servers_own_queue_member() {
    let internal = Arc::new(Conn::new(
        1,
        ConnKind::Internal,
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        1 << 20,
    ));
    let stub = Arc::new(Stub {
        internal: Some(internal.clone()),
        ..Stub::default()
    });
    let acc = Account::new("A");
    let own = Arc::new(AtomicU64::new(0));
    let counted = own.clone();
    let handler: crate::account::Handler = Arc::new(move |_, _: &Msg<'_>| {
        counted.fetch_add(1, Relaxed);
    });
    let other = client(7);
    for (conn, handler) in [(&internal, Some(handler)), (&other, None)] {
        let sub = Arc::new(Subscription {
            conn: conn.clone(),
            subject: Bytes::from_static(b"a.b"),
            queue: Some(Bytes::from_static(b"responder")),
            sid: Bytes::from_static(b"1"),
            max: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            deny: None,
            weight: 1,
            handler,
            traced: false,
        });
        acc.sublist
            .insert(b"a.b", Some(b"responder"), SubRef(sub))
            .expect("insert");
    }
    let mut fan = Fanout::new(stub.clone());
    let without_echo = Origin::Client {
        cid: 1,
        echo: false,
    };
    for _ in 0..40 {
        assert_eq!(fan.publish_in(&acc, &HI, without_echo), 1);
    }
    assert_eq!(own.load(Relaxed), 0, "the server's own member took it");
    assert_eq!(written(&other).matches("MSG a.b").count(), 40);
    // With echo (as the server's other publishes), its own member takes its turn.
    let with_echo = Origin::Client { cid: 1, echo: true };
    for _ in 0..40 {
        assert_eq!(fan.publish_in(&acc, &HI, with_echo), 1);
    }
    assert!(
        own.load(Relaxed) > 0,
        "never its own member in 40 publishes"
    );
}
