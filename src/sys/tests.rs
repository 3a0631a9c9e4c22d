//! Unit tests of `sys/mod.rs`: request subjects and option parsing.

use super::*;

#[test]
fn subjects_cover_ping_and_own_id() {
    let v = request_subjects("NID");
    assert_eq!(v.len(), 25);
    assert!(v.contains(&("$SYS.REQ.SERVER.PING".into(), Endpoint::Statsz)));
    assert!(v.contains(&("$SYS.REQ.SERVER.PING.RAFTZ".into(), Endpoint::Raftz)));
    assert!(v.contains(&("$SYS.REQ.SERVER.PING.CONNZ".into(), Endpoint::Connz)));
    assert!(v.contains(&("$SYS.REQ.SERVER.NID.IDZ".into(), Endpoint::Idz)));
}

#[test]
fn options_parse_or_explain() {
    assert!(parse_options(b"").unwrap().is_empty());
    assert!(parse_options(b"  \n").unwrap().is_empty());
    assert!(parse_options(b"{bad").is_err());
    assert!(parse_options(b"[]").unwrap_err().contains("array"));
    let o = parse_options(br#"{"subscriptions":true,"limit":2,"state":1}"#).unwrap();
    let p = query_params(Endpoint::Connz, &o).unwrap();
    assert_eq!(p["subs"], "1");
    assert_eq!(p["limit"], "2");
    assert_eq!(p["state"], "closed");
    let o = parse_options(br#"{"subscriptions_detail":true,"subscriptions":true}"#).unwrap();
    assert_eq!(
        query_params(Endpoint::Routez, &o).unwrap()["subs"],
        "detail"
    );
    let o = parse_options(br#"{"account":"A","test":"x.y"}"#).unwrap();
    let p = query_params(Endpoint::Subsz, &o).unwrap();
    assert_eq!((p["acc"].as_str(), p["test"].as_str()), ("A", "x.y"));
    let o = parse_options(br#"{"sort":[1]}"#).unwrap();
    assert!(query_params(Endpoint::Connz, &o).is_err());
    // Filters and unknown keys are not the endpoint's: ignored, whatever their type.
    let o = parse_options(br#"{"tags":["a"],"x":{"y":1},"sort":"cid"}"#).unwrap();
    let p = query_params(Endpoint::Connz, &o).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p["sort"], "cid");
    assert!(query_params(Endpoint::Statsz, &o).unwrap().is_empty());
}

#[test]
fn short_hash_is_stable_and_subject_safe() {
    let a = short_hash("NABC");
    assert_eq!(a.len(), 8);
    assert_eq!(a, short_hash("NABC"));
    assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
}
