//! The response mappings of service imports: singletons, streams, expiry and the cap.

use super::*;

fn waiting(singleton: bool, expires: Instant) -> Waiting {
    Waiting {
        acc: Weak::new(),
        reply: Bytes::from_static(b"_INBOX.x"),
        singleton,
        expires,
    }
}

#[test]
fn singleton_mapping_ends_with_first_response() {
    let now = Instant::now();
    let mut p = Pending::new(10);
    p.insert("a".into(), waiting(true, now + Duration::from_secs(5)), now);
    assert!(p.take("a", now).is_some());
    assert!(p.take("a", now).is_none());
    assert!(p.is_empty());
}

#[test]
fn stream_mapping_lasts_until_threshold() {
    let now = Instant::now();
    let mut p = Pending::new(10);
    p.insert(
        "a".into(),
        waiting(false, now + Duration::from_secs(5)),
        now,
    );
    assert!(p.take("a", now).is_some());
    assert!(p.take("a", now + Duration::from_secs(4)).is_some());
    assert!(p.take("a", now + Duration::from_secs(5)).is_none());
    assert!(p.is_empty());
}

#[test]
fn expired_mappings_are_swept_on_insert() {
    let now = Instant::now();
    let mut p = Pending::new(100);
    for i in 0..50 {
        p.insert(
            format!("t{i}"),
            waiting(true, now + Duration::from_secs(1)),
            now,
        );
    }
    assert_eq!(p.len(), 50);
    let later = now + Duration::from_secs(2);
    p.insert(
        "new".into(),
        waiting(true, later + Duration::from_secs(1)),
        later,
    );
    assert_eq!(p.len(), 1);
}

#[test]
fn cap_bounds_pending_mappings_oldest_first() {
    let now = Instant::now();
    let mut p = Pending::new(3);
    for i in 0..10 {
        p.insert(
            format!("t{i}"),
            waiting(true, now + Duration::from_secs(60)),
            now,
        );
        assert!(p.len() <= 3);
    }
    assert!(p.take("t0", now).is_none());
    assert!(p.take("t9", now).is_some());
    // Answered singletons leave stale order entries; they stay bounded too.
    for i in 10..1000 {
        let t = format!("t{i}");
        p.insert(t.clone(), waiting(true, now + Duration::from_secs(60)), now);
        assert!(p.take(&t, now).is_some());
    }
    assert!(p.order.len() <= 2 * 3 + 1);
}

#[test]
fn request_info_header_is_added() {
    assert_eq!(
        request_info_header(None, r#"{"acc":"B"}"#),
        b"NATS/1.0\r\nNats-Request-Info: {\"acc\":\"B\"}\r\n\r\n"
    );
    assert_eq!(
        request_info_header(Some(b"NATS/1.0\r\nK: v\r\n\r\n"), r#"{"acc":"B"}"#),
        b"NATS/1.0\r\nK: v\r\nNats-Request-Info: {\"acc\":\"B\"}\r\n\r\n"
    );
}
