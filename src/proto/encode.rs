//! Frame writers: append protocol ops (MSG, HMSG, RMSG/route HMSG, RS±, LS+, A±, INFO,
//! CONNECT, -ERR, and the client-side PUB/HPUB/SUB/UNSUB used by tests and tools) to a
//! `BytesMut`. Each writer reserves its frame once and copies slices; numbers are formatted in
//! place. No allocation besides buffer growth, no validation: callers pass well-formed
//! subjects, and the output is what nats-server emits (upper-case verbs, single spaces).

use bytes::{BufMut, BytesMut};

pub const PING: &[u8] = b"PING\r\n";
pub const PONG: &[u8] = b"PONG\r\n";
pub const OK: &[u8] = b"+OK\r\n";
const CRLF: &[u8] = b"\r\n";

const DIGITS2: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Append `n` in decimal.
#[inline]
pub fn write_u64(buf: &mut BytesMut, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while n >= 100 {
        let d = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        tmp[i] = DIGITS2[d];
        tmp[i + 1] = DIGITS2[d + 1];
    }
    if n >= 10 {
        let d = n as usize * 2;
        i -= 2;
        tmp[i] = DIGITS2[d];
        tmp[i + 1] = DIGITS2[d + 1];
    } else {
        i -= 1;
        tmp[i] = b'0' + n as u8;
    }
    buf.put_slice(&tmp[i..]);
}

/// Room for the fixed parts of a frame: verb, separators, two numbers, CRLFs.
const SLACK: usize = 64;

#[inline]
fn word(buf: &mut BytesMut, w: &[u8]) {
    buf.put_u8(b' ');
    buf.put_slice(w);
}

/// `MSG <subject> <sid> [reply] <len>\r\n<payload>\r\n`
pub fn write_msg(
    buf: &mut BytesMut,
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    payload: &[u8],
) {
    let r = reply.map_or(0, <[u8]>::len);
    buf.reserve(SLACK + subject.len() + sid.len() + r + payload.len());
    buf.put_slice(b"MSG");
    word(buf, subject);
    word(buf, sid);
    if let Some(r) = reply {
        word(buf, r);
    }
    buf.put_u8(b' ');
    write_u64(buf, payload.len() as u64);
    buf.put_slice(CRLF);
    buf.put_slice(payload);
    buf.put_slice(CRLF);
}

/// Number of decimal digits of `n`.
#[inline]
pub fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Exact length of the frame [`write_msg_or_hmsg`] writes (to reserve or account for it).
#[inline]
pub fn msg_len(
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    header: Option<&[u8]>,
    payload: &[u8],
) -> usize {
    let r = reply.map_or(0, |r| r.len() + 1);
    // verb, 3 spaces (subject, sid, size), 2 CRLFs
    let fixed = subject.len() + sid.len() + r + payload.len() + 3 + 4;
    match header {
        None => 3 + fixed + digits(payload.len() as u64),
        Some(h) => {
            let total = h.len() + payload.len();
            4 + fixed + h.len() + 1 + digits(h.len() as u64) + digits(total as u64)
        }
    }
}

/// `MSG` when `header` is `None`, else `HMSG` (the delivery path's one entry point).
#[inline]
pub fn write_msg_or_hmsg(
    buf: &mut BytesMut,
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    header: Option<&[u8]>,
    payload: &[u8],
) {
    match header {
        None => write_msg(buf, subject, sid, reply, payload),
        Some(h) => write_hmsg(buf, subject, sid, reply, h, payload),
    }
}

/// `HMSG <subject> <sid> [reply] <hdr_len> <total_len>\r\n<header><payload>\r\n`
pub fn write_hmsg(
    buf: &mut BytesMut,
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    header: &[u8],
    payload: &[u8],
) {
    let r = reply.map_or(0, <[u8]>::len);
    buf.reserve(SLACK + subject.len() + sid.len() + r + header.len() + payload.len());
    buf.put_slice(b"HMSG");
    word(buf, subject);
    word(buf, sid);
    if let Some(r) = reply {
        word(buf, r);
    }
    sizes(buf, Some(header.len()), payload.len());
    buf.put_slice(header);
    buf.put_slice(payload);
    buf.put_slice(CRLF);
}

/// ` [hdr_len] total\r\n` where total includes the header.
#[inline]
fn sizes(buf: &mut BytesMut, header: Option<usize>, payload: usize) {
    buf.put_u8(b' ');
    if let Some(h) = header {
        write_u64(buf, h as u64);
        buf.put_u8(b' ');
        write_u64(buf, (h + payload) as u64);
    } else {
        write_u64(buf, payload as u64);
    }
    buf.put_slice(CRLF);
}

/// Route/gateway message: `RMSG` (no header) or `HMSG` (with header) in the forms of spec §3.1
/// (an empty `account` leaves it out, as on a pinned-account route):
/// `<acc> <subj> [reply] <sizes>`, or with queue groups `<acc> <subj> + <reply> q… <sizes>` /
/// `<acc> <subj> | q… <sizes>`.
pub fn write_rmsg(
    buf: &mut BytesMut,
    account: &[u8],
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[&[u8]],
    header: Option<&[u8]>,
    payload: &[u8],
) {
    routed_msg(
        buf, b"RMSG", None, account, subject, reply, queues, header, payload,
    );
}

/// A leaf's message to a route peer that advertised `lnoc`, with the origin cluster of the
/// leaf it came from: `LMSG <origin> <acc> <subj> [reply forms] <hdr> <total>` — always
/// `LMSG`, always with a header size (0 without a header), as nats-server's
/// `msgHeaderForRouteOrLeaf`.
#[allow(clippy::too_many_arguments)]
pub fn write_rmsg_from_leaf(
    buf: &mut BytesMut,
    origin: &[u8],
    account: &[u8],
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[&[u8]],
    header: Option<&[u8]>,
    payload: &[u8],
) {
    routed_msg(
        buf,
        b"LMSG",
        Some(origin),
        account,
        subject,
        reply,
        queues,
        header,
        payload,
    );
}

/// A message to a leafnode: `LMSG <subj> [reply | + reply q… | | q…] <size>` (or `HMSG` with
/// the header size first), no account: the connection is bound to one.
pub fn write_lmsg(
    buf: &mut BytesMut,
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[&[u8]],
    header: Option<&[u8]>,
    payload: &[u8],
) {
    routed_msg(
        buf, b"LMSG", None, b"", subject, reply, queues, header, payload,
    );
}

#[allow(clippy::too_many_arguments)]
fn routed_msg(
    buf: &mut BytesMut,
    verb: &[u8],
    origin: Option<&[u8]>,
    account: &[u8],
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[&[u8]],
    header: Option<&[u8]>,
    payload: &[u8],
) {
    let r = reply.map_or(0, <[u8]>::len);
    let h = header.map_or(0, <[u8]>::len);
    let q: usize = queues.iter().map(|q| q.len() + 1).sum();
    let o = origin.map_or(0, <[u8]>::len);
    buf.reserve(SLACK + o + account.len() + subject.len() + r + q + h + payload.len());
    match origin {
        Some(o) => {
            buf.put_slice(verb);
            word(buf, o);
        }
        None => buf.put_slice(if header.is_some() { b"HMSG" } else { verb }),
    }
    // An empty account: a pinned-account route, where nats-server 2.10+ leaves it out.
    if !account.is_empty() {
        word(buf, account);
    }
    word(buf, subject);
    if queues.is_empty() {
        if let Some(r) = reply {
            word(buf, r);
        }
    } else {
        match reply {
            Some(r) => {
                buf.put_slice(b" +");
                word(buf, r);
            }
            None => buf.put_slice(b" |"),
        }
        for q in queues {
            word(buf, q);
        }
    }
    let hsize = match origin {
        Some(_) => Some(h),
        None => header.map(<[u8]>::len),
    };
    sizes(buf, hsize, payload.len());
    if let Some(h) = header {
        buf.put_slice(h);
    }
    buf.put_slice(payload);
    buf.put_slice(CRLF);
}

fn interest(buf: &mut BytesMut, verb: &[u8], origin: Option<&[u8]>, acc: &[u8], subj: &[u8]) {
    buf.reserve(SLACK + origin.map_or(0, <[u8]>::len) + acc.len() + subj.len());
    buf.put_slice(verb);
    if let Some(o) = origin {
        word(buf, o);
    }
    // An empty account: a pinned-account route (no account on the wire).
    if !acc.is_empty() {
        word(buf, acc);
    }
    word(buf, subj);
}

/// `RS+ <acc> <subj>[ <queue> <weight>]\r\n`
pub fn write_rs_plus(
    buf: &mut BytesMut,
    account: &[u8],
    subject: &[u8],
    queue: Option<(&[u8], u32)>,
) {
    interest(buf, b"RS+", None, account, subject);
    queue_weight(buf, queue);
}

/// `LS+ <origin> <acc> <subj>[ <queue> <weight>]\r\n`
pub fn write_ls_plus(
    buf: &mut BytesMut,
    origin: &[u8],
    account: &[u8],
    subject: &[u8],
    queue: Option<(&[u8], u32)>,
) {
    interest(buf, b"LS+", Some(origin), account, subject);
    queue_weight(buf, queue);
}

/// A leafnode's interest: `LS+ <subj>[ <queue> <weight>]\r\n` (no account: the connection
/// is bound to one).
pub fn write_leaf_plus(buf: &mut BytesMut, subject: &[u8], queue: Option<(&[u8], u32)>) {
    interest(buf, b"LS+", None, b"", subject);
    queue_weight(buf, queue);
}

/// `LS- <subj>[ <queue>]\r\n`
pub fn write_leaf_minus(buf: &mut BytesMut, subject: &[u8], queue: Option<&[u8]>) {
    interest(buf, b"LS-", None, b"", subject);
    if let Some(q) = queue {
        buf.reserve(q.len() + 3);
        word(buf, q);
    }
    buf.put_slice(CRLF);
}

fn queue_weight(buf: &mut BytesMut, queue: Option<(&[u8], u32)>) {
    if let Some((q, w)) = queue {
        buf.reserve(q.len() + 16);
        word(buf, q);
        buf.put_u8(b' ');
        write_u64(buf, u64::from(w));
    }
    buf.put_slice(CRLF);
}

/// `LS- [<origin>] <acc> <subj>[ <queue>]\r\n` (a leaf cluster's interest gone; the origin
/// only to a peer that advertised `lnocu`).
pub fn write_ls_minus(
    buf: &mut BytesMut,
    origin: Option<&[u8]>,
    account: &[u8],
    subject: &[u8],
    queue: Option<&[u8]>,
) {
    interest(buf, b"LS-", origin, account, subject);
    if let Some(q) = queue {
        buf.reserve(q.len() + 3);
        word(buf, q);
    }
    buf.put_slice(CRLF);
}

/// `RS- <acc> <subj>[ <queue>]\r\n`
pub fn write_rs_minus(buf: &mut BytesMut, account: &[u8], subject: &[u8], queue: Option<&[u8]>) {
    interest(buf, b"RS-", None, account, subject);
    if let Some(q) = queue {
        buf.reserve(q.len() + 3);
        word(buf, q);
    }
    buf.put_slice(CRLF);
}

/// `A+ <acc>\r\n`
pub fn write_acc_plus(buf: &mut BytesMut, account: &[u8]) {
    line(buf, b"A+ ", account);
}

/// `A- <acc>\r\n`
pub fn write_acc_minus(buf: &mut BytesMut, account: &[u8]) {
    line(buf, b"A- ", account);
}

fn line(buf: &mut BytesMut, prefix: &[u8], body: &[u8]) {
    buf.reserve(prefix.len() + body.len() + 2);
    buf.put_slice(prefix);
    buf.put_slice(body);
    buf.put_slice(CRLF);
}

/// `INFO <json> \r\n` — with the space before CRLF that nats-server emits.
pub fn write_info(buf: &mut BytesMut, json: &[u8]) {
    buf.reserve(json.len() + 8);
    buf.put_slice(b"INFO ");
    buf.put_slice(json);
    buf.put_slice(b" \r\n");
}

/// `CONNECT <json>\r\n`
pub fn write_connect(buf: &mut BytesMut, json: &[u8]) {
    line(buf, b"CONNECT ", json);
}

/// `-ERR '<text>'\r\n`
pub fn write_err(buf: &mut BytesMut, text: &[u8]) {
    buf.reserve(text.len() + 9);
    buf.put_slice(b"-ERR '");
    buf.put_slice(text);
    buf.put_slice(b"'\r\n");
}

/// `PUB <subject> [reply] <len>\r\n<payload>\r\n` (client side; tests, tools, benches).
pub fn write_pub(buf: &mut BytesMut, subject: &[u8], reply: Option<&[u8]>, payload: &[u8]) {
    buf.reserve(SLACK + subject.len() + reply.map_or(0, <[u8]>::len) + payload.len());
    buf.put_slice(b"PUB");
    word(buf, subject);
    if let Some(r) = reply {
        word(buf, r);
    }
    sizes(buf, None, payload.len());
    buf.put_slice(payload);
    buf.put_slice(CRLF);
}

/// `HPUB <subject> [reply] <hdr_len> <total_len>\r\n<header><payload>\r\n` (client side).
pub fn write_hpub(
    buf: &mut BytesMut,
    subject: &[u8],
    reply: Option<&[u8]>,
    header: &[u8],
    payload: &[u8],
) {
    let r = reply.map_or(0, <[u8]>::len);
    buf.reserve(SLACK + subject.len() + r + header.len() + payload.len());
    buf.put_slice(b"HPUB");
    word(buf, subject);
    if let Some(r) = reply {
        word(buf, r);
    }
    sizes(buf, Some(header.len()), payload.len());
    buf.put_slice(header);
    buf.put_slice(payload);
    buf.put_slice(CRLF);
}

/// `SUB <subject> [queue] <sid>\r\n` (client side).
pub fn write_sub(buf: &mut BytesMut, subject: &[u8], queue: Option<&[u8]>, sid: &[u8]) {
    buf.reserve(SLACK + subject.len() + queue.map_or(0, <[u8]>::len) + sid.len());
    buf.put_slice(b"SUB");
    word(buf, subject);
    if let Some(q) = queue {
        word(buf, q);
    }
    word(buf, sid);
    buf.put_slice(CRLF);
}

/// `UNSUB <sid> [max]\r\n` (client side).
pub fn write_unsub(buf: &mut BytesMut, sid: &[u8], max: Option<u64>) {
    buf.reserve(SLACK + sid.len());
    buf.put_slice(b"UNSUB");
    word(buf, sid);
    if let Some(m) = max {
        buf.put_u8(b' ');
        write_u64(buf, m);
    }
    buf.put_slice(CRLF);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::parser::{Kind, Limits, Op, Parser, RoutedMsg};

    fn one(kind: Kind, bytes: &[u8]) -> Op<'_> {
        let mut p = Parser::new(kind, Limits::route());
        let (op, n) = p.parse(bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len(), "{:?}", String::from_utf8_lossy(bytes));
        op
    }

    #[test]
    fn u64_format() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            12345,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = BytesMut::new();
            write_u64(&mut b, n);
            assert_eq!(&b[..], n.to_string().as_bytes());
        }
        let mut n = 1u64;
        while let Some(m) = n.checked_mul(7) {
            let mut b = BytesMut::new();
            write_u64(&mut b, m - 1);
            assert_eq!(&b[..], (m - 1).to_string().as_bytes());
            n = m;
        }
    }

    #[test]
    fn msg_len_is_exact() {
        let hdr = &b"NATS/1.0\r\n\r\n"[..];
        for subject in [&b"a"[..], b"foo.bar.baz"] {
            for reply in [None, Some(&b"_INBOX.1"[..])] {
                for header in [None, Some(hdr)] {
                    for n in [0usize, 1, 9, 10, 99, 100, 12345] {
                        let payload = vec![b'x'; n];
                        let mut b = BytesMut::new();
                        write_msg_or_hmsg(&mut b, subject, b"17", reply, header, &payload);
                        assert_eq!(msg_len(subject, b"17", reply, header, &payload), b.len());
                    }
                }
            }
        }
        assert_eq!(
            (digits(0), digits(9), digits(10), digits(u64::MAX)),
            (1, 1, 2, 20)
        );
    }

    #[test]
    fn exact_bytes() {
        let mut b = BytesMut::new();
        write_msg(&mut b, b"foo", b"1", None, b"hi");
        write_msg(&mut b, b"foo", b"1", Some(b"r"), b"");
        write_hmsg(
            &mut b,
            b"_INBOX.nr.1",
            b"7",
            None,
            b"NATS/1.0 503\r\n\r\n",
            b"",
        );
        write_rmsg(&mut b, b"$G", b"bar", None, &[b"q1"], None, b"q0");
        write_rmsg(
            &mut b,
            b"$G",
            b"bar",
            Some(b"rr.0"),
            &[b"q1", b"q2"],
            None,
            b"r0",
        );
        write_rmsg(
            &mut b,
            b"$G",
            b"foo",
            None,
            &[],
            Some(b"NATS/1.0\r\n\r\n"),
            b"x",
        );
        write_rs_plus(&mut b, b"$G", b"bar", Some((b"q1", 2)));
        write_rs_minus(&mut b, b"$G", b"bar", None);
        write_err(&mut b, b"Unknown Protocol Operation");
        b.put_slice(PING);
        assert_eq!(
            std::str::from_utf8(&b).unwrap(),
            "MSG foo 1 2\r\nhi\r\nMSG foo 1 r 0\r\n\r\n\
             HMSG _INBOX.nr.1 7 16 16\r\nNATS/1.0 503\r\n\r\n\r\n\
             RMSG $G bar | q1 2\r\nq0\r\nRMSG $G bar + rr.0 q1 q2 2\r\nr0\r\n\
             HMSG $G foo 12 13\r\nNATS/1.0\r\n\r\nx\r\n\
             RS+ $G bar q1 2\r\nRS- $G bar\r\n-ERR 'Unknown Protocol Operation'\r\nPING\r\n"
        );
    }

    #[test]
    fn round_trip_client_forms() {
        for reply in [None, Some(&b"_INBOX.x"[..])] {
            for payload in [&b""[..], b"hello", b"with\r\ncrlf\r\n"] {
                let mut b = BytesMut::new();
                write_pub(&mut b, b"a.b", reply, payload);
                let subject = &b"a.b"[..];
                assert_eq!(
                    one(Kind::Client, &b),
                    Op::Pub {
                        subject,
                        reply,
                        payload
                    }
                );
                let mut b = BytesMut::new();
                let header = &b"NATS/1.0\r\nK: v\r\n\r\n"[..];
                write_hpub(&mut b, subject, reply, header, payload);
                assert_eq!(
                    one(Kind::Client, &b),
                    Op::Hpub {
                        subject,
                        reply,
                        header,
                        payload
                    }
                );
            }
        }
        let mut b = BytesMut::new();
        write_sub(&mut b, b"s.>", Some(b"q"), b"42");
        let want = Op::Sub {
            subject: b"s.>",
            queue: Some(b"q"),
            sid: b"42",
        };
        assert_eq!(one(Kind::Client, &b), want);
        let mut b = BytesMut::new();
        write_unsub(&mut b, b"42", Some(999_999_999));
        assert_eq!(
            one(Kind::Client, &b),
            Op::Unsub {
                sid: b"42",
                max: Some(999_999_999)
            }
        );
        let mut b = BytesMut::new();
        write_err(&mut b, b"Authorization Violation");
        assert_eq!(one(Kind::Client, &b), Op::Err(b"Authorization Violation"));
        let mut b = BytesMut::new();
        write_info(&mut b, br#"{"a":1}"#);
        assert_eq!(&b[..], b"INFO {\"a\":1} \r\n");
        assert_eq!(one(Kind::Client, &b), Op::Info(br#"{"a":1}"#));
    }

    #[test]
    fn round_trip_route_forms() {
        let header = &b"NATS/1.0\r\nX-K: v\r\n\r\n"[..];
        let queue_sets: [&[&[u8]]; 3] = [&[], &[b"q1"], &[b"q1", b"qa", b"q.3"]];
        for reply in [None, Some(&b"rr.0"[..])] {
            for queues in queue_sets {
                for hdr in [None, Some(header)] {
                    for payload in [&b""[..], b"hello"] {
                        let mut b = BytesMut::new();
                        write_rmsg(&mut b, b"$G", b"foo", reply, queues, hdr, payload);
                        let Op::Rmsg(m) = one(Kind::Route, &b) else {
                            panic!("not rmsg")
                        };
                        let got: Vec<&[u8]> = m.queues.iter().collect();
                        assert_eq!(got, queues);
                        let want = RoutedMsg {
                            origin: None,
                            account: b"$G",
                            subject: b"foo",
                            reply,
                            queues: m.queues,
                            header: hdr,
                            payload,
                        };
                        assert_eq!(m, want);
                        // From a leaf of cluster LC, to a peer that takes the origin.
                        let mut b = BytesMut::new();
                        write_rmsg_from_leaf(
                            &mut b, b"LC", b"$G", b"foo", reply, queues, hdr, payload,
                        );
                        assert!(b.starts_with(b"LMSG LC $G foo "), "{b:?}");
                        let Op::Rmsg(m) = one(Kind::Route, &b) else {
                            panic!("not lmsg")
                        };
                        let want = RoutedMsg {
                            origin: Some(b"LC"),
                            queues: m.queues,
                            ..want
                        };
                        assert_eq!(m, want);
                    }
                }
            }
        }
        for queue in [None, Some((&b"q1"[..], 7u32)), Some((&b"q1"[..], u32::MAX))] {
            let mut b = BytesMut::new();
            write_rs_plus(&mut b, b"$SYS", b"a.*", queue);
            let want = Op::RsPlus {
                account: b"$SYS",
                subject: b"a.*",
                queue,
            };
            assert_eq!(one(Kind::Route, &b), want);
            let mut b = BytesMut::new();
            write_ls_plus(&mut b, b"LEAFC", b"$G", b"a.*", queue);
            let want = Op::LsPlus {
                origin: b"LEAFC",
                account: b"$G",
                subject: b"a.*",
                queue,
            };
            assert_eq!(one(Kind::Route, &b), want);
        }
        for queue in [None, Some(&b"q1"[..])] {
            let mut b = BytesMut::new();
            write_rs_minus(&mut b, b"$G", b"x", queue);
            let want = Op::RsMinus {
                account: b"$G",
                subject: b"x",
                queue,
            };
            assert_eq!(one(Kind::Route, &b), want);
        }
        let mut b = BytesMut::new();
        write_acc_plus(&mut b, b"ACC");
        assert_eq!(one(Kind::Route, &b), Op::AccPlus(b"ACC"));
        let mut b = BytesMut::new();
        write_acc_minus(&mut b, b"ACC");
        assert_eq!(one(Kind::Route, &b), Op::AccMinus(b"ACC"));
        let mut b = BytesMut::new();
        write_connect(&mut b, b"{}");
        assert_eq!(one(Kind::Route, &b), Op::Connect(b"{}"));
    }
}
