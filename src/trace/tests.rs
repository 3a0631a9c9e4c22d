//! Unit tests of message tracing's header handling: lifting the headers of a traced message,
//! the plain search for the trace header, and replacing or appending a header.

use super::*;

#[test]
fn header_map_lifts_headers_when_a_trace_dest_is_present() {
    let h = b"NATS/1.0\r\nNats-Trace-Dest: trace.a\r\nX: 1\r\nX:  2 \r\nEmpty:\r\n\r\n";
    let m = header_map(h).expect("traced");
    assert_eq!(m["Nats-Trace-Dest"], vec!["trace.a"]);
    assert_eq!(m["X"], vec!["1", "2"]);
    assert!(!m.contains_key("Empty"));
}

#[test]
fn header_map_ignores_disabled_lowercase_and_status_lines() {
    assert!(header_map(b"NATS/1.0\r\nNats-Trace-Dest: trace disabled\r\n\r\n").is_none());
    assert!(header_map(b"NATS/1.0\r\nnats-trace-dest: t\r\n\r\n").is_none());
    assert!(header_map(b"NATS/1.0 503\r\nNats-Trace-Dest: t\r\n\r\n").is_none());
    assert!(header_map(b"NATS/1.0\r\nNats-Trace-Dest:\r\n\r\n").is_none());
    assert!(header_map(b"NATS/1.0\r\nNats-Trace-Dest: t").is_none());
}

#[test]
fn has_trace_header_is_a_plain_search() {
    assert!(has_trace_header(
        b"NATS/1.0\r\nA: b\r\nNats-Trace-Dest: t\r\n\r\n"
    ));
    assert!(!has_trace_header(b"NATS/1.0\r\nNats-Trace-Des: t\r\n\r\n"));
    assert!(!has_trace_header(b"Nats-Trace-Dest"));
}

#[test]
fn set_header_replaces_and_appends_last() {
    let h = b"NATS/1.0\r\nNats-Trace-Hop: 1\r\nA: b\r\n\r\n";
    assert_eq!(
        set_header(h, TRACE_HOP, "1.1"),
        b"NATS/1.0\r\nA: b\r\nNats-Trace-Hop: 1.1\r\n\r\n".to_vec()
    );
    let h = b"NATS/1.0\r\nNats-Trace-Dest: x\r\nNats-Trace-Origin-Account: X\r\n\r\n";
    assert_eq!(
        set_header(h, TRACE_DEST, TRACE_DEST_DISABLED),
        b"NATS/1.0\r\nNats-Trace-Origin-Account: X\r\nNats-Trace-Dest: trace disabled\r\n\r\n"
            .to_vec()
    );
}

#[test]
fn a_sampled_traceparent_alone_is_an_external_trace() {
    let tp = |k: &str, v: &str| format!("NATS/1.0\r\n{k}: {v}\r\n\r\n").into_bytes();
    let id = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331";
    let (m, external) = lift(&tp("TraceParent", &format!("{id}-01"))).expect("sampled");
    assert!(external);
    assert!(m.contains_key("TraceParent"));
    assert!(lift(&tp("traceparent", &format!("{id}-03"))).is_some());
    // Not sampled, flags Go's ParseInt(…, 16, 8) refuses, or not four fields.
    for v in [format!("{id}-00"), format!("{id}-ff"), "00-0af7-01".into()] {
        assert!(lift(&tp("traceparent", &v)).is_none(), "{v}");
    }
    // With a destination too: a plain trace.
    let h = format!("NATS/1.0\r\ntraceparent: {id}-01\r\nNats-Trace-Dest: t\r\n\r\n");
    assert!(!lift(h.as_bytes()).expect("traced").1);
    assert!(has_traceparent(b"NATS/1.0\r\nTRACEPARENT: x\r\n\r\n"));
    assert!(header_map(&tp("traceparent", &format!("{id}-01"))).is_none());
}
