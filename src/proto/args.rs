//! Argument grammar of control lines: whitespace tokenising, decimal size fields (Go's
//! `parseSize`: 1–9 digits), and the per-op argument shapes of client ops (PUB, HPUB, SUB,
//! UNSUB) and route ops (RS±, LS±, A±, RMSG/HMSG/LMSG with `+ reply q…` / `| q…` forms).
//! Pure functions over the bytes after the op name; framing and limits live in
//! [`super::parser`].

use super::parser::ParseError;

/// Argument separators: space and tab; a stray `\r` inside a line also separates, as in Go.
#[inline]
fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r'
}

/// Strip leading and trailing whitespace.
#[inline]
pub fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ws(b)).map_or(start, |e| e + 1);
    s.get(start..end).unwrap_or_default()
}

/// First token and the rest after it (rest starts at the separator).
#[inline]
pub fn pop_front(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let start = s.iter().position(|&b| !is_ws(b))?;
    let s = &s[start..];
    let end = s.iter().position(|&b| is_ws(b)).unwrap_or(s.len());
    Some(s.split_at(end))
}

/// Last token and everything before it.
#[inline]
pub fn pop_back(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = s.iter().rposition(|&b| !is_ws(b))? + 1;
    let s = &s[..end];
    let start = s.iter().rposition(|&b| is_ws(b)).map_or(0, |p| p + 1);
    let (rest, tok) = s.split_at(start);
    Some((rest, tok))
}

fn no_more(s: &[u8], why: &'static str) -> Result<(), ParseError> {
    match pop_front(s) {
        None => Ok(()),
        Some(_) => Err(ParseError::BadArgs(why)),
    }
}

/// A size field, as nats-server's `parseSize`: 1 to 9 ASCII digits (so at most 999,999,999).
#[inline]
pub fn parse_size(d: &[u8]) -> Result<usize, ParseError> {
    if d.is_empty() || d.len() > 9 {
        return Err(ParseError::BadSize);
    }
    let mut n = 0usize;
    for &b in d {
        let v = b.wrapping_sub(b'0');
        if v > 9 {
            return Err(ParseError::BadSize);
        }
        n = n * 10 + v as usize;
    }
    Ok(n)
}

/// A queue weight: decimal `u32`.
fn parse_weight(d: &[u8]) -> Result<u32, ParseError> {
    const BAD: ParseError = ParseError::BadArgs("bad queue weight");
    if d.is_empty() {
        return Err(BAD);
    }
    let mut n = 0u32;
    for &b in d {
        let v = b.wrapping_sub(b'0');
        if v > 9 {
            return Err(BAD);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u32::from(v)))
            .ok_or(BAD)?;
    }
    Ok(n)
}

/// `-ERR` text: trimmed, and unquoted if wrapped in single quotes.
pub fn err_text(a: &[u8]) -> &[u8] {
    let t = trim(a);
    match t {
        [b'\'', inner @ .., b'\''] => inner,
        _ => t,
    }
}

/// Exactly one argument (A+ / A-).
pub fn one(a: &[u8]) -> Result<&[u8], ParseError> {
    let (t, rest) = pop_front(a).ok_or(ParseError::BadArgs("expected 1 argument"))?;
    no_more(rest, "expected 1 argument")?;
    Ok(t)
}

type Opt<'a> = Option<&'a [u8]>;

/// `PUB subject [reply] size`.
pub fn pub_(a: &[u8]) -> Result<(&[u8], Opt<'_>, usize), ParseError> {
    const WHY: &str = "PUB takes 2 or 3 arguments";
    let (subject, r) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
    let (t2, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    match pop_front(r) {
        None => Ok((subject, None, parse_size(t2)?)),
        Some((t3, r)) => {
            no_more(r, WHY)?;
            Ok((subject, Some(t2), parse_size(t3)?))
        }
    }
}

/// `HPUB subject [reply] hdr_len total_len`, with `hdr_len <= total_len`.
pub fn hpub(a: &[u8]) -> Result<(&[u8], Opt<'_>, usize, usize), ParseError> {
    const WHY: &str = "HPUB takes 3 or 4 arguments";
    let (subject, r) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
    let (t2, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    let (t3, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    let (reply, h, t) = match pop_front(r) {
        None => (None, t2, t3),
        Some((t4, r)) => {
            no_more(r, WHY)?;
            (Some(t2), t3, t4)
        }
    };
    let (hdr, total) = (parse_size(h)?, parse_size(t)?);
    if hdr > total {
        return Err(ParseError::BadSize);
    }
    Ok((subject, reply, hdr, total))
}

/// `SUB subject [queue] sid`.
pub fn sub(a: &[u8]) -> Result<(&[u8], Opt<'_>, &[u8]), ParseError> {
    const WHY: &str = "SUB takes 2 or 3 arguments";
    let (subject, r) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
    let (t2, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    match pop_front(r) {
        None => Ok((subject, None, t2)),
        Some((t3, r)) => {
            no_more(r, WHY)?;
            Ok((subject, Some(t2), t3))
        }
    }
}

/// `UNSUB sid [max]`. A max that is not a number (`abc`, `-1`) counts as 0, which removes the
/// subscription at once — what nats-server does with it.
pub fn unsub(a: &[u8]) -> Result<(&[u8], Option<u64>), ParseError> {
    const WHY: &str = "UNSUB takes 1 or 2 arguments";
    let (sid, r) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
    match pop_front(r) {
        None => Ok((sid, None)),
        Some((m, r)) => {
            no_more(r, WHY)?;
            Ok((sid, Some(parse_size(m).map_or(0, |n| n as u64))))
        }
    }
}

/// The account that leads a route op, or `""` on a pinned-account route (`with_acc` false:
/// nats-server 2.10+ leaves the account out there, the connection names it).
fn account<'a>(
    a: &'a [u8],
    with_acc: bool,
    why: &'static str,
) -> Result<(&'a [u8], &'a [u8]), ParseError> {
    if with_acc {
        pop_front(a).ok_or(ParseError::BadArgs(why))
    } else {
        Ok((&[][..], a))
    }
}

/// `acc subj [queue weight]` (RS+, and LS+ after its origin); `subj [queue weight]` on a
/// pinned-account route (`with_acc` false, the account comes back as `""`).
#[allow(clippy::type_complexity)]
pub fn sub_plus(
    a: &[u8],
    with_acc: bool,
) -> Result<(&[u8], &[u8], Option<(&[u8], u32)>), ParseError> {
    const WHY: &str = "RS+/LS+ take account subject [queue weight]";
    let (acc, r) = account(a, with_acc, WHY)?;
    let (subj, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    match pop_front(r) {
        None => Ok((acc, subj, None)),
        Some((q, r)) => {
            let (w, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
            no_more(r, WHY)?;
            Ok((acc, subj, Some((q, parse_weight(w)?))))
        }
    }
}

/// `acc subj [queue]` (RS-, and LS- after its optional origin); no account on a
/// pinned-account route (`with_acc` false).
pub fn sub_minus(a: &[u8], with_acc: bool) -> Result<(&[u8], &[u8], Opt<'_>), ParseError> {
    const WHY: &str = "RS-/LS- take account subject [queue]";
    let (acc, r) = account(a, with_acc, WHY)?;
    let (subj, r) = pop_front(r).ok_or(ParseError::BadArgs(WHY))?;
    match pop_front(r) {
        None => Ok((acc, subj, None)),
        Some((q, r)) => {
            no_more(r, WHY)?;
            Ok((acc, subj, Some(q)))
        }
    }
}

/// Arguments of a routed message line.
#[derive(Debug, PartialEq, Eq)]
pub struct Routed<'a> {
    pub origin: Opt<'a>,
    pub account: &'a [u8],
    pub subject: &'a [u8],
    pub reply: Opt<'a>,
    /// Raw queue-name region (whitespace-separated, trimmed, possibly empty).
    pub queues: &'a [u8],
    /// Header length for HMSG/LMSG.
    pub hdr: Option<usize>,
    /// Total bytes after the control line, excluding the final CRLF.
    pub total: usize,
}

/// `[origin] acc subj [reply | + reply q… | | q…] [hdr_len] size`.
/// `origin` is present for LMSG; `hdr` for HMSG and LMSG; no `acc` on a pinned-account route
/// (`with_acc` false: the account comes back as `""`).
pub fn routed(a: &[u8], origin: bool, hdr: bool, with_acc: bool) -> Result<Routed<'_>, ParseError> {
    const WHY: &str = "routed message: missing arguments";
    let (origin, a) = if origin {
        let (o, r) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
        (Some(o), r)
    } else {
        (None, a)
    };
    let (account, a) = account(a, with_acc, WHY)?;
    let (subject, a) = pop_front(a).ok_or(ParseError::BadArgs(WHY))?;
    let (a, size) = pop_back(a).ok_or(ParseError::BadArgs(WHY))?;
    let total = parse_size(size)?;
    let (mid, hdr) = if hdr {
        let (a, h) = pop_back(a).ok_or(ParseError::BadArgs(WHY))?;
        let h = parse_size(h)?;
        if h > total {
            return Err(ParseError::BadSize);
        }
        (a, Some(h))
    } else {
        (a, None)
    };
    let (reply, queues) = match pop_front(mid) {
        None => (None, &[][..]),
        Some((t, r)) => {
            let r = trim(r);
            if r.is_empty() {
                (Some(t), &[][..])
            } else {
                match t {
                    b"+" => match pop_front(r) {
                        Some((reply, q)) => (Some(reply), trim(q)),
                        None => (None, &[][..]), // unreachable: r is non-empty
                    },
                    b"|" => (None, r),
                    _ => return Err(ParseError::BadArgs("Bad or Missing Reply Indicator")),
                }
            }
        }
    };
    Ok(Routed {
        origin,
        account,
        subject,
        reply,
        queues,
        hdr,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert_eq!(pop_front(b"  a\tbc d"), Some((&b"a"[..], &b"\tbc d"[..])));
        assert_eq!(pop_front(b" \t "), None);
        assert_eq!(pop_back(b"a bc  \t"), Some((&b"a "[..], &b"bc"[..])));
        assert_eq!(pop_back(b"abc"), Some((&b""[..], &b"abc"[..])));
        assert_eq!(trim(b" \t x y \r"), b"x y");
        assert_eq!(trim(b"   "), b"");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"0"), Ok(0));
        assert_eq!(parse_size(b"999999999"), Ok(999_999_999));
        for bad in [&b""[..], b"-1", b"abc", b"1a", b"1000000000", b"+5", b" 5"] {
            assert_eq!(parse_size(bad), Err(ParseError::BadSize), "{bad:?}");
        }
        assert_eq!(parse_weight(b"4294967295"), Ok(u32::MAX));
        assert!(parse_weight(b"4294967296").is_err());
        assert!(parse_weight(b"x").is_err());
    }

    #[test]
    fn routed_forms() {
        let r = routed(b"$G foo 5", false, false, true).unwrap();
        assert_eq!((r.reply, r.queues, r.total), (None, &b""[..], 5));
        let r = routed(b"$G foo bar 5", false, false, true).unwrap();
        assert_eq!(r.reply, Some(&b"bar"[..]));
        let r = routed(b"$G foo + r q1 q2  5", false, false, true).unwrap();
        assert_eq!((r.reply, r.queues), (Some(&b"r"[..]), &b"q1 q2"[..]));
        let r = routed(b"$G foo + r 5", false, false, true).unwrap();
        assert_eq!((r.reply, r.queues), (Some(&b"r"[..]), &b""[..]));
        let r = routed(b"$G foo | q1 5", false, false, true).unwrap();
        assert_eq!((r.reply, r.queues), (None, &b"q1"[..]));
        let r = routed(b"$G foo | 5", false, false, true).unwrap();
        assert_eq!(r.reply, Some(&b"|"[..]));
        assert_eq!(
            routed(b"$G foo x y 5", false, false, true),
            Err(ParseError::BadArgs("Bad or Missing Reply Indicator"))
        );
        assert!(routed(b"$G", false, false, true).is_err());
        assert!(routed(b"$G foo", false, false, true).is_err());
        let r = routed(b"O $G foo + r q 3 7", true, true, true).unwrap();
        assert_eq!(r.origin, Some(&b"O"[..]));
        assert_eq!((r.hdr, r.total, r.queues), (Some(3), 7, &b"q"[..]));
        assert_eq!(
            routed(b"$G foo 8 7", false, true, true),
            Err(ParseError::BadSize)
        );
        assert!(routed(b"$G foo 7", false, true, true).is_err());
    }
}
