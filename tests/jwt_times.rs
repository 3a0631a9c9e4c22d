//! A user JWT's connect windows (`times`, `times_location`), natsd beside nats-server 2.15.1
//! on the same operator config: inside a window the user connects, outside it is refused,
//! any one of several windows will do, the zone moves the window (UTC, America/New_York,
//! Asia/Kolkata and the server's own local zone), and a connection is closed with
//! `User Authentication Expired` when its window ends. Windows are written in each zone's
//! local time as the system's `date` tells it.

mod common;

use common::auth::Target;
use common::auth::{connect_jwt, hello, nonce_of, open_limits, operator_conf, sign, user_jwt};
use common::Raw;
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::time::Duration;

/// The wall-clock time `offset` seconds from now in zone `tz` ("" for the system's local
/// zone), as "HH:MM:SS", from the system's `date`.
fn clock(tz: &str, offset: i64) -> String {
    let mut cmd = std::process::Command::new("date");
    if !tz.is_empty() {
        cmd.env("TZ", tz);
    }
    let out = cmd
        .arg("-d")
        .arg(format!("{offset} seconds"))
        .arg("+%H:%M:%S")
        .output()
        .expect("date runs");
    assert!(out.status.success(), "date: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A window from `from` to `to` seconds from now, in zone `tz`.
fn window(tz: &str, from: i64, to: i64) -> Value {
    json!({"start": clock(tz, from), "end": clock(tz, to)})
}

/// A user of `acc` whose connect windows are `times` in `location`.
fn user(acc: &KeyPair, times: Vec<Value>, location: &str) -> (String, KeyPair) {
    let u = KeyPair::new_user();
    let mut extra = json!({"times": times});
    if !location.is_empty() {
        extra["times_location"] = json!(location);
    }
    (user_jwt(&u, acc, extra), u)
}

/// CONNECT with `jwt` (signed by `user`) and PING: the connection, or what the server
/// answered instead of the PONG.
async fn attempt(t: &Target, jwt: &str, user: &KeyPair) -> Result<Raw, String> {
    let (mut r, info) = hello(t.client()).await;
    r.send(&connect_jwt(jwt, Some(&sign(user, &nonce_of(&info)))))
        .await;
    match r.try_line().await {
        Some(l) if l == "PONG" => Ok(r),
        other => Err(other.unwrap_or_else(|| "closed".into())),
    }
}

/// `f` on natsd, then on nats-server 2.15.1 (its files under a directory named `tag`), each
/// in operator mode with a new account.
async fn both<F, Fut>(tag: &str, f: F)
where
    F: Fn(Target, KeyPair) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for go in [false, true] {
        let acc = KeyPair::new_account();
        let conf = operator_conf(&acc, open_limits());
        let t = if go {
            Target::go(&conf, tag)
        } else {
            Target::natsd(&conf).await
        };
        f(t, acc).await;
    }
}

#[tokio::test]
async fn a_user_connects_only_inside_its_windows_in_its_zone() {
    both("times-zones", |t, acc| async move {
        let who = t.name();
        for tz in ["UTC", "America/New_York", "Asia/Kolkata", ""] {
            // Around now: in.
            let (jwt, u) = user(&acc, vec![window(tz, -3600, 3600)], tz);
            let r = attempt(&t, &jwt, &u).await;
            assert!(r.is_ok(), "{who} {tz:?}: {:?}", r.err());
            // Later today (or tonight): out.
            let (jwt, u) = user(&acc, vec![window(tz, 3600, 7200)], tz);
            assert_eq!(
                attempt(&t, &jwt, &u).await.err().as_deref(),
                Some("-ERR 'Authorization Violation'"),
                "{who} {tz:?}"
            );
            // The same window read in another zone is elsewhere in the day.
            if !tz.is_empty() {
                let other = if tz == "Asia/Kolkata" {
                    "UTC"
                } else {
                    "Asia/Kolkata"
                };
                let (jwt, u) = user(&acc, vec![window(tz, -1800, 1800)], other);
                assert!(
                    attempt(&t, &jwt, &u).await.is_err(),
                    "{who} {tz:?} in {other}"
                );
            }
        }
        t.stop().await;
    })
    .await;
}

#[tokio::test]
async fn any_one_of_several_windows_will_do() {
    both("times-several", |t, acc| async move {
        let who = t.name();
        let tz = "Asia/Kolkata";
        let (jwt, u) = user(
            &acc,
            vec![window(tz, 3600, 7200), window(tz, -600, 600)],
            tz,
        );
        let r = attempt(&t, &jwt, &u).await;
        assert!(r.is_ok(), "{who}: {:?}", r.err());
        let (jwt, u) = user(
            &acc,
            vec![window(tz, 3600, 7200), window(tz, -7200, -3600)],
            tz,
        );
        assert!(attempt(&t, &jwt, &u).await.is_err(), "{who}");
        // A malformed window makes the JWT invalid.
        let (jwt, u) = user(
            &acc,
            vec![json!({"start": "25:00:00", "end": "01:00:00"})],
            tz,
        );
        assert!(attempt(&t, &jwt, &u).await.is_err(), "{who}");
        t.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_connection_closes_when_its_window_ends() {
    both("times-end", |t, acc| async move {
        let who = t.name();
        let tz = "America/New_York";
        let (jwt, u) = user(&acc, vec![window(tz, -3600, 3)], tz);
        let mut r = attempt(&t, &jwt, &u).await.expect("inside the window");
        // Still open a moment later: a PING is answered.
        r.send("PING\r\n").await;
        assert_eq!(r.next_non_ping().await, "PONG", "{who}");
        let expired = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                match r.try_line().await {
                    Some(l) if l.starts_with("-ERR") => return l,
                    Some(_) => {}
                    None => {}
                }
            }
        })
        .await
        .expect("closed within seconds of the window's end");
        assert_eq!(expired, "-ERR 'User Authentication Expired'", "{who}");
        assert!(r.closed().await, "{who}");
        t.stop().await;
    })
    .await;
}
