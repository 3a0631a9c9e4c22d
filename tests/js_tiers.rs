//! Tiered JetStream limits: an account JWT's `tiered_limits` (`"R1"`, `"R3"`, …) hold the
//! streams and consumers of each replica count to that tier's limits alone, as nats-server
//! 2.15.1 does — on one server beside nats-server, and in a three-node cluster (natsd, and
//! 2.15.1 for the API answers).

mod common;

use common::auth::Target;
use common::binary::tmp_dir;
use common::jsc;
use common::resolver::{client, json_request, jwt_updated, stored, Op};
use nkeys::KeyPair;
use serde_json::{json, Value};

/// Account JWT limits with JetStream only in `tiers`.
fn tiered(tiers: Value) -> Value {
    json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1, "tiered_limits": tiers}})
}

/// A tier: unlimited memory, `disk` bytes of file storage, `streams` streams and
/// `consumers` consumers.
fn tier(disk: i64, streams: i64, consumers: i64) -> Value {
    json!({"mem_storage": -1, "disk_storage": disk, "streams": streams, "consumer": consumers})
}

fn stream(name: &str, replicas: u32) -> String {
    json!({"name": name, "subjects": [format!("{name}.>")], "storage": "file",
        "num_replicas": replicas})
    .to_string()
}

fn durable(stream: &str, name: &str, replicas: Option<u32>) -> (String, String) {
    let mut config = json!({"durable_name": name, "ack_policy": "explicit"});
    if let Some(r) = replicas {
        config["num_replicas"] = json!(r);
    }
    (
        format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
        json!({"stream_name": stream, "config": config}).to_string(),
    )
}

fn code(v: &Value) -> &Value {
    &v["error"]["err_code"]
}

const KB: usize = 1000;

/// A publish answered by its stream (the ack or the refusal), sent again with the same
/// `Nats-Msg-Id` while nobody answers: a client of a node the stream's interest has not
/// reached yet gets no responders.
async fn publish(nc: &async_nats::Client, subject: &str, body: &str) -> Value {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", format!("{}", rand::random::<u64>()).as_str());
    let deadline = tokio::time::Instant::now() + jsc::WAIT;
    loop {
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            nc.request_with_headers(
                subject.to_string(),
                headers.clone(),
                body.to_string().into(),
            ),
        )
        .await;
        if let Ok(Ok(m)) = r {
            return serde_json::from_slice(&m.payload).expect("JSON answer");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{subject}: no answer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn tiered_limits_on_one_server_as_nats_server() {
    let o = Op::new();
    let (a, b) = (KeyPair::new_account(), KeyPair::new_account());
    for go in [false, true] {
        let tokens = [
            (
                &a,
                o.account(&a, "A", tiered(json!({"R1": tier(4096, 2, 1)}))),
            ),
            (
                &b,
                o.account(&b, "B", tiered(json!({"R3": tier(4096, 2, 1)}))),
            ),
        ];
        let (t, dir, admin) = o.start_js(go, "tiers", &tokens).await;
        let who = t.name();
        let nc = client(t.client(), &KeyPair::new_user(), &a)
            .await
            .expect("A");
        let info = json_request(&nc, "$JS.API.INFO", "").await;
        // The account-wide limits are Go's zero value; the tier has the JWT's.
        assert_eq!(info["limits"]["max_storage"], 0, "{who}: {info}");
        assert_eq!(info["limits"]["max_streams"], 0, "{who}: {info}");
        let r1 = &info["tiers"]["R1"];
        assert_eq!(
            (&r1["limits"]["max_storage"], &r1["limits"]["max_streams"]),
            (&json!(4096), &json!(2)),
            "{who}: {info}"
        );
        assert_eq!(r1["limits"]["max_consumers"], 1, "{who}: {info}");
        assert!(info["tiers"].get("R3").is_none(), "{who}: {info}");

        for s in ["S1", "S2"] {
            let r = json_request(&nc, &format!("$JS.API.STREAM.CREATE.{s}"), &stream(s, 1)).await;
            assert!(r["error"].is_null(), "{who}: {r}");
        }
        let third = json_request(&nc, "$JS.API.STREAM.CREATE.S3", &stream("S3", 1)).await;
        assert_eq!(code(&third), 10027, "{who}: {third}");
        // No tier for three replicas.
        let r3 = json_request(&nc, "$JS.API.STREAM.CREATE.T", &stream("T", 3)).await;
        assert_eq!(code(&r3), 10120, "{who}: {r3}");
        let (subject, body) = durable("S1", "C1", None);
        let c1 = json_request(&nc, &subject, &body).await;
        assert!(c1["error"].is_null(), "{who}: {c1}");
        let (subject, body) = durable("S1", "C2", None);
        let c2 = json_request(&nc, &subject, &body).await;
        assert_eq!(code(&c2), 10026, "{who}: {c2}");

        // 4096 bytes of the tier hold three 1 KB messages; the tier is full for S2 too.
        let big = "x".repeat(KB);
        for seq in 1..=3 {
            let ack = json_request(&nc, "S1.x", &big).await;
            assert_eq!(ack["seq"], seq, "{who}: {ack}");
        }
        for subject in ["S1.x", "S2.x"] {
            let ack = json_request(&nc, subject, &big).await;
            assert_eq!(code(&ack), 10002, "{who}: {ack}");
        }
        let info = json_request(&nc, "$JS.API.INFO", "").await;
        let r1 = &info["tiers"]["R1"];
        assert_eq!(
            (&r1["streams"], &r1["consumers"]),
            (&json!(2), &json!(1)),
            "{who}: {info}"
        );
        let held = r1["storage"].as_u64().expect("storage");
        assert!((3 * KB as u64..=4096).contains(&held), "{who}: {info}");
        assert_eq!(info["storage"], held, "{who}: {info}");
        assert_eq!(info["streams"], 2, "{who}: {info}");

        // B has only an R3 tier: one replica has no limits, three are refused on one server.
        let nb = client(t.client(), &KeyPair::new_user(), &b)
            .await
            .expect("B");
        for body in [
            stream("S", 1),
            json!({"name": "S", "subjects": ["S.>"]}).to_string(),
        ] {
            let r = json_request(&nb, "$JS.API.STREAM.CREATE.S", &body).await;
            assert_eq!(code(&r), 10120, "{who}: {r}");
        }
        let r = json_request(&nb, "$JS.API.STREAM.CREATE.T", &stream("T", 3)).await;
        assert_eq!(code(&r), 10074, "{who}: {r}");
        drop((nc, nb, admin));
        t.stop().await;
        common::resolver::remove_js(&dir);
    }
}

/// The account of the cluster tests: an R1 tier of one stream, an R3 tier of one stream
/// of 4096 bytes with one consumer.
fn cluster_account(o: &Op, c: &KeyPair) -> String {
    let tiers = json!({"R1": tier(100_000, 1, -1), "R3": tier(4096, 1, 1)});
    o.account(c, "C", tiered(tiers))
}

/// What a three-node cluster answers with the tiers of [`cluster_account`].
async fn cluster_api_checks(nc: &async_nats::Client, who: &str) {
    let api = |s: &'static str, b: String| async move { jsc::api(nc, s, &b).await };
    let t = api("$JS.API.STREAM.CREATE.T", stream("T", 3)).await;
    assert!(t["error"].is_null(), "{who}: {t}");
    let t2 = api("$JS.API.STREAM.CREATE.T2", stream("T2", 3)).await;
    assert_eq!(code(&t2), 10027, "{who}: {t2}");
    let s = api("$JS.API.STREAM.CREATE.S", stream("S", 1)).await;
    assert!(s["error"].is_null(), "{who}: {s}");
    let s2 = api("$JS.API.STREAM.CREATE.S2", stream("S2", 1)).await;
    assert_eq!(code(&s2), 10027, "{who}: {s2}");
    let u = api("$JS.API.STREAM.CREATE.U", stream("U", 2)).await;
    assert_eq!(code(&u), 10120, "{who}: {u}");
    // Consumers count in their own replica count's tier.
    for (name, replicas, expect) in [
        ("C1", None, None),
        ("C2", None, Some(10026)),
        ("C3", Some(1), None),
    ] {
        let (subject, body) = durable("T", name, replicas);
        let r = jsc::api(nc, &subject, &body).await;
        assert_eq!(code(&r).as_i64(), expect, "{who} {name}: {r}");
    }
    let info = jsc::api(nc, "$JS.API.INFO", "").await;
    let tiers = &info["tiers"];
    assert_eq!(
        (&tiers["R1"]["streams"], &tiers["R3"]["streams"]),
        (&json!(1), &json!(1)),
        "{who}: {info}"
    );
    assert_eq!(tiers["R3"]["limits"]["max_storage"], 4096, "{who}: {info}");
    assert_eq!(info["streams"], 2, "{who}: {info}");
}

#[tokio::test]
async fn tiered_limits_in_a_natsd_cluster() {
    let o = Op::new();
    let c = KeyPair::new_account();
    let root = tmp_dir("tiers", "natsd-cluster");
    let js = o.js_cluster("tiers-cluster", &root).await;
    let admin = o.admin(js.servers[0].client_addr()).await;
    let answer = json_request(&admin, "$SYS.REQ.CLAIMS.UPDATE", &cluster_account(&o, &c)).await;
    assert_eq!(answer["data"], jwt_updated(&c), "{answer}");
    common::wait_for("every node to store C", || async {
        ["n0", "n1", "n2"]
            .iter()
            .all(|n| stored(&root.join(n), &c).is_some())
    })
    .await;
    let mut clients = Vec::new();
    for s in &js.servers {
        clients.push(common::resolver::served(s.client_addr(), &c).await);
    }
    cluster_api_checks(&clients[0], "natsd").await;
    // Every node answers the same account info (the meta leader counts the streams it
    // holds no copy of).
    for nc in &clients {
        let info = jsc::api(nc, "$JS.API.INFO", "").await;
        assert_eq!(info["tiers"]["R1"]["streams"], 1, "{info}");
    }

    // The R3 tier's 4096 bytes hold three 1 KB messages (once, not per replica); the
    // leader refuses the next before proposing it, and no replica stores it.
    let big = "x".repeat(KB);
    let key = c.public_key();
    let mut acked = 0;
    for _ in 0..6 {
        let ack = publish(&clients[1], "T.x", &big).await;
        if ack["error"].is_null() {
            acked += 1;
            assert_eq!(ack["seq"], acked, "{ack}");
        } else {
            assert_eq!(code(&ack), 10002, "{ack}");
        }
    }
    assert_eq!(acked, 3);
    common::wait_for(
        "every replica to hold the 3 acknowledged messages",
        || async {
            jsc::copies_in(&js, &key, "T")
                .iter()
                .all(|c| c.is_some_and(|(msgs, _)| msgs == 3))
        },
    )
    .await;
    let info = jsc::api(&clients[2], "$JS.API.INFO", "").await;
    let r3 = info["tiers"]["R3"]["storage"].as_u64().expect("R3 storage");
    // Every replica's bytes, as nats-server sums them.
    assert!(r3 >= 3 * 3 * KB as u64, "{info}");

    // Flat limits count every replica (nats-server sums its replicas' usage): 9000 bytes
    // hold two 1 KB messages of an R3 stream.
    let d = KeyPair::new_account();
    let flat = json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1,
        "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
        "mem_storage": -1, "disk_storage": 9000, "streams": -1, "consumer": -1}});
    let answer = json_request(&admin, "$SYS.REQ.CLAIMS.UPDATE", &o.account(&d, "D", flat)).await;
    assert_eq!(answer["data"], jwt_updated(&d), "{answer}");
    let nd = common::resolver::served(js.servers[1].client_addr(), &d).await;
    let f = jsc::api(&nd, "$JS.API.STREAM.CREATE.F", &stream("F", 3)).await;
    assert!(f["error"].is_null(), "{f}");
    let mut acked = 0;
    for _ in 0..4 {
        let ack = publish(&nd, "F.x", &big).await;
        if ack["error"].is_null() {
            acked += 1;
        } else {
            assert_eq!(code(&ack), 10002, "{ack}");
        }
    }
    assert_eq!(acked, 2);
    drop((clients, admin, nd));
    js.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test]
async fn tiered_limits_in_a_nats_server_cluster_answer_the_same() {
    let o = Op::new();
    let c = KeyPair::new_account();
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let d = tmp_dir("tiers", &format!("go{i}"));
        let extra = format!(
            "{}\njetstream {{ store_dir: \"{}.js\" }}",
            common::resolver::cluster_conf(*port, &ports),
            d.display()
        );
        nodes.push(Target::go(&o.conf(&d, &extra), &format!("tiers-go{i}")));
        dirs.push(d);
    }
    let admin = o.admin(nodes[0].client()).await;
    let answer = json_request(&admin, "$SYS.REQ.CLAIMS.UPDATE", &cluster_account(&o, &c)).await;
    assert_eq!(answer["data"], jwt_updated(&c), "{answer}");
    common::wait_for("every node to store C", || async {
        dirs.iter().all(|d| stored(d, &c).is_some())
    })
    .await;
    let nc = common::resolver::served(nodes[0].client(), &c).await;
    cluster_api_checks(&nc, "nats-server 2.15.1").await;
    drop((nc, admin));
    for n in nodes {
        n.stop().await;
    }
    for d in dirs {
        let _ = std::fs::remove_dir_all(format!("{}.js", d.display()));
        let _ = std::fs::remove_dir_all(d);
    }
}
