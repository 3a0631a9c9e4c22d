//! `$SYS.REQ.USER.INFO` (nats-server 2.10+): a user of any account, the system account
//! included, asks who it is and gets its user, account and permissions — natsd beside
//! nats-server 2.15.1 on the same config, compared field by field.

mod common;

use common::auth::Target;
use common::Raw;
use serde_json::Value;

const CONF: &str = r#"
accounts {
  A { users [
    { user: a, password: a, permissions: {
        publish: { allow: ["x.>", "$SYS.REQ.USER.INFO"], deny: ["x.y"] },
        subscribe: { allow: ["_INBOX.>"] },
        allow_responses: { max: 2, expires: "1m" } } },
    { user: c, password: c, permissions: { publish: ["c.>", "$SYS.REQ.USER.INFO"] } },
    { user: b, password: b } ] }
  SYS { users [ { user: s, password: s } ] }
}
system_account: SYS
"#;

/// The `data` of the answer `user` gets, its lists sorted; and how many answers came.
async fn user_info(t: &Target, user: &str) -> (Value, usize) {
    let mut r = Raw::at(t.client()).await;
    r.send(&format!(
        "CONNECT {{\"verbose\":false,\"user\":\"{user}\",\"pass\":\"{user}\",\"headers\":true}}\r\n\
         SUB _INBOX.me 1\r\nPUB $SYS.REQ.USER.INFO _INBOX.me 0\r\n\r\n"
    ))
    .await;
    let (_, _, _, body) = r.msg().await;
    let v: Value = serde_json::from_slice(&body).expect("JSON answer");
    assert!(v["server"]["id"].is_string(), "{v}");
    // Anything else the server sends before the PONG is a second answer.
    r.send("PING\r\n").await;
    let mut more = 0;
    loop {
        let l = r.next_non_ping().await;
        if l == "PONG" {
            break;
        }
        if l.starts_with("MSG ") {
            more += 1;
            r.line().await;
        }
    }
    let mut data = v["data"].clone();
    for side in ["publish", "subscribe"] {
        for list in ["allow", "deny"] {
            if let Some(a) = data["permissions"][side][list].as_array_mut() {
                a.sort_by_key(|x| x.as_str().unwrap_or_default().to_string());
            }
        }
    }
    (data, 1 + more)
}

#[tokio::test]
async fn a_user_learns_its_user_account_and_permissions_as_from_nats_server() {
    let natsd = Target::natsd(CONF).await;
    let go = Target::go(CONF, "user-info");
    for user in ["a", "b", "c", "s"] {
        let (ours, n) = user_info(&natsd, user).await;
        let (theirs, m) = user_info(&go, user).await;
        assert_eq!(ours, theirs, "user {user}");
        assert_eq!((n, m), (1, 1), "user {user}: one answer");
    }
    let (a, _) = user_info(&natsd, "a").await;
    assert_eq!(a["account"], "A", "{a}");
    assert_eq!(a["permissions"]["publish"]["deny"][0], "x.y", "{a}");
    assert_eq!(a["permissions"]["responses"]["max"], 2, "{a}");
    natsd.stop().await;
    go.stop().await;
}
