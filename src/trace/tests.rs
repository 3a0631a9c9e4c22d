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
