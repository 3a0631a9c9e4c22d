//! A configured user's `allow_responses` and `allowed_connection_types` (issue 19 item 4),
//! side by side with nats-server 2.15.1 on the same config: a responder whose publish
//! permissions allow nothing may answer the reply subject of each request it gets (`true`:
//! once, within two minutes; `{ max, expires }`), and a user kept to one connection type is
//! refused as any other (leaf connections: tests/leafnode_auth.rs).

mod common;

use common::auth::{answers, pub_denied, Target};
use common::Raw;

const CONF: &str = "authorization { users [
  { user: q, password: q }
  { user: once, password: pw, permissions: { subscribe: \"svc1\", allow_responses: true } }
  { user: twice, password: pw, permissions: {
      publish: \"log\", subscribe: \"svc2\", allow_responses: { max: 2, expires: \"1m\" } } }
  { user: leafonly, password: pw, allowed_connection_types: [\"LEAFNODE\"] }
  { user: std, password: pw, allowed_connection_types: [\"standard\", \"WEBSOCKET\"] }
] }\n";

async fn login(t: &Target, user: &str, pass: &str) -> Raw {
    let c = format!(r#"{{"user":"{user}","pass":"{pass}","verbose":false}}"#);
    Raw::connected_at(t.client(), &c).await
}

#[tokio::test]
async fn allow_responses_lets_a_user_answer_what_it_was_asked_as_nats_server() {
    for t in [Target::natsd(CONF).await, Target::go(CONF, "allow-resp")] {
        let who = t.name();
        let mut q = login(&t, "q", "q").await;
        let mut once = login(&t, "once", "pw").await;
        let mut twice = login(&t, "twice", "pw").await;
        assert!(
            answers(&mut once, "SUB svc1 1\r\n").await.is_empty(),
            "{who}"
        );
        assert!(
            answers(&mut twice, "SUB svc2 1\r\n").await.is_empty(),
            "{who}"
        );
        let req = "SUB _INBOX.a 9\r\nPUB svc1 _INBOX.a 1\r\nq\r\nPUB svc2 _INBOX.b 1\r\nq\r\n";
        assert!(answers(&mut q, req).await.is_empty(), "{who}");
        assert_eq!(once.next_non_ping().await, "MSG svc1 1 _INBOX.a 1", "{who}");
        assert_eq!(once.line().await, "q");
        // `true`: one answer; a second, or any other subject, is a violation.
        let cmds = "PUB _INBOX.a 1\r\na\r\nPUB _INBOX.a 1\r\nb\r\nPUB other 1\r\nc\r\n";
        assert_eq!(
            answers(&mut once, cmds).await,
            vec![pub_denied("_INBOX.a"), pub_denied("other")],
            "{who}"
        );
        // `max: 2` beside an allow list.
        assert_eq!(
            twice.next_non_ping().await,
            "MSG svc2 1 _INBOX.b 1",
            "{who}"
        );
        assert_eq!(twice.line().await, "q");
        let cmds = "PUB log 0\r\n\r\nPUB _INBOX.b 0\r\n\r\nPUB _INBOX.b 0\r\n\r\n\
                    PUB _INBOX.b 0\r\n\r\nPUB _INBOX.a 0\r\n\r\n";
        assert_eq!(
            answers(&mut twice, cmds).await,
            vec![pub_denied("_INBOX.b"), pub_denied("_INBOX.a")],
            "{who}"
        );
        assert_eq!(q.next_non_ping().await, "MSG _INBOX.a 9 1", "{who}");
        assert_eq!(q.line().await, "a");
        t.stop().await;
    }
}

#[tokio::test]
async fn a_user_kept_to_other_connection_types_is_no_client_as_nats_server() {
    for t in [Target::natsd(CONF).await, Target::go(CONF, "conn-types")] {
        let who = t.name();
        let mut r = Raw::at(t.client()).await;
        r.send("CONNECT {\"user\":\"leafonly\",\"pass\":\"pw\"}\r\nPING\r\n")
            .await;
        assert_eq!(r.line().await, "-ERR 'Authorization Violation'", "{who}");
        assert!(r.closed().await, "{who}");
        // Listed in any case, among others: a client.
        let _std = login(&t, "std", "pw").await;
        t.stop().await;
    }
}
