//! Tests of the parser as a whole: every op shape, every error, early rejection, and the
//! property that splitting a stream at any byte gives the same ops and the same error.

use super::parser::{Kind, Limits, Op, ParseError, Parser, Queues, RoutedMsg};

/// Parse a stream delivered in `chunks`; ops rendered with `{:?}` so they outlive the buffer.
/// Returns the ops, the error if any, and how many bytes remained unconsumed.
fn drive<'c>(
    kind: Kind,
    limits: Limits,
    chunks: impl IntoIterator<Item = &'c [u8]>,
) -> (Vec<String>, Option<ParseError>, usize) {
    let mut p = Parser::new(kind, limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut ops = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match p.parse(&buf) {
                Ok(Some((op, n))) => {
                    assert!(n > 0 && n <= buf.len());
                    ops.push(format!("{op:?}"));
                    buf.drain(..n);
                }
                Ok(None) => break,
                // What is still buffered after an error depends on the split: not reported.
                Err(e) => return (ops, Some(e), 0),
            }
        }
    }
    (ops, None, buf.len())
}

fn whole(kind: Kind, s: &[u8]) -> (Vec<String>, Option<ParseError>, usize) {
    drive(kind, Limits::default(), [s])
}

/// One-shot, every 2-way split, and byte-by-byte must agree exactly.
fn split_invariant(kind: Kind, s: &[u8]) -> (Vec<String>, Option<ParseError>, usize) {
    let want = whole(kind, s);
    for i in 0..=s.len() {
        let got = drive(kind, Limits::default(), [&s[..i], &s[i..]]);
        assert_eq!(
            got,
            want,
            "split at {i} of {:?}",
            String::from_utf8_lossy(s)
        );
    }
    let got = drive(kind, Limits::default(), s.chunks(1));
    assert_eq!(got, want, "byte by byte");
    let got = drive(kind, Limits::default(), s.chunks(7));
    assert_eq!(got, want, "by 7");
    want
}

fn op1(kind: Kind, s: &[u8]) -> Op<'_> {
    let mut p = Parser::new(kind, Limits::default());
    match p.parse(s) {
        Ok(Some((op, n))) => {
            assert_eq!(n, s.len(), "consumed of {:?}", String::from_utf8_lossy(s));
            op
        }
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(s)),
    }
}

fn err1(kind: Kind, s: &[u8]) -> ParseError {
    let (ops, e, _) = whole(kind, s);
    assert!(ops.is_empty(), "{ops:?}");
    e.unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(s)))
}

const C: Kind = Kind::Client;
const R: Kind = Kind::Route;

#[test]
fn client_ops() {
    assert_eq!(op1(C, b"PING\r\n"), Op::Ping);
    assert_eq!(op1(C, b"ping\r\n"), Op::Ping);
    assert_eq!(op1(C, b"PiNg \t\r\n"), Op::Ping);
    assert_eq!(op1(C, b"PING\n"), Op::Ping);
    assert_eq!(op1(C, b"pong\r\n"), Op::Pong);
    assert_eq!(op1(C, b"+ok\r\n"), Op::Ok);
    assert_eq!(
        op1(C, b"-ERR 'Stale Connection'\r\n"),
        Op::Err(b"Stale Connection")
    );
    assert_eq!(op1(C, b"-err  oops \r\n"), Op::Err(b"oops"));
    let json = br#"{"verbose":false,"pedantic":false,"name":"a b"}"#;
    let mut line = b"CONNECT ".to_vec();
    line.extend_from_slice(json);
    line.extend_from_slice(b"\r\n");
    assert_eq!(op1(C, &line), Op::Connect(json));
    assert_eq!(op1(C, b"connect\t {} \r\n"), Op::Connect(b"{}"));
    assert_eq!(op1(C, b"INFO {}\r\n"), Op::Info(b"{}"));
    let p = |subject, reply, payload| Op::Pub {
        subject,
        reply,
        payload,
    };
    assert_eq!(op1(C, b"PUB foo 5\r\nhello\r\n"), p(b"foo", None, b"hello"));
    assert_eq!(op1(C, b"pub foo 5\nhello\r\n"), p(b"foo", None, b"hello"));
    assert_eq!(
        op1(C, b"Pub\tfoo \t bar\t5 \r\nhello\r\n"),
        p(b"foo", Some(b"bar"), b"hello")
    );
    assert_eq!(op1(C, b"PUB foo 0\r\n\r\n"), p(b"foo", None, b""));
    assert_eq!(
        op1(C, b"PUB foo 4\r\n\r\n\r\n\r\n"),
        p(b"foo", None, b"\r\n\r\n")
    );
    assert_eq!(
        op1(C, b"PUB foo 007\r\n1234567\r\n"),
        p(b"foo", None, b"1234567")
    );
    let hp = op1(C, b"HPUB foo rr 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
    let want = Op::Hpub {
        subject: b"foo",
        reply: Some(b"rr"),
        header: b"NATS/1.0\r\n\r\n",
        payload: b"hi",
    };
    assert_eq!(hp, want);
    let hp = op1(C, b"hpub foo 12 12\r\nNATS/1.0\r\n\r\n\r\n");
    let want = Op::Hpub {
        subject: b"foo",
        reply: None,
        header: b"NATS/1.0\r\n\r\n",
        payload: b"",
    };
    assert_eq!(hp, want);
    assert_eq!(
        op1(C, b"SUB foo 1\r\n"),
        Op::Sub {
            subject: b"foo",
            queue: None,
            sid: b"1"
        }
    );
    assert_eq!(
        op1(C, b"sub foo  q  1\r\n"),
        Op::Sub {
            subject: b"foo",
            queue: Some(b"q"),
            sid: b"1"
        }
    );
    assert_eq!(
        op1(C, b"UNSUB 1\r\n"),
        Op::Unsub {
            sid: b"1",
            max: None
        }
    );
    assert_eq!(
        op1(C, b"unsub 1 10\r\n"),
        Op::Unsub {
            sid: b"1",
            max: Some(10)
        }
    );
}

#[test]
fn route_ops() {
    assert_eq!(
        op1(R, b"RS+ $G foo\r\n"),
        Op::RsPlus {
            account: b"$G",
            subject: b"foo",
            queue: None
        }
    );
    let want = Op::RsPlus {
        account: b"$G",
        subject: b"bar",
        queue: Some((b"q1", 2)),
    };
    assert_eq!(op1(R, b"rs+ $G bar q1 2\r\n"), want);
    let want = Op::RsMinus {
        account: b"$G",
        subject: b"bar",
        queue: Some(b"q1"),
    };
    assert_eq!(op1(R, b"RS- $G bar q1\r\n"), want);
    assert_eq!(
        op1(R, b"RS- $G bar\r\n"),
        Op::RsMinus {
            account: b"$G",
            subject: b"bar",
            queue: None
        }
    );
    let want = Op::LsPlus {
        origin: b"L",
        account: b"$G",
        subject: b"x",
        queue: Some((b"q", 3)),
    };
    assert_eq!(op1(R, b"LS+ L $G x q 3\r\n"), want);
    let want = Op::LsMinus {
        origin: None,
        account: b"$G",
        subject: b"x",
        queue: Some(b"q"),
    };
    assert_eq!(op1(R, b"LS- $G x q\r\n"), want);
    let mut p = Parser::new(R, Limits::default());
    p.set_lnocu(true);
    let want = Op::LsMinus {
        origin: Some(b"L"),
        account: b"$G",
        subject: b"x",
        queue: None,
    };
    assert_eq!(p.parse(b"LS- L $G x\r\n"), Ok(Some((want, 12))));
    assert_eq!(op1(R, b"A+ ACC\r\n"), Op::AccPlus(b"ACC"));
    assert_eq!(op1(R, b"a- ACC\r\n"), Op::AccMinus(b"ACC"));
    assert_eq!(op1(R, b"PING\r\n"), Op::Ping);
    assert_eq!(
        op1(R, b"-ERR 'Authorization Violation'\r\n"),
        Op::Err(b"Authorization Violation")
    );
    let m = |reply, queues, header, payload| {
        Op::Rmsg(RoutedMsg {
            origin: None,
            account: b"$G",
            subject: b"foo",
            reply,
            queues: Queues(queues),
            header,
            payload,
        })
    };
    assert_eq!(
        op1(R, b"RMSG $G foo 3\r\nxyz\r\n"),
        m(None, b"", None, b"xyz")
    );
    assert_eq!(
        op1(R, b"RMSG $G foo rep.b 3\r\nxyz\r\n"),
        m(Some(b"rep.b"), b"", None, b"xyz")
    );
    assert_eq!(
        op1(R, b"RMSG $G foo | qa 3\r\nxyz\r\n"),
        m(None, b"qa", None, b"xyz")
    );
    // Go's trailing space after the last queue name.
    assert_eq!(
        op1(R, b"RMSG $G foo + rep.g qx qa  3\r\nxyz\r\n"),
        m(Some(b"rep.g"), b"qx qa", None, b"xyz")
    );
    let hdr = &b"NATS/1.0\r\nX-K: v\r\n\r\n"[..];
    let s = b"HMSG $G foo 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n";
    assert_eq!(op1(R, s), m(None, b"", Some(hdr), b"hello"));
    let s = b"HMSG $G foo + rr.h q1 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n";
    assert_eq!(op1(R, s), m(Some(b"rr.h"), b"q1", Some(hdr), b"hello"));
    let Op::Rmsg(l) = op1(R, b"LMSG O $G foo | q 0 2\r\nhi\r\n") else {
        panic!()
    };
    assert_eq!(
        (l.origin, l.header, l.payload),
        (Some(&b"O"[..]), None, &b"hi"[..])
    );
    assert_eq!(l.queues.iter().collect::<Vec<_>>(), vec![&b"q"[..]]);
    let Op::Rmsg(l) = op1(R, b"LMSG O $G foo r 2 3\r\nh:x\r\n") else {
        panic!()
    };
    assert_eq!(
        (l.reply, l.header, l.payload),
        (Some(&b"r"[..]), Some(&b"h:"[..]), &b"x"[..])
    );
}

#[test]
fn kinds_are_separate() {
    for s in [
        &b"RS+ $G foo\r\n"[..],
        b"RMSG $G foo 1\r\nx\r\n",
        b"MSG foo 1 1\r\nx\r\n",
        b"HMSG $G f 0 0\r\n\r\n",
        b"A+ X\r\n",
        b"LS+ o a s\r\n",
    ] {
        assert_eq!(
            err1(C, s),
            ParseError::UnknownOp,
            "{:?}",
            String::from_utf8_lossy(s)
        );
    }
    for s in [
        &b"PUB foo 1\r\nx\r\n"[..],
        b"HPUB f 0 0\r\n\r\n",
        b"SUB foo 1\r\n",
        b"UNSUB 1\r\n",
        b"MSG a b 1\r\nx\r\n",
    ] {
        assert_eq!(
            err1(R, s),
            ParseError::UnknownOp,
            "{:?}",
            String::from_utf8_lossy(s)
        );
    }
}

#[test]
fn errors() {
    use ParseError::*;
    let bad_args = |s: &[u8], k| matches!(err1(k, s), BadArgs(_));
    assert_eq!(err1(C, b"FOO\r\n"), UnknownOp);
    assert_eq!(err1(C, b"\r\n"), UnknownOp);
    assert_eq!(err1(C, b" PING\r\n"), UnknownOp);
    assert_eq!(err1(C, b"PINGX\r\n"), UnknownOp);
    assert_eq!(err1(C, b"PING x\r\n"), UnknownOp);
    assert_eq!(err1(C, b"+OKAY\r\n"), UnknownOp);
    assert_eq!(err1(C, b"PUB\r\n"), UnknownOp);
    assert_eq!(err1(C, b"PUBfoo 1\r\n"), UnknownOp);
    assert_eq!(err1(C, b"-ERR\r\n"), UnknownOp);
    assert!(bad_args(b"PUB foo\r\n", C));
    assert!(bad_args(b"PUB \r\n", C));
    assert!(bad_args(b"PUB a b c 1\r\n", C));
    assert!(bad_args(b"HPUB a 1\r\n", C));
    assert!(bad_args(b"HPUB a b c 1 2\r\n", C));
    assert!(bad_args(b"SUB foo\r\n", C));
    assert!(bad_args(b"SUB a b c d\r\n", C));
    assert!(bad_args(b"UNSUB \r\n", C));
    assert!(bad_args(b"UNSUB 1 2 3\r\n", C));
    assert!(bad_args(b"RS+ $G\r\n", R));
    assert!(bad_args(b"RS+ $G foo q\r\n", R));
    assert!(bad_args(b"RS+ $G foo q 1 x\r\n", R));
    assert!(bad_args(b"RS+ $G foo q -1\r\n", R));
    assert!(bad_args(b"RS- $G foo q x\r\n", R));
    assert!(bad_args(b"LS+ o $G\r\n", R));
    assert!(bad_args(b"A+\t\r\n", R));
    assert!(bad_args(b"A- a b\r\n", R));
    assert!(bad_args(b"RMSG $G\r\n", R)); // spec §1.9 transcript
    assert!(bad_args(b"RMSG $G foo x y 1\r\nz\r\n", R));
    for s in [
        &b"PUB foo \r\n"[..],
        b"PUB foo -1\r\n",
        b"PUB foo abc\r\n",
        b"PUB foo 1000000000\r\n",
        b"PUB foo 99999999999999999999\r\n",
        b"PUB foo 1x\r\n",
    ] {
        assert_eq!(
            err1(C, s).clone(),
            if s == b"PUB foo \r\n" {
                BadArgs("PUB takes 2 or 3 arguments")
            } else {
                BadSize
            }
        );
    }
    assert_eq!(err1(C, b"HPUB foo 6 5\r\n"), BadSize);
    assert_eq!(err1(C, b"HPUB foo x 5\r\n"), BadSize);
    // nats-server removes at once on a max that is not a number.
    assert_eq!(
        op1(C, b"UNSUB 1 -1\r\n"),
        Op::Unsub {
            sid: b"1",
            max: Some(0)
        }
    );
    assert_eq!(
        op1(C, b"UNSUB 1 abc\r\n"),
        Op::Unsub {
            sid: b"1",
            max: Some(0)
        }
    );
    assert_eq!(err1(R, b"HMSG $G foo 6 5\r\n"), BadSize);
    assert_eq!(err1(R, b"RMSG $G foo x\r\n"), BadSize);
    assert_eq!(err1(C, b"PUB foo 3\r\nhello\r\n"), BadPayloadTerminator);
    assert_eq!(
        err1(C, b"PUB foo 5\r\nhi\r\n\r\n\r\n"),
        BadPayloadTerminator
    );
    assert_eq!(err1(C, b"PUB foo 2\r\nhi\n"), BadPayloadTerminator);
    assert_eq!(err1(C, b"PUB foo 2\r\nhi\r\r"), BadPayloadTerminator);
    assert_eq!(err1(R, b"RMSG $G foo 1\r\nxx\r\n"), BadPayloadTerminator);
    assert_eq!(
        err1(C, b"PUB foo 1048577\r\n"),
        MaxPayload {
            size: 1048577,
            max: 1048576
        }
    );
    assert_eq!(
        err1(C, b"HPUB foo 1 1048577\r\n"),
        MaxPayload {
            size: 1048577,
            max: 1048576
        }
    );
    let mut p = Parser::new(C, Limits::default());
    assert!(p.parse(b"PUB foo 1048576\r\n").unwrap().is_none());
}

#[test]
fn err_text() {
    assert_eq!(
        ParseError::UnknownOp.err_text(),
        Some("Unknown Protocol Operation")
    );
    assert_eq!(
        ParseError::MaxControlLine.err_text(),
        Some("maximum control line exceeded")
    );
    let mp = ParseError::MaxPayload { size: 2, max: 1 };
    assert_eq!(mp.err_text(), Some("Maximum Payload Violation"));
    assert_eq!(mp.to_string(), "maximum payload exceeded: 2 vs 1");
}

#[test]
fn early_rejection() {
    let mut p = Parser::new(C, Limits::default());
    assert_eq!(p.parse(b"\x00\xff"), Err(ParseError::UnknownOp));
    let mut p = Parser::new(C, Limits::default());
    assert_eq!(p.parse(b"P"), Ok(None));
    assert_eq!(p.parse(b"PU"), Ok(None));
    assert_eq!(p.parse(b"PUX"), Err(ParseError::UnknownOp));
    let mut p = Parser::new(C, Limits::default());
    assert_eq!(p.parse(b"PING"), Ok(None));
    assert_eq!(p.parse(b"PING  "), Ok(None));
    assert_eq!(p.parse(b"PING  x"), Err(ParseError::UnknownOp));
    // MaxPayload before the payload arrives.
    let mut p = Parser::new(C, Limits::default());
    assert!(matches!(
        p.parse(b"PUB foo 2000000\r\n"),
        Err(ParseError::MaxPayload { .. })
    ));
    // Wrong terminator caught as soon as its first byte is here.
    let mut p = Parser::new(C, Limits::default());
    assert_eq!(p.parse(b"PUB foo 2\r\nhi"), Ok(None));
    assert_eq!(
        p.parse(b"PUB foo 2\r\nhiX"),
        Err(ParseError::BadPayloadTerminator)
    );
}

#[test]
fn control_line_limit() {
    // A 10 MB line is rejected as soon as more than max_control_line (+ a possible '\r') bytes
    // are buffered, whatever the op.
    for (kind, head) in [
        (C, &b"PUB "[..]),
        (C, b"CONNECT "),
        (C, b"SUB "),
        (R, b"RS+ "),
        (R, b"INFO "),
        (C, b"PING "),
    ] {
        let fill = if head == b"PING " { b' ' } else { b'a' };
        let mut p = Parser::new(kind, Limits::default());
        let mut buf = head.to_vec();
        buf.resize(4096, fill);
        assert_eq!(p.parse(&buf), Ok(None));
        buf.push(b'\r');
        assert_eq!(p.parse(&buf), Ok(None));
        buf.push(fill);
        assert_eq!(
            p.parse(&buf),
            Err(ParseError::MaxControlLine),
            "{:?}",
            String::from_utf8_lossy(head)
        );
        let mut p = Parser::new(kind, Limits::default());
        buf.truncate(4096);
        buf.push(fill);
        assert_eq!(p.parse(&buf), Err(ParseError::MaxControlLine));
        buf.resize(10 << 20, fill);
        assert_eq!(p.parse(&buf), Err(ParseError::MaxControlLine));
    }
    // Exactly at the limit is fine; one over is not, also when the line is complete.
    let mut line = b"SUB ".to_vec();
    line.resize(4094, b'a');
    line.extend_from_slice(b" 1\r\n");
    assert_eq!(line.len(), 4098);
    assert!(matches!(op1(C, &line), Op::Sub { .. }));
    line.insert(4, b'b');
    assert_eq!(err1(C, &line), ParseError::MaxControlLine);
    // Limits are adjustable.
    let big = Limits {
        max_control_line: 1 << 20,
        max_payload: 8,
    };
    let (ops, e, _) = drive(C, big, [&line[..]]);
    assert_eq!((ops.len(), e), (1, None));
    let (_, e, _) = drive(C, big, [&b"PUB x 9\r\n"[..]]);
    assert_eq!(e, Some(ParseError::MaxPayload { size: 9, max: 8 }));
}

fn client_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(
        br#"CONNECT {"verbose":false,"pedantic":false,"lang":"go","headers":true}"#,
    );
    s.extend_from_slice(b"\r\nPING\r\nSUB foo 1\r\nsub  bar  q1\t2 \r\nPUB foo 5\r\nhello\r\n");
    s.extend_from_slice(b"PUB foo reply.x 0\r\n\r\nHPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
    s.extend_from_slice(
        b"pub bar 4\nP\r\nQ\r\nPONG\r\n+OK\r\nunsub 1 5\r\nUNSUB 2\r\n-ERR 'x y'\r\n",
    );
    s.extend_from_slice(b"HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\nPING\n");
    s
}

fn route_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(br#"CONNECT {"echo":true,"name":"N1","cluster":"C1","lnoc":true}"#);
    s.extend_from_slice(
        b"\r\nINFO {\"server_id\":\"N1\"}\r\nRS+ $SYS $SYS.REQ.>\r\nRS+ $G bar q1 1\r\n",
    );
    s.extend_from_slice(
        b"RS+ $G bar q1 2\r\nRS- $G bar q1\r\nRS- $G foo\r\nLS+ L $G leaf q 4\r\nLS- $G leaf q\r\n",
    );
    s.extend_from_slice(
        b"RMSG $G bar | q1 2\r\nq0\r\nRMSG $G bar + rr.0 q1 2\r\nr0\r\nRMSG $G foo 0\r\n\r\n",
    );
    s.extend_from_slice(b"HMSG $G foo 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n");
    s.extend_from_slice(b"HMSG $G bar + rr.h q1 q2 20 25\r\nNATS/1.0\r\nX-K: v\r\n\r\nhello\r\n");
    s.extend_from_slice(b"LMSG O $G foo 0 1\r\nx\r\nA+ $G\r\nA- $G\r\nPING\r\nPONG\r\n");
    s
}

#[test]
fn split_anywhere_client() {
    let s = client_stream();
    let (ops, e, left) = split_invariant(C, &s);
    assert_eq!((ops.len(), e, left), (15, None, 0), "{ops:#?}");
}

#[test]
fn split_anywhere_route() {
    let s = route_stream();
    let (ops, e, left) = split_invariant(R, &s);
    assert_eq!((ops.len(), e, left), (19, None, 0), "{ops:#?}");
}

#[test]
fn split_anywhere_errors() {
    // Streams with a valid prefix and an error later: same ops, then the same error.
    let cases: &[(Kind, &[u8], ParseError)] = &[
        (
            C,
            b"PING\r\nPUB foo 3\r\nhello\r\n",
            ParseError::BadPayloadTerminator,
        ),
        (
            C,
            b"PING\r\nSUB foo\r\n",
            ParseError::BadArgs("SUB takes 2 or 3 arguments"),
        ),
        (
            C,
            b"PUB foo 1\r\nx\r\nPUB foo 2000000\r\n",
            ParseError::MaxPayload {
                size: 2000000,
                max: 1 << 20,
            },
        ),
        (C, b"PONG\r\n\x00\xffgarbage", ParseError::UnknownOp),
        (C, b"PING\r\nHPUB foo 3 2\r\n", ParseError::BadSize),
        (
            R,
            b"RS+ $G a\r\nRMSG $G a x y 1\r\nz\r\n",
            ParseError::BadArgs("Bad or Missing Reply Indicator"),
        ),
        (R, b"PING\r\nPUB a 1\r\n", ParseError::UnknownOp),
    ];
    for &(kind, s, e) in cases {
        let (_, got, _) = split_invariant(kind, s);
        assert_eq!(got, Some(e), "{:?}", String::from_utf8_lossy(s));
    }
}

#[test]
fn truncated_streams_wait() {
    // Every strict prefix of a valid stream parses the complete ops and then waits.
    for (kind, s) in [(C, client_stream()), (R, route_stream())] {
        let full = whole(kind, &s).0;
        for i in 0..s.len() {
            let (ops, e, _) = whole(kind, &s[..i]);
            assert_eq!(e, None, "prefix {i}");
            assert_eq!(ops[..], full[..ops.len()]);
        }
    }
}

#[test]
fn partial_line_is_not_rescanned_from_start() {
    // Feeding a long partial line a byte at a time must stay linear: 4 KiB line, 4 K calls.
    let mut p = Parser::new(C, Limits::default());
    let mut buf = b"CONNECT ".to_vec();
    for _ in 0..4000 {
        buf.push(b'x');
        assert_eq!(p.parse(&buf), Ok(None));
    }
    buf.extend_from_slice(b"\r\n");
    let (op, n) = p.parse(&buf).unwrap().unwrap();
    assert!(matches!(op, Op::Connect(j) if j.len() == 4000));
    assert_eq!(n, buf.len());
}

#[test]
fn pseudo_random_garbage_never_panics_or_stalls() {
    // A tiny deterministic fuzz loop (the cargo-fuzz target does this at scale).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet = b"PUBSHMGINRLA+-OKEC 0123456789\r\n\t|$.qpx";
    let seeds = [client_stream(), route_stream()];
    for round in 0..3000 {
        let mut s = seeds[round % 2].clone();
        for _ in 0..(next() % 6) {
            let i = (next() as usize) % s.len();
            let b = alphabet[(next() as usize) % alphabet.len()];
            match next() % 3 {
                0 => s[i] = b,
                1 => s.insert(i, b),
                _ => {
                    s.remove(i);
                }
            }
        }
        let cut = (next() as usize) % (s.len() + 1);
        let tiny = Limits {
            max_control_line: 3 + (round % 30),
            max_payload: round % 7,
        };
        for kind in [C, R] {
            for limits in [Limits::default(), tiny] {
                let a = drive(kind, limits, [&s[..cut], &s[cut..]]);
                let b = drive(kind, limits, [&s[..]]);
                assert_eq!(a, b, "{limits:?} {:?}", String::from_utf8_lossy(&s));
            }
        }
    }
}

/// Leafnode connections: no account, no origin; `LMSG`/`HMSG` in the leaf forms nats-server
/// 2.9 and 2.15 send (`subj [reply | + reply q… | | q…] [hdr] size`).
#[test]
fn leaf_ops() {
    const L: Kind = Kind::Leaf;
    let plus = |subject, queue| Op::LsPlus {
        origin: b"",
        account: b"",
        subject,
        queue,
    };
    assert_eq!(op1(L, b"LS+ foo\r\n"), plus(b"foo", None));
    assert_eq!(op1(L, b"LS+ foo q 3\r\n"), plus(b"foo", Some((b"q", 3))));
    let minus = Op::LsMinus {
        origin: None,
        account: b"",
        subject: b"foo",
        queue: Some(b"q"),
    };
    assert_eq!(op1(L, b"LS- foo q\r\n"), minus);
    let msg = |reply, queues, header, payload| {
        Op::Rmsg(RoutedMsg {
            origin: None,
            account: b"",
            subject: b"foo",
            reply,
            queues: Queues(queues),
            header,
            payload,
        })
    };
    assert_eq!(op1(L, b"LMSG foo 2\r\nhi\r\n"), msg(None, b"", None, b"hi"));
    assert_eq!(
        op1(L, b"LMSG foo r.1 2\r\nhi\r\n"),
        msg(Some(b"r.1"), b"", None, b"hi")
    );
    assert_eq!(
        op1(L, b"LMSG foo + r q1 q2 2\r\nhi\r\n"),
        msg(Some(b"r"), b"q1 q2", None, b"hi")
    );
    assert_eq!(
        op1(L, b"LMSG foo | q 1\r\nx\r\n"),
        msg(None, b"q", None, b"x")
    );
    assert_eq!(
        op1(L, b"HMSG foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        msg(None, b"", Some(b"NATS/1.0\r\n\r\n"), b"hi")
    );
    for bad in [
        &b"LS+ \r\n"[..],
        b"LS+ foo q\r\n",
        b"LS+ foo q x\r\n",
        b"LMSG foo\r\n",
        b"LMSG foo abc\r\n",
        b"HMSG foo 9 3\r\nabc\r\n",
        b"RMSG $G foo 1\r\nx\r\n",
        b"RS+ $G foo\r\n",
        b"PUB foo 1\r\nx\r\n",
    ] {
        assert!(
            whole(L, bad).1.is_some(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // Split invariance holds for the leaf forms too.
    split_invariant(
        L,
        b"LS+ a q 2\r\nLMSG a + r q 3\r\nabc\r\nHMSG a 2 3\r\nh\rx\r\nLS- a q\r\n",
    );
}

#[test]
fn leaf_frames_round_trip() {
    use bytes::BytesMut;
    let mut b = BytesMut::new();
    super::encode::write_lmsg(&mut b, b"foo", Some(b"r"), &[b"q"], None, b"hi");
    super::encode::write_lmsg(&mut b, b"foo", None, &[], Some(b"NATS/1.0\r\n\r\n"), b"x");
    super::encode::write_leaf_plus(&mut b, b"foo", Some((b"q", 2)));
    super::encode::write_leaf_minus(&mut b, b"foo", None);
    assert_eq!(
        &b[..],
        &b"LMSG foo + r q 2\r\nhi\r\nHMSG foo 12 13\r\nNATS/1.0\r\n\r\nx\r\nLS+ foo q 2\r\nLS- foo\r\n"[..]
    );
    let (ops, err, left) = whole(Kind::Leaf, &b);
    assert_eq!((ops.len(), err, left), (4, None, 0));
}
