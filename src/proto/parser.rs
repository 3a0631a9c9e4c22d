//! The incremental, zero-copy, sans-io protocol parser: framing of control lines and payloads,
//! op-name recognition, size limits, and the [`Op`] values that borrow from the caller's read
//! buffer. One state machine serves client connections and route/gateway connections
//! ([`Kind`]). It owns nothing but a few offsets of scan state; the caller owns the buffer,
//! hands the parser its unconsumed front, and drops `consumed` bytes after handling each op.
//! Argument grammar (splitting, sizes, reply indicators) lives in [`super::args`].
//!
//! Line rules (nats-server's): op names are case-insensitive; arguments are separated by runs of
//! spaces/tabs; a control line ends at `\n`, with one preceding `\r` dropped (a bare `\n` is
//! accepted, as Go's parser only looks for `\n`); a payload must be followed by exactly `\r\n`.
//!
//! Deliberately stricter than Go, so that the verdict never depends on how bytes were split
//! across reads: the control line limit is checked on every line (Go checks only lines split
//! across reads, and only on clients — routes get [`Limits::route`]); `PING`/`PONG`/`+OK` may
//! only be followed by whitespace (Go ignores any trailing text); a non-numeric `UNSUB` max is
//! [`ParseError::BadSize`] (Go unsubscribes at once); every arg op needs a space or tab after
//! its name (Go lets `CONNECT{…}` through). Pinned-account (2.10 `route_account`) forms, which
//! omit the account, are not parsed: we never advertise pooling.

use super::args;
use std::fmt;

/// Size limits enforced while parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest control line (without its line terminator). nats-server default 4096.
    pub max_control_line: usize,
    /// Largest payload (header + body for HPUB/HMSG) announced by a message op. Default 1 MiB.
    pub max_payload: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_control_line: 4096,
            max_payload: 1024 * 1024,
        }
    }
}

impl Limits {
    /// Generous limits for trusted route/gateway peers: nats-server applies no control line
    /// limit there (route INFOs with many URLs/permissions and long subjects are legal) and
    /// accepts any payload size its peers allowed. We still bound memory.
    pub fn route() -> Self {
        Limits {
            max_control_line: 1024 * 1024,
            max_payload: 64 * 1024 * 1024,
        }
    }
}

/// Which op set a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Client connections: CONNECT, INFO (accepted and ignored by servers), PUB, HPUB, SUB,
    /// UNSUB, PING, PONG, +OK, -ERR.
    Client,
    /// Route and gateway connections: CONNECT, INFO, PING, PONG, +OK, -ERR, RS+, RS-, LS+, LS-,
    /// RMSG, HMSG, LMSG (route forms), A+, A-.
    Route,
    /// Leafnode connections: CONNECT, INFO, PING, PONG, +OK, -ERR, `LS+ subj [queue weight]`,
    /// `LS- subj [queue]`, `LMSG subj [reply | + reply q… | | q…] size` and `HMSG` with the
    /// header size before the size: the connection is bound to one account, so no account
    /// and no origin on the wire (ops come with empty `account` and `origin`).
    Leaf,
}

/// A protocol violation. The connection is to be closed; [`ParseError::err_text`] says which
/// `-ERR` (if any) nats-server sends to a client first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Unknown op name, garbage bytes, or a no-argument op (PING/PONG/+OK) with trailing text.
    UnknownOp,
    /// A control line longer than `max_control_line`.
    MaxControlLine,
    /// A message op announcing more than `max_payload` bytes.
    MaxPayload { size: usize, max: usize },
    /// Missing, non-numeric, negative or too long (> 9 digits, as Go) size or max field, or a
    /// header length larger than the total length.
    BadSize,
    /// Wrong number or shape of arguments.
    BadArgs(&'static str),
    /// The payload was not followed by `\r\n`: the announced size was wrong.
    BadPayloadTerminator,
}

impl ParseError {
    /// The text nats-server puts in `-ERR '…'` before closing a client for this error; `None`
    /// where it closes without `-ERR` (argument errors, and every error on routes).
    pub fn err_text(&self) -> Option<&'static str> {
        match self {
            ParseError::UnknownOp | ParseError::BadPayloadTerminator => {
                Some("Unknown Protocol Operation")
            }
            ParseError::MaxControlLine => Some("maximum control line exceeded"),
            ParseError::MaxPayload { .. } => Some("Maximum Payload Violation"),
            ParseError::BadSize | ParseError::BadArgs(_) => None,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::UnknownOp => f.write_str("unknown protocol operation"),
            ParseError::MaxControlLine => f.write_str("maximum control line exceeded"),
            ParseError::MaxPayload { size, max } => {
                write!(f, "maximum payload exceeded: {size} vs {max}")
            }
            ParseError::BadSize => f.write_str("bad or missing size"),
            ParseError::BadArgs(why) => write!(f, "bad arguments: {why}"),
            ParseError::BadPayloadTerminator => f.write_str("payload not followed by CRLF"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Queue group names of a routed message: the raw, whitespace-separated slice of the control
/// line (possibly empty). Iterate with [`Queues::iter`]; no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Queues<'a>(pub &'a [u8]);

impl<'a> Queues<'a> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
    pub fn iter(&self) -> QueueIter<'a> {
        QueueIter(self.0)
    }
}

impl<'a> IntoIterator for Queues<'a> {
    type Item = &'a [u8];
    type IntoIter = QueueIter<'a>;
    fn into_iter(self) -> QueueIter<'a> {
        QueueIter(self.0)
    }
}

/// Iterator over queue names in a [`Queues`] slice.
#[derive(Clone, Debug)]
pub struct QueueIter<'a>(&'a [u8]);

impl<'a> Iterator for QueueIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let (tok, rest) = args::pop_front(self.0)?;
        self.0 = rest;
        Some(tok)
    }
}

/// A message received on a route or gateway: `RMSG`, route-form `HMSG`, or `LMSG`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutedMsg<'a> {
    /// Leaf origin cluster; `Some` only for `LMSG`.
    pub origin: Option<&'a [u8]>,
    pub account: &'a [u8],
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    /// Queue groups the sender chose this server to serve (`+ reply q…` / `| q…` forms).
    pub queues: Queues<'a>,
    /// Header block for `HMSG` (always `Some`, possibly empty) and `LMSG` with `hdr_len > 0`.
    pub header: Option<&'a [u8]>,
    /// The message body (after the header block).
    pub payload: &'a [u8],
}

/// One parsed protocol op, borrowing from the parse buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// `CONNECT <json>`: the raw JSON, trimmed.
    Connect(&'a [u8]),
    /// `INFO <json>`: the raw JSON, trimmed.
    Info(&'a [u8]),
    Ping,
    Pong,
    Ok,
    /// `-ERR 'text'`: the text inside single quotes when quoted, else the raw trimmed text.
    Err(&'a [u8]),
    Pub {
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
        payload: &'a [u8],
    },
    Hpub {
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
        header: &'a [u8],
        payload: &'a [u8],
    },
    Sub {
        subject: &'a [u8],
        queue: Option<&'a [u8]>,
        sid: &'a [u8],
    },
    Unsub {
        sid: &'a [u8],
        max: Option<u64>,
    },
    /// `RS+ acc subj [queue weight]`.
    RsPlus {
        account: &'a [u8],
        subject: &'a [u8],
        queue: Option<(&'a [u8], u32)>,
    },
    /// `RS- acc subj [queue]`.
    RsMinus {
        account: &'a [u8],
        subject: &'a [u8],
        queue: Option<&'a [u8]>,
    },
    /// `LS+ origin acc subj [queue weight]`.
    LsPlus {
        origin: &'a [u8],
        account: &'a [u8],
        subject: &'a [u8],
        queue: Option<(&'a [u8], u32)>,
    },
    /// `LS- [origin] acc subj [queue]`; origin present iff [`Parser::set_lnocu`] was enabled.
    LsMinus {
        origin: Option<&'a [u8]>,
        account: &'a [u8],
        subject: &'a [u8],
        queue: Option<&'a [u8]>,
    },
    /// `RMSG` / route `HMSG` / `LMSG`.
    Rmsg(RoutedMsg<'a>),
    /// `A+ acc` (gateway account interest on).
    AccPlus(&'a [u8]),
    /// `A- acc` (gateway account interest off).
    AccMinus(&'a [u8]),
}

/// Op names, before their arguments are parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Connect,
    Info,
    Ping,
    Pong,
    Ok,
    Err,
    Pub,
    Hpub,
    Sub,
    Unsub,
    RsPlus,
    RsMinus,
    LsPlus,
    LsMinus,
    Rmsg,
    Hmsg,
    Lmsg,
    AccPlus,
    AccMinus,
}

impl Verb {
    /// True for ops that take arguments (name must be followed by a space or tab).
    fn has_args(self) -> bool {
        !matches!(self, Verb::Ping | Verb::Pong | Verb::Ok)
    }
}

type Cand = (&'static [u8], Verb);

const C_P: &[Cand] = &[
    (b"PUB", Verb::Pub),
    (b"PING", Verb::Ping),
    (b"PONG", Verb::Pong),
];
const R_P: &[Cand] = &[(b"PING", Verb::Ping), (b"PONG", Verb::Pong)];
const C_H: &[Cand] = &[(b"HPUB", Verb::Hpub)];
const R_H: &[Cand] = &[(b"HMSG", Verb::Hmsg)];
const C_S: &[Cand] = &[(b"SUB", Verb::Sub)];
const C_U: &[Cand] = &[(b"UNSUB", Verb::Unsub)];
const X_C: &[Cand] = &[(b"CONNECT", Verb::Connect)];
const X_I: &[Cand] = &[(b"INFO", Verb::Info)];
const X_PLUS: &[Cand] = &[(b"+OK", Verb::Ok)];
const X_MINUS: &[Cand] = &[(b"-ERR", Verb::Err)];
const R_R: &[Cand] = &[
    (b"RMSG", Verb::Rmsg),
    (b"RS+", Verb::RsPlus),
    (b"RS-", Verb::RsMinus),
];
const R_L: &[Cand] = &[
    (b"LMSG", Verb::Lmsg),
    (b"LS+", Verb::LsPlus),
    (b"LS-", Verb::LsMinus),
];
const R_A: &[Cand] = &[(b"A+", Verb::AccPlus), (b"A-", Verb::AccMinus)];

fn candidates(kind: Kind, first: u8) -> &'static [Cand] {
    match (kind, first.to_ascii_uppercase()) {
        (Kind::Client, b'P') => C_P,
        (Kind::Route | Kind::Leaf, b'P') => R_P,
        (Kind::Client, b'H') => C_H,
        (Kind::Route | Kind::Leaf, b'H') => R_H,
        (Kind::Client, b'S') => C_S,
        (Kind::Client, b'U') => C_U,
        (Kind::Route, b'R') => R_R,
        (Kind::Route | Kind::Leaf, b'L') => R_L,
        (Kind::Route, b'A') => R_A,
        (_, b'C') => X_C,
        (_, b'I') => X_I,
        (_, b'+') => X_PLUS,
        (_, b'-') => X_MINUS,
        _ => &[],
    }
}

/// Recognise the op name at the front of `buf` (non-empty). `Ok(None)`: a valid prefix, need
/// more bytes. Rejects as soon as the bytes seen cannot start any op of `kind`.
fn classify(kind: Kind, buf: &[u8]) -> Result<Option<(Verb, usize)>, ParseError> {
    let first = match buf.first() {
        Some(&b) => b,
        None => return Ok(None),
    };
    let mut partial = false;
    for &(name, verb) in candidates(kind, first) {
        let n = name.len().min(buf.len());
        if !buf[..n].eq_ignore_ascii_case(&name[..n]) {
            continue;
        }
        match buf.get(name.len()) {
            None => partial = true,
            Some(&d) => {
                let ok = if verb.has_args() {
                    d == b' ' || d == b'\t'
                } else {
                    matches!(d, b' ' | b'\t' | b'\r' | b'\n')
                };
                if ok {
                    return Ok(Some((verb, name.len())));
                }
            }
        }
    }
    if partial {
        Ok(None)
    } else {
        Err(ParseError::UnknownOp)
    }
}

/// Position of the first `\n` in `hay` at or after `from`. Word-at-a-time (SWAR) scan.
#[inline]
pub(crate) fn find_nl(hay: &[u8], from: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const PAT: u64 = LO * (b'\n' as u64);
    let tail = hay.get(from..)?;
    let mut chunks = tail.chunks_exact(8);
    let mut base = from;
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ PAT;
        let t = w.wrapping_sub(LO) & !w & HI;
        if t != 0 {
            return Some(base + (t.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|p| base + p)
}

/// Incremental parser state for one connection. See [`Parser::parse`].
#[derive(Clone, Debug)]
pub struct Parser {
    kind: Kind,
    limits: Limits,
    lnocu: bool,
    /// Route ops carry no account (a pinned-account route of nats-server 2.10+).
    no_account: bool,
    /// Bytes `[0, scanned)` of the pending control line contain no `\n`.
    scanned: usize,
    /// Index of the pending control line's `\n` + 1 once known (0 = not yet found).
    line_end: usize,
    /// Total frame length once the control line of a message op is parsed (0 = none).
    need: usize,
}

/// Why [`Parser::parse_all`] stopped before the end of its input.
#[derive(Debug)]
pub enum Stop<E> {
    /// The op handler failed with this.
    Handler(E),
    /// Malformed input.
    Parse(ParseError),
}

impl Parser {
    pub fn new(kind: Kind, limits: Limits) -> Self {
        Parser {
            kind,
            limits,
            lnocu: false,
            no_account: false,
            scanned: 0,
            line_end: 0,
            need: 0,
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Change limits (e.g. after CONNECT or a config reload); takes effect for the next op.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Route peers that advertised `lnocu` (2.10) put the origin first in `LS-`.
    pub fn set_lnocu(&mut self, on: bool) {
        self.lnocu = on;
    }

    /// On a pinned-account route (INFO `route_account`) RS+/RS-/LS+/LS-/RMSG/HMSG/LMSG leave
    /// the account out; ops then come with an empty `account` for the session to fill in.
    pub fn set_no_account(&mut self, on: bool) {
        self.no_account = on;
    }

    /// Forget partial-frame scan state (use if the caller's buffer was replaced).
    pub fn reset(&mut self) {
        self.scanned = 0;
        self.line_end = 0;
        self.need = 0;
    }

    /// Try to parse one op from the front of `buf`.
    ///
    /// - `Ok(Some((op, consumed)))`: the caller handles `op`, then drops `consumed` bytes from
    ///   the front of its buffer before the next call.
    /// - `Ok(None)`: need more bytes; call again with the same bytes plus whatever arrives
    ///   (already scanned bytes are not scanned again).
    /// - `Err(_)`: protocol error; close the connection (see [`ParseError::err_text`]).
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Op<'a>, usize)>, ParseError> {
        let r = self.parse_inner(buf);
        if !matches!(r, Ok(None)) {
            self.reset();
        }
        r
    }

    /// Parse every complete op in `buf` and hand each to `handle`, until no complete op is
    /// left, `handle` fails or the input is malformed. Returns the bytes consumed and why it
    /// stopped early, if it did (after a parse error the bad input starts at that offset).
    pub fn parse_all<'a, E>(
        &mut self,
        buf: &'a [u8],
        mut handle: impl FnMut(Op<'a>) -> Result<(), E>,
    ) -> (usize, Option<Stop<E>>) {
        let mut consumed = 0;
        while consumed < buf.len() {
            match self.parse(&buf[consumed..]) {
                Ok(Some((op, n))) => {
                    consumed += n;
                    if let Err(e) = handle(op) {
                        return (consumed, Some(Stop::Handler(e)));
                    }
                }
                Ok(None) => break,
                Err(e) => return (consumed, Some(Stop::Parse(e))),
            }
        }
        (consumed, None)
    }

    fn parse_inner<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Op<'a>, usize)>, ParseError> {
        if self.need != 0 && buf.len() < self.need {
            // Payload still arriving: O(1), except catching a wrong terminator early.
            let t = self.need - 2;
            return match buf.get(t) {
                Some(&b) if b != b'\r' => Err(ParseError::BadPayloadTerminator),
                _ => Ok(None),
            };
        }
        let (verb, name_len) = match classify(self.kind, buf)? {
            Some(v) => v,
            None => return Ok(None),
        };
        if !verb.has_args() {
            return self.no_arg_op(buf, verb, name_len);
        }
        // Locate the end of the control line.
        let nl = if self.line_end != 0 && buf.get(self.line_end - 1) == Some(&b'\n') {
            self.line_end - 1
        } else {
            match find_nl(buf, self.scanned.max(name_len)) {
                Some(nl) => nl,
                None => {
                    self.scanned = buf.len();
                    self.check_partial_line(buf)?;
                    return Ok(None);
                }
            }
        };
        let line = match buf[..nl].strip_suffix(b"\r") {
            Some(l) => l,
            None => &buf[..nl],
        };
        if line.len() > self.limits.max_control_line {
            return Err(ParseError::MaxControlLine);
        }
        self.line_end = nl + 1;
        let a = &line[name_len..];
        let body = nl + 1;
        let op = match verb {
            Verb::Connect => Op::Connect(args::trim(a)),
            Verb::Info => Op::Info(args::trim(a)),
            Verb::Err => Op::Err(args::err_text(a)),
            Verb::Sub => {
                let (subject, queue, sid) = args::sub(a)?;
                Op::Sub {
                    subject,
                    queue,
                    sid,
                }
            }
            Verb::Unsub => {
                let (sid, max) = args::unsub(a)?;
                Op::Unsub { sid, max }
            }
            Verb::RsPlus => {
                let (account, subject, queue) = args::sub_plus(a, !self.no_account)?;
                Op::RsPlus {
                    account,
                    subject,
                    queue,
                }
            }
            Verb::RsMinus => {
                let (account, subject, queue) = args::sub_minus(a, !self.no_account)?;
                Op::RsMinus {
                    account,
                    subject,
                    queue,
                }
            }
            Verb::LsPlus if self.kind == Kind::Leaf => {
                let (_, subject, queue) = args::sub_plus(a, false)?;
                Op::LsPlus {
                    origin: b"",
                    account: b"",
                    subject,
                    queue,
                }
            }
            Verb::LsMinus if self.kind == Kind::Leaf => {
                let (_, subject, queue) = args::sub_minus(a, false)?;
                Op::LsMinus {
                    origin: None,
                    account: b"",
                    subject,
                    queue,
                }
            }
            Verb::LsPlus => {
                let (origin, rest) = args::pop_front(a).ok_or(ParseError::BadArgs("LS+ origin"))?;
                let (account, subject, queue) = args::sub_plus(rest, !self.no_account)?;
                Op::LsPlus {
                    origin,
                    account,
                    subject,
                    queue,
                }
            }
            Verb::LsMinus => {
                let (origin, rest) = if self.lnocu {
                    let (o, r) = args::pop_front(a).ok_or(ParseError::BadArgs("LS- origin"))?;
                    (Some(o), r)
                } else {
                    (None, a)
                };
                let (account, subject, queue) = args::sub_minus(rest, !self.no_account)?;
                Op::LsMinus {
                    origin,
                    account,
                    subject,
                    queue,
                }
            }
            Verb::AccPlus => Op::AccPlus(args::one(a)?),
            Verb::AccMinus => Op::AccMinus(args::one(a)?),
            Verb::Pub => {
                let (subject, reply, size) = args::pub_(a)?;
                let p = match self.payload(buf, body, size)? {
                    Some(p) => p,
                    None => return Ok(None),
                };
                return Ok(Some((
                    Op::Pub {
                        subject,
                        reply,
                        payload: p,
                    },
                    body + size + 2, // == self.payload's `need`, which did not overflow
                )));
            }
            Verb::Hpub => {
                let (subject, reply, hdr, total) = args::hpub(a)?;
                let p = match self.payload(buf, body, total)? {
                    Some(p) => p,
                    None => return Ok(None),
                };
                let (header, payload) = p.split_at_checked(hdr).ok_or(ParseError::BadSize)?;
                return Ok(Some((
                    Op::Hpub {
                        subject,
                        reply,
                        header,
                        payload,
                    },
                    body + total + 2,
                )));
            }
            Verb::Rmsg | Verb::Hmsg | Verb::Lmsg => {
                let leaf = self.kind == Kind::Leaf;
                let r = if leaf {
                    args::routed(a, false, verb == Verb::Hmsg, false)?
                } else {
                    args::routed(a, verb == Verb::Lmsg, verb != Verb::Rmsg, !self.no_account)?
                };
                let p = match self.payload(buf, body, r.total)? {
                    Some(p) => p,
                    None => return Ok(None),
                };
                let (header, payload) = match r.hdr {
                    None => (None, p),
                    Some(0) if verb == Verb::Lmsg => (None, p),
                    Some(h) => {
                        let (h, p) = p.split_at_checked(h).ok_or(ParseError::BadSize)?;
                        (Some(h), p)
                    }
                };
                let msg = RoutedMsg {
                    origin: r.origin,
                    account: r.account,
                    subject: r.subject,
                    reply: r.reply,
                    queues: Queues(r.queues),
                    header,
                    payload,
                };
                return Ok(Some((Op::Rmsg(msg), body + r.total + 2)));
            }
            Verb::Ping | Verb::Pong | Verb::Ok => return Err(ParseError::UnknownOp),
        };
        Ok(Some((op, body)))
    }

    /// PING / PONG / +OK: only whitespace may follow the name before the line end.
    fn no_arg_op<'a>(
        &mut self,
        buf: &'a [u8],
        verb: Verb,
        name_len: usize,
    ) -> Result<Option<(Op<'a>, usize)>, ParseError> {
        let op = match verb {
            Verb::Ping => Op::Ping,
            Verb::Pong => Op::Pong,
            _ => Op::Ok,
        };
        let tail = buf.get(name_len..).unwrap_or_default();
        for (i, &b) in tail.iter().enumerate() {
            // Same verdict as if the bytes so far were all we had (split invariance).
            self.check_partial_line(&buf[..name_len + i])?;
            match b {
                b'\n' => {
                    let len = name_len + i;
                    let line = len - usize::from(i > 0 && tail[i - 1] == b'\r');
                    if line > self.limits.max_control_line {
                        return Err(ParseError::MaxControlLine);
                    }
                    return Ok(Some((op, len + 1)));
                }
                b' ' | b'\t' | b'\r' => {}
                _ => return Err(ParseError::UnknownOp),
            }
        }
        self.check_partial_line(buf)?;
        Ok(None)
    }

    /// A control line without its `\n` yet: reject once it must exceed the limit.
    fn check_partial_line(&self, buf: &[u8]) -> Result<(), ParseError> {
        let max = self.limits.max_control_line;
        // One trailing `\r` may still turn out to be the line terminator.
        if buf.len() > max.saturating_add(1)
            || (buf.len() == max.saturating_add(1) && buf.last() != Some(&b'\r'))
        {
            return Err(ParseError::MaxControlLine);
        }
        Ok(())
    }

    /// The payload of `size` bytes starting at `body`, or `None` if not all here yet.
    fn payload<'a>(
        &mut self,
        buf: &'a [u8],
        body: usize,
        size: usize,
    ) -> Result<Option<&'a [u8]>, ParseError> {
        if size > self.limits.max_payload {
            return Err(ParseError::MaxPayload {
                size,
                max: self.limits.max_payload,
            });
        }
        let (end, need) = match body.checked_add(size) {
            Some(end) if end <= usize::MAX - 2 => (end, end + 2),
            _ => return Err(ParseError::BadSize),
        };
        match buf.get(end..need) {
            Some(b"\r\n") => Ok(buf.get(body..end)),
            Some(_) => Err(ParseError::BadPayloadTerminator),
            None => match buf.get(end) {
                Some(&b) if b != b'\r' => Err(ParseError::BadPayloadTerminator),
                _ => {
                    self.need = need;
                    Ok(None)
                }
            },
        }
    }
}
