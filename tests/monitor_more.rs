//! The monitoring endpoints beyond `/varz` and `/connz` — `/subsz` (`/subscriptionsz`),
//! `/accountz`, `/accstatz`, `/leafz`, `/gatewayz`, `/jsz` — and `/connz?state=closed`,
//! compared with the real nats-server 2.9.10 after the same traffic, key by key.
//!
//! nats-server has internal subscriptions natsd does not (~40 in `$SYS`); both have the 3
//! system service imports in `$G` (`$SYS.REQ.ACCOUNT.PING.CONNZ`, …, owned by an internal
//! client). So counts are compared for `$G` only, subscription counts as the change since
//! before the traffic, and listed subscriptions without the `$SYS.` ones.

mod common;

use common::natsserver::{self, same_values, standalone as start_nats_server, NatsServer};
use common::{http_addr, http_get, http_json, start_monitored as start_natsd, wait_for, Raw};
use natsd::Server;
use serde_json::Value;
use std::net::SocketAddr;

/// The traffic both servers get. A subscriber: four subscriptions (one queue, one wildcard,
/// one with an auto-unsubscribe max, sids out of lexical order), two messages to itself and
/// one nobody wants. A publisher: the same subject twice (a sublist cache hit), one more
/// nobody wants.
async fn traffic(addr: SocketAddr) -> (Raw, Raw) {
    let mut sub = Raw::at(addr).await;
    sub.send(concat!(
        r#"CONNECT {"verbose":false,"pedantic":false,"name":"subber"}"#,
        "\r\nSUB foo 1\r\nSUB bar q 2\r\nSUB foo.> 10\r\nSUB baz 3\r\nUNSUB 3 5\r\n",
        "PUB foo 5\r\nhello\r\nPUB foo.x 1\r\na\r\nPUB nobody 3\r\nabc\r\n"
    ))
    .await;
    assert_eq!(sub.msg().await.0, "foo");
    assert_eq!(sub.msg().await.0, "foo.x");
    sub.flush().await;
    let mut publ = Raw::at(addr).await;
    publ.send(concat!(
        r#"CONNECT {"verbose":false,"pedantic":false,"name":"pubber"}"#,
        "\r\nPUB foo 2\r\nhi\r\nPUB foo 2\r\nhi\r\nPUB other 1\r\nx\r\n"
    ))
    .await;
    publ.flush().await;
    assert_eq!(sub.msg().await.3, b"hi");
    assert_eq!(sub.msg().await.3, b"hi");
    sub.flush().await;
    (sub, publ)
}

/// Every field of `theirs` (nats-server) must be in `ours` (natsd) with the same JSON type,
/// recursively, except the `skip`ped keys (at any depth); arrays of the same length. An
/// integer there must be an integer here (Go writes whole floats without a fraction). Extra
/// fields in `ours` are fine.
fn same_shape(path: &str, theirs: &Value, ours: &Value, skip: &[&str], errs: &mut Vec<String>) {
    natsserver::same_shape(path, theirs, ours, skip, true, errs);
}

/// Same keys in the same order (top level), so tools reading the text see the same document.
fn same_keys(what: &str, theirs: &Value, ours: &Value, errs: &mut Vec<String>) {
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    if keys(theirs) != keys(ours) {
        errs.push(format!(
            "{what}: nats-server keys {:?}, natsd keys {:?}",
            keys(theirs),
            keys(ours)
        ));
    }
}

/// The body without the values that differ between any two servers (`server_id`, `now`).
fn scrub(body: &str) -> String {
    body.lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("\"server_id\":") && !t.starts_with("\"now\":")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Both servers' raw answers to `path`: (nats-server, natsd).
async fn both_raw(ns: &NatsServer, nd: &Server, path: &str) -> ((u16, String), (u16, String)) {
    (
        http_get(ns.http, path).await,
        http_get(http_addr(nd), path).await,
    )
}

async fn both(ns: &NatsServer, nd: &Server, path: &str) -> (Value, Value) {
    (
        http_json(ns.http, path).await,
        http_json(http_addr(nd), path).await,
    )
}

/// `/subsz?…subs=1` entries without nats-server's internal `$SYS.` subscriptions, as
/// (account, subject, qgroup, sid, msgs, max), sorted.
fn user_subs(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["subscriptions_list"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| !s["subject"].as_str().unwrap_or("").starts_with("$SYS."))
                .map(|s| {
                    format!(
                        "{} {} {} {} {} {}",
                        s["account"], s["subject"], s["qgroup"], s["sid"], s["msgs"], s["max"]
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn int(v: &Value, p: &str) -> i64 {
    v.pointer(p)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("{p} in {v}"))
}

const G_STATS: &[&str] = &[
    "/num_cache",
    "/num_matches",
    "/cache_hit_rate",
    "/max_fanout",
    "/avg_fanout",
];

#[tokio::test]
async fn more_endpoints_match_nats_server() {
    let ns = start_nats_server();
    let nd = start_natsd().await;
    let mut errs = Vec::new();

    // Before any traffic: `$G`'s counters (nats-server's hold its 3 internal imports).
    let (ns_g0, nd_g0) = both(&ns, &nd, "/subsz?acc=%24G").await;
    let (ns_conns, ns_publ) = traffic(ns.client).await;
    let (nd_conns, nd_publ) = traffic(nd.client_addr()).await;

    // /subsz without a list: the counters alone, in the same order.
    let (ns_s, nd_s) = both(&ns, &nd, "/subsz").await;
    same_keys("subsz", &ns_s, &nd_s, &mut errs);
    same_shape("subsz", &ns_s, &nd_s, &[], &mut errs);

    // `$G`'s counters: equal, subscriptions and inserts as the change since the start.
    let (ns_g, nd_g) = both(&ns, &nd, "/subsz?acc=%24G").await;
    same_keys("subsz?acc=$G", &ns_g, &nd_g, &mut errs);
    same_values("subsz?acc=$G", &ns_g, &nd_g, G_STATS, &mut errs);
    for p in ["/num_subscriptions", "/num_inserts", "/num_removes"] {
        let (dt, dn) = (
            int(&ns_g, p) - int(&ns_g0, p),
            int(&nd_g, p) - int(&nd_g0, p),
        );
        if dt != dn {
            errs.push(format!(
                "subsz?acc=$G{p} change: nats-server {dt}, natsd {dn}"
            ));
        }
    }
    // The client's 4 and the 4 system service imports (2.15's `$SYS.REQ.USER.INFO` too).
    assert_eq!(nd_g["num_subscriptions"], 8, "{nd_g}");
    assert_eq!(nd_g["num_removes"], 0, "{nd_g}");
    // A whole float is written as an integer, as Go does.
    assert!(nd_s["cache_hit_rate"].is_number());

    // The list: every key of nats-server's entries, same user subscriptions.
    let (ns_l, nd_l) = both(&ns, &nd, "/subsz?subs=1&acc=%24G").await;
    same_keys("subsz?subs=1&acc=$G", &ns_l, &nd_l, &mut errs);
    same_values("subsz?subs=1&acc=$G", &ns_l, &nd_l, G_STATS, &mut errs);
    same_values(
        "subsz?subs=1&acc=$G",
        &ns_l,
        &nd_l,
        &["/offset", "/limit"],
        &mut errs,
    );
    if user_subs(&ns_l) != user_subs(&nd_l) {
        errs.push(format!(
            "subsz?subs=1&acc=$G list: nats-server {:?}, natsd {:?}",
            user_subs(&ns_l),
            user_subs(&nd_l)
        ));
    }
    let ns_internal = ns_l["subscriptions_list"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["subject"].as_str().unwrap_or("").starts_with("$SYS."))
                .count() as i64
        })
        .unwrap_or(0);
    assert_eq!(ns_internal, 3, "nats-server's system imports in $G: {ns_l}");
    // natsd also has 2.15's `$SYS.REQ.USER.INFO` import, which this nats-server lacks.
    assert_eq!(int(&ns_l, "/total") + 1, int(&nd_l, "/total"));
    assert_eq!(nd_l["total"], 8);
    // Keys of each entry: compare natsd's entries with nats-server's of the same sid.
    for o in nd_l["subscriptions_list"].as_array().expect("list") {
        if o["subject"].as_str().unwrap_or("").starts_with('$') {
            continue; // the imports' internal subscriptions: their sids are each server's own
        }
        let t = ns_l["subscriptions_list"]
            .as_array()
            .and_then(|a| {
                a.iter().find(|t| {
                    t["sid"] == o["sid"] && !t["subject"].as_str().unwrap_or("").starts_with('$')
                })
            })
            .unwrap_or_else(|| panic!("no nats-server entry like {o}"));
        same_shape("subsz entry", t, o, &[], &mut errs);
        // natsd also has 2.10+'s `account_tag` (newer_monitoring_fields_as_nats_server_2_15).
        let keys = |v: &Value| {
            v.as_object().map(|m| {
                m.keys()
                    .filter(|k| *k != "account_tag")
                    .cloned()
                    .collect::<Vec<_>>()
            })
        };
        if keys(t) != keys(o) {
            errs.push(format!("subsz entry keys: nats-server {t}, natsd {o}"));
        }
    }

    // `test`: the subscriptions a literal subject reaches; whole documents equal but for the
    // counters (nats-server's include `$SYS`) and cids.
    for path in [
        "/subsz?subs=1&test=foo",
        "/subscriptionsz?subs=1&test=foo.bar",
        "/subsz?subs=1&test=baz&acc=%24G",
    ] {
        let (t, o) = both(&ns, &nd, path).await;
        same_keys(path, &t, &o, &mut errs);
        same_shape(path, &t, &o, &[], &mut errs);
        same_values(path, &t, &o, &["/total", "/offset", "/limit"], &mut errs);
        if user_subs(&t) != user_subs(&o) {
            errs.push(format!(
                "{path}: {:?} vs {:?}",
                user_subs(&t),
                user_subs(&o)
            ));
        }
    }
    // Paging past the end, no match, unknown account: the counters alone.
    for path in [
        "/subsz?subs=1&test=nomatch",
        "/subsz?subs=1&acc=%24G&offset=100",
        "/subsz?acc=nope",
        "/subsz?subs=1&acc=nope",
    ] {
        let (t, o) = both(&ns, &nd, path).await;
        same_keys(path, &t, &o, &mut errs);
    }
    let ((_, t), (_, o)) = both_raw(&ns, &nd, "/subsz?acc=nope").await;
    if t != o {
        errs.push(format!("subsz?acc=nope: nats-server {t:?}, natsd {o:?}"));
    }
    // Paging: `total` is the size of the page, as nats-server writes it (the imports' 3
    // internal subscriptions come first — 4 with 2.15's USER.INFO: the internal client's
    // cid is the lowest).
    let o = http_json(http_addr(&nd), "/subsz?subs=1&acc=%24G&offset=5&limit=2").await;
    assert_eq!(
        (o["total"].clone(), o["offset"].clone()),
        (2.into(), 5.into())
    );
    let sids: Vec<&str> = o["subscriptions_list"]
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["sid"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(sids, ["2", "3"]);

    // /accountz: the list, then `$G`'s detail.
    let (t, o) = both(&ns, &nd, "/accountz").await;
    same_keys("accountz", &t, &o, &mut errs);
    same_shape("accountz", &t, &o, &[], &mut errs);
    same_values("accountz", &t, &o, &["/system_account"], &mut errs);
    // (nats-server lists accounts in its map's random order.)
    let names = |v: &Value| {
        let mut n: Vec<String> = v["accounts"]
            .as_array()
            .map(|a| a.iter().map(Value::to_string).collect())
            .unwrap_or_default();
        n.sort();
        n
    };
    assert_eq!(names(&t), names(&o), "accountz accounts");
    let (t, o) = both(&ns, &nd, "/accountz?acc=%24G").await;
    // `imports`: the system service imports, as 2.9.10 lists them (the local subject as
    // `subject`; natsd writes 2.10+'s form, compared in newer_monitoring_fields_…_2_15).
    same_shape("accountz?acc=$G", &t, &o, &["imports"], &mut errs);
    let locals = |v: &Value, key: &str| {
        let mut l: Vec<String> = v["account_detail"]["imports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i[key].as_str().map(str::to_string))
            .collect();
        l.sort();
        l
    };
    // natsd also lists 2.15's `$SYS.REQ.USER.INFO`, which 2.9.10 does not have.
    let mut ours = locals(&o, "local_subject");
    ours.retain(|s| s != "$SYS.REQ.USER.INFO");
    assert_eq!(locals(&t, "subject"), ours, "{t}\n{o}");
    same_values(
        "accountz?acc=$G",
        &t,
        &o,
        &[
            "/system_account",
            "/account_detail/account_name",
            "/account_detail/expired",
            "/account_detail/complete",
            "/account_detail/jetstream_enabled",
            "/account_detail/leafnode_connections",
            "/account_detail/client_connections",
            "/account_detail/sublist_stats/num_matches",
            "/account_detail/sublist_stats/num_cache",
            "/account_detail/sublist_stats/cache_hit_rate",
            "/account_detail/sublist_stats/max_fanout",
            "/account_detail/sublist_stats/avg_fanout",
        ],
        &mut errs,
    );
    // The client's 4 and the 3 system imports on both, and natsd's USER.INFO import (2.15).
    assert_eq!(
        int(&t, "/account_detail/subscriptions") + 1,
        int(&o, "/account_detail/subscriptions")
    );
    assert_eq!(o["account_detail"]["client_connections"], 2);
    let (t, o) = both(&ns, &nd, "/accountz?acc=%24SYS").await;
    // `exports`: nats-server's system services, which natsd does not offer.
    same_shape("accountz?acc=$SYS", &t, &o, &["exports"], &mut errs);
    same_values(
        "accountz?acc=$SYS",
        &t,
        &o,
        &["/account_detail/is_system", "/account_detail/account_name"],
        &mut errs,
    );

    // /accstatz: only accounts with connections; same counters.
    let stat_values = &[
        "/account_statz/0/acc",
        "/account_statz/0/conns",
        "/account_statz/0/leafnodes",
        "/account_statz/0/total_conns",
        "/account_statz/0/sent/msgs",
        "/account_statz/0/sent/bytes",
        "/account_statz/0/received/msgs",
        "/account_statz/0/received/bytes",
        "/account_statz/0/slow_consumers",
    ];
    for path in ["/accstatz", "/accstatz?acc=%24G"] {
        let (t, o) = both(&ns, &nd, path).await;
        same_keys(path, &t, &o, &mut errs);
        same_shape(path, &t, &o, &[], &mut errs);
        same_values(path, &t, &o, stat_values, &mut errs);
    }

    // What natsd does not have, exactly as nats-server writes it without them.
    for path in ["/leafz", "/gatewayz", "/jsz", "/jsz?acc=foo&accounts=1"] {
        let ((st, t), (so, o)) = both_raw(&ns, &nd, path).await;
        assert_eq!((st, so), (200, 200), "{path}");
        if scrub(&t) != scrub(&o) {
            errs.push(format!("{path}: nats-server {t}\n natsd {o}"));
        }
    }

    // Bad parameters: 400 with nats-server's text.
    for path in [
        "/subsz?subs=x",
        "/subsz?limit=x",
        "/subsz?offset=1.5",
        "/subsz?test=foo.*",
        "/accountz?acc=nope",
        "/accstatz?unused=x",
        "/leafz?subs=x",
        "/gatewayz?accs=x",
        "/jsz?offset=x",
        "/jsz?leader-only=maybe",
    ] {
        let ((st, t), (so, o)) = both_raw(&ns, &nd, path).await;
        if (st, t.as_str()) != (so, o.as_str()) {
            errs.push(format!("{path}: nats-server {st} {t:?}, natsd {so} {o:?}"));
        }
    }

    // The clients leave: closed connections keep their subscription count and list.
    drop((ns_conns, ns_publ, nd_conns, nd_publ));
    for addr in [ns.http, http_addr(&nd)] {
        wait_for("both closed connections", || async move {
            http_json(addr, "/connz?state=closed").await["num_connections"] == 2
        })
        .await;
    }
    let (t, o) = both(&ns, &nd, "/connz?state=closed&subs=1").await;
    same_shape("connz?state=closed&subs=1", &t, &o, &[], &mut errs);
    for i in 0..2 {
        let p = format!("/connections/{i}");
        same_values(
            "connz?state=closed&subs=1",
            &t,
            &o,
            &[
                &format!("{p}/name"),
                &format!("{p}/subscriptions"),
                &format!("{p}/in_msgs"),
                &format!("{p}/out_msgs"),
                &format!("{p}/reason"),
            ],
            &mut errs,
        );
        let sorted = |v: &Value| {
            let mut s: Vec<String> = v
                .pointer(&format!("{p}/subscriptions_list"))
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            s.sort();
            s
        };
        if sorted(&t) != sorted(&o) {
            errs.push(format!(
                "closed {p} subscriptions_list: {:?} vs {:?}",
                sorted(&t),
                sorted(&o)
            ));
        }
    }
    assert_eq!(o["connections"][0]["subscriptions"], 4, "{o}");

    // No connections left: /accstatz lists nothing, unless `unused`; counters kept.
    let (t, o) = both(&ns, &nd, "/accstatz").await;
    same_values("accstatz(after)", &t, &o, &["/account_statz"], &mut errs);
    let (mut t, mut o) = both(&ns, &nd, "/accstatz?unused=1").await;
    // natsd also has 2.10+'s `name`, `num_subscriptions` and per-kind counts (checked
    // against 2.15.1 in newer_monitoring_fields_as_nats_server_2_15).
    for a in o["account_statz"].as_array_mut().into_iter().flatten() {
        if let Some(m) = a.as_object_mut() {
            m.remove("name");
            m.remove("num_subscriptions");
            for way in ["sent", "received"] {
                if let Some(w) = m.get_mut(way).and_then(Value::as_object_mut) {
                    w.retain(|k, _| k == "msgs" || k == "bytes");
                }
            }
        }
    }
    // (nats-server lists accounts in its map's random order; natsd by name.)
    if let Some(a) = t["account_statz"].as_array_mut() {
        a.sort_by(|x, y| x["acc"].as_str().cmp(&y["acc"].as_str()));
    }
    same_shape("accstatz?unused=1", &t, &o, &[], &mut errs);
    same_values(
        "accstatz?unused=1",
        &t,
        &o,
        &["/account_statz/0", "/account_statz/1"],
        &mut errs,
    );
    let (t, o) = both(&ns, &nd, "/accountz?acc=%24G").await;
    same_values(
        "accountz?acc=$G(after)",
        &t,
        &o,
        &["/account_detail/client_connections"],
        &mut errs,
    );
    // The imports' subscriptions: 2.9.10's 3 and 2.15's USER.INFO.
    assert_eq!(
        int(&t, "/account_detail/subscriptions") + 1,
        int(&o, "/account_detail/subscriptions")
    );
    assert_eq!(o["account_detail"]["subscriptions"], 4, "the imports: {o}");

    assert!(
        errs.is_empty(),
        "natsd's monitoring differs from nats-server's:\n  {}",
        errs.join("\n  ")
    );
    nd.shutdown().await;
}

#[tokio::test]
async fn sids_sorted_numerically_jsonp_and_index() {
    let nd = start_natsd().await;
    let http = http_addr(&nd);
    let mut c = Raw::client(&nd).await;
    c.send("SUB a 10\r\nSUB b 2\r\nSUB c 1\r\nSUB d x\r\n")
        .await;
    c.flush().await;
    let v = http_json(http, "/connz?subs=detail").await;
    let sids: Vec<&str> = v["connections"][0]["subscriptions_list_detail"]
        .as_array()
        .expect("detail")
        .iter()
        .map(|s| s["sid"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(sids, ["1", "2", "10", "x"]);
    // $G only: the $SYS services' subscriptions (cid 1) are listed too, in $SYS; in $G
    // the client's 4 and the 4 system imports.
    let v = http_json(http, "/subsz?subs=detail&acc=$G").await;
    assert_eq!(v["total"], 8);
    let subjects: Vec<&str> = v["subscriptions_list"]
        .as_array()
        .expect("list")
        .iter()
        .filter(|s| s["cid"] != 1)
        .filter_map(|s| s["subject"].as_str())
        .collect();
    assert_eq!(subjects, ["c", "b", "a", "d"], "{v}");

    let (status, body) = http_get(http, "/subsz?acc=$G&callback=cb").await;
    assert_eq!(status, 200);
    assert!(
        body.starts_with("cb({\n  \"num_subscriptions\": 8,") && body.ends_with("})"),
        "{body}"
    );
    let (status, body) = http_get(http, "/").await;
    assert_eq!(status, 200);
    for link in [
        "varz", "jsz", "connz", "accountz", "accstatz", "subsz", "routez", "leafz", "gatewayz",
        "healthz",
    ] {
        assert!(body.contains(&format!("href=\"{link}\"")), "{link}: {body}");
    }
    // Every endpoint is counted under its own path; the alias as `/subsz`.
    http_get(http, "/subscriptionsz").await;
    let v = http_json(http, "/varz").await;
    assert_eq!(v["http_req_stats"]["/subsz"], 3, "{v}");
    nd.shutdown().await;
}

/// The 2.10+ fields that exporters and dashboards read (issue 15): present in natsd with
/// 2.15.1's names and JSON types after the same traffic, with the same values where both
/// count the same thing: `/varz` and `/jsz` JetStream `limits` (empty in natsd, which has none
/// of those limits; 2.15.1 shows its default `default_max_consumers`), `/accstatz` per-kind
/// counts, `/accountz` system imports in 2.10+'s form and `name_tag`.
#[tokio::test]
async fn newer_monitoring_fields_as_nats_server_2_15() {
    let bin = natsserver::assert_installed_215();
    let dir = common::js_dir("mon215");
    let ours = common::start(natsd::Options {
        http_port: Some(0),
        jetstream: Some(natsd::config::JetStreamOpts {
            store_dir: Some(dir.join("natsd")),
            ..Default::default()
        }),
        ..natsd::Options::local()
    })
    .await;
    let sd = dir.join("go").to_string_lossy().into_owned();
    let args: Vec<String> = ["-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-js", "-sd", &sd]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let theirs = natsserver::launch_bin(
        &bin,
        &args,
        natsserver::Wait {
            client: true,
            ..natsserver::Wait::READY
        },
    );
    let (ours_http, theirs_http) = (http_addr(&ours), theirs.http);
    let _a = traffic(ours.client_addr()).await;
    let _b = traffic(theirs.client).await;
    let mut errs = Vec::new();
    let pick = |v: &Value, keys: &[&str]| -> Value {
        Value::Object(
            keys.iter()
                .filter_map(|k| Some((k.to_string(), v.get(*k)?.clone())))
                .collect(),
        )
    };
    let varz_keys = [
        "in_client_msgs",
        "in_client_bytes",
        "out_client_msgs",
        "out_client_bytes",
        "stale_connections",
        "stalled_clients",
        "stale_connection_stats",
    ];
    let (t, o) = (
        http_json(theirs_http, "/varz").await,
        http_json(ours_http, "/varz").await,
    );
    let (t2, o2) = (pick(&t, &varz_keys), pick(&o, &varz_keys));
    natsserver::same_shape("varz", &t2, &o2, &[], true, &mut errs);
    same_values(
        "varz",
        &t2,
        &o2,
        &["/in_client_msgs", "/out_client_msgs"],
        &mut errs,
    );
    let js = [
        "/jetstream/config/sync_interval",
        "/jetstream/stats/api/level",
    ];
    for p in js {
        if o.pointer(p).is_none() {
            errs.push(format!("varz{p} missing in natsd"));
        }
    }
    assert_eq!(
        o.pointer("/jetstream/config/strict"),
        Some(&Value::Bool(false))
    );
    let (t, o) = (
        http_json(theirs_http, "/jsz").await,
        http_json(ours_http, "/jsz").await,
    );
    for p in [
        "/api/level",
        "/total",
        "/config/sync_interval",
        "/config/strict",
    ] {
        match (t.pointer(p), o.pointer(p)) {
            (Some(a), Some(b)) if natsserver::kind(a) == natsserver::kind(b) => {}
            (a, b) => errs.push(format!("jsz{p}: nats-server {a:?}, natsd {b:?}")),
        }
    }
    same_values("jsz", &t, &o, &["/total"], &mut errs);
    let varz = http_json(ours_http, "/varz").await;
    for (what, v) in [("varz", &varz["jetstream"]), ("jsz", &o)] {
        if v.get("limits").and_then(Value::as_object).is_none() {
            errs.push(format!("{what} limits: not an object in natsd ({v})"));
        }
    }
    if t.pointer("/limits/default_max_consumers").is_none() {
        errs.push(format!("nats-server 2.15.1 /jsz limits changed: {t}"));
    }
    // The system imports: nats-server's, but for 2.10's `$SYS.REQ.USER.INFO` and the
    // `$JS.API.>` one (natsd's JetStream answers in each account: no import).
    let q = "/accountz?acc=$G";
    let (t, o) = (
        http_json(theirs_http, q).await,
        http_json(ours_http, q).await,
    );
    let imports = |v: &Value| {
        let mut l: Vec<String> = v["account_detail"]["imports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["local_subject"] != "$SYS.REQ.USER.INFO" && i["subject"] != "$JS.API.>")
            .map(Value::to_string)
            .collect();
        l.sort();
        l
    };
    if imports(&t) != imports(&o) || imports(&o).len() != 3 {
        errs.push(format!(
            "accountz imports: nats-server {:?}, natsd {:?}",
            imports(&t),
            imports(&o)
        ));
    }
    same_values("accountz", &t, &o, &["/account_detail/name_tag"], &mut errs);
    let q = "/accstatz?acc=$G";
    let (t, o) = (
        http_json(theirs_http, q).await,
        http_json(ours_http, q).await,
    );
    for p in [
        "/account_statz/0/name",
        "/account_statz/0/num_subscriptions",
    ] {
        if o.pointer(p).is_none() {
            errs.push(format!("accstatz{p} missing in natsd ({o})"));
        }
    }
    same_values("accstatz", &t, &o, &["/account_statz/0/name"], &mut errs);
    for way in ["sent", "received"] {
        let p = format!("/account_statz/0/{way}");
        match (t.pointer(&p), o.pointer(&p)) {
            (Some(a), Some(b)) => natsserver::same_shape(&p, a, b, &[], true, &mut errs),
            (a, b) => errs.push(format!("accstatz{p}: nats-server {a:?}, natsd {b:?}")),
        }
    }
    // `/connz?auth=1`: the name tag of the client's account; `account` only when not `$G`.
    let q = "/connz?auth=1";
    let (t, o) = (
        http_json(theirs_http, q).await,
        http_json(ours_http, q).await,
    );
    same_values("connz", &t, &o, &["/connections/0/name_tag"], &mut errs);
    for (who, v) in [("nats-server", &t), ("natsd", &o)] {
        if v.pointer("/connections/0/account").is_some() {
            errs.push(format!("connz?auth=1: {who} writes $G as account: {v}"));
        }
    }
    let q = "/subsz?subs=1&acc=$G";
    let (t, o) = (
        http_json(theirs_http, q).await,
        http_json(ours_http, q).await,
    );
    same_values(
        "subsz",
        &t,
        &o,
        &["/subscriptions_list/0/account_tag"],
        &mut errs,
    );
    for path in ["/ipqueuesz", "/stacksz"] {
        let (code, _) = http_get(ours_http, path).await;
        if code != 200 {
            errs.push(format!("{path}: {code}"));
        }
    }
    assert_eq!(
        http_json(ours_http, "/ipqueuesz").await,
        http_json(theirs_http, "/ipqueuesz").await
    );
    drop(theirs);
    ours.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// `/accstatz` per-kind counts (2.10+) through a natsd cluster: what one node sends to its
/// peer in `$G` is `sent.routes` there and `received.routes` on the peer, and both totals
/// include it; `leafs` and `gateways` stay 0.
#[tokio::test]
async fn accstatz_counts_route_traffic_apart() {
    use common::cluster::{node_opts, route_port};
    let monitored = |name: &str, seed: Option<u16>| natsd::Options {
        http_port: Some(0),
        ..node_opts(name, seed)
    };
    let a = common::start(monitored("a", None)).await;
    let b = common::start(monitored("b", Some(route_port(&a)))).await;
    let mut sub = Raw::client(&b).await;
    sub.send("SUB kinds.x 1\r\n").await;
    sub.flush().await;
    let mut publ = Raw::client(&a).await;
    common::until_delivered(&mut publ, &mut sub, "kinds.x").await;
    let before = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let (a0, b0) = (
        http_json(http_addr(&a), "/accstatz?acc=$G").await,
        http_json(http_addr(&b), "/accstatz?acc=$G").await,
    );
    publ.send("PUB kinds.x 5\r\nhello\r\nPUB kinds.x 2\r\nhi\r\n")
        .await;
    assert_eq!(sub.msg().await.3, b"hello");
    assert_eq!(sub.msg().await.3, b"hi");
    let (a1, b1) = (
        http_json(http_addr(&a), "/accstatz?acc=$G").await,
        http_json(http_addr(&b), "/accstatz?acc=$G").await,
    );
    let delta = |v0: &Value, v1: &Value, p: &str| {
        let p = format!("/account_statz/0/{p}");
        before(v1, &p) - before(v0, &p)
    };
    assert_eq!(delta(&a0, &a1, "sent/routes/msgs"), 2, "{a1}");
    assert_eq!(delta(&a0, &a1, "sent/routes/bytes"), 7, "{a1}");
    assert_eq!(delta(&a0, &a1, "sent/msgs"), 2, "{a1}");
    assert_eq!(delta(&a0, &a1, "received/msgs"), 2, "{a1}");
    assert_eq!(delta(&b0, &b1, "received/routes/msgs"), 2, "{b1}");
    assert_eq!(delta(&b0, &b1, "received/routes/bytes"), 7, "{b1}");
    // Received from the route, then sent to the subscriber.
    assert_eq!(delta(&b0, &b1, "received/msgs"), 2, "{b1}");
    assert_eq!(delta(&b0, &b1, "sent/msgs"), 2, "{b1}");
    for v in [&a1, &b1] {
        for p in [
            "sent/leafs/msgs",
            "received/gateways/msgs",
            "sent/gateways/msgs",
        ] {
            assert_eq!(before(v, &format!("/account_statz/0/{p}")), 0, "{p}: {v}");
        }
    }
    drop((sub, publ));
    b.shutdown().await;
    a.shutdown().await;
}
