//! Subject syntax: the NATS rules for subjects, queue names and wildcard matching.
//!
//! A subject is a byte string of tokens separated by `.`. A token that is exactly `*` matches
//! one token; a token that is exactly `>` matches one or more tokens and may only be the last
//! token. Tokens such as `a*b` or `foo>` are ordinary literals. This module owns only the
//! syntax and the pure comparisons between patterns (validation, permission matching, subset
//! and overlap tests); it knows nothing about subscriptions, which live in `sublist`.

/// Token separator.
pub const SEP: u8 = b'.';
/// The single-token wildcard, as a whole token.
pub const PWC: &[u8] = b"*";
/// The full (tail) wildcard, as a whole token; only valid as the last token.
pub const FWC: &[u8] = b">";

/// Bytes NATS forbids anywhere in a subject or queue name.
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Split a subject into its tokens. An empty input yields one empty token, as does every
/// leading, trailing or doubled separator; validate first if that matters.
pub fn tokens(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&b| b == SEP)
}

/// True if `s` is a well-formed subject, wildcards allowed: non-empty, no empty tokens, no
/// whitespace, and a `>` token only in last position.
pub fn is_valid_subject(s: &[u8]) -> bool {
    if s.is_empty() || s.iter().any(|&b| is_whitespace(b)) {
        return false;
    }
    let mut it = tokens(s).peekable();
    while let Some(t) = it.next() {
        if t.is_empty() || (t == FWC && it.peek().is_some()) {
            return false;
        }
    }
    true
}

/// True if `s` is a valid subject with no wildcard token: what a publish subject must be.
pub fn is_valid_literal_subject(s: &[u8]) -> bool {
    is_valid_subject(s) && !has_wildcard(s)
}

/// True if any token of `s` is exactly `*` or `>`.
pub fn has_wildcard(s: &[u8]) -> bool {
    tokens(s).any(|t| t == PWC || t == FWC)
}

/// True if `q` is a usable queue group name: non-empty and without whitespace.
pub fn is_valid_queue_name(q: &[u8]) -> bool {
    !q.is_empty() && !q.iter().any(|&b| is_whitespace(b))
}

/// Does `pattern` (which may hold wildcards) match `subject`, whose tokens are taken literally?
///
/// A subject token `*` is matched by a pattern `*`, a pattern `>` or a literal `*` token; this is
/// how permissions are checked against PUB and SUB subjects. Inputs are assumed valid (see
/// [`is_valid_subject`]); an empty string never matches.
pub fn pattern_matches(pattern: &[u8], subject: &[u8]) -> bool {
    if pattern.is_empty() || subject.is_empty() {
        return false;
    }
    let mut subj = tokens(subject);
    for p in tokens(pattern) {
        let Some(t) = subj.next() else {
            return false;
        };
        if p == FWC {
            return true; // `t` exists, so at least one token remains for `>`.
        }
        if p != PWC && p != t {
            return false;
        }
    }
    subj.next().is_none()
}

/// True if every subject matched by `subject` (which may hold wildcards) is also matched by
/// `pattern`: nats-server's `subjectIsSubsetMatch`. `foo.bar` ⊂ `foo.*` ⊂ `foo.>`, but
/// `foo.>` ⊄ `foo.*`.
pub fn subset_match(subject: &[u8], pattern: &[u8]) -> bool {
    if subject.is_empty() || pattern.is_empty() {
        return false;
    }
    let mut subj = tokens(subject);
    for t2 in tokens(pattern) {
        let Some(t1) = subj.next() else {
            return false;
        };
        if t1.is_empty() || t2.is_empty() {
            return false;
        }
        if t2 == FWC {
            return true;
        }
        if t1 == FWC {
            return false;
        }
        if t1 == PWC {
            if t2 != PWC {
                return false;
            }
            continue;
        }
        if t2 != PWC && t1 != t2 {
            return false;
        }
    }
    subj.next().is_none()
}

/// True if some literal subject is matched by both patterns `a` and `b`.
pub fn overlaps(a: &[u8], b: &[u8]) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let (mut ta, mut tb) = (tokens(a), tokens(b));
    loop {
        match (ta.next(), tb.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) => {
                // Both sides still have a token here, so the rest of the other side can
                // always produce the one-or-more tokens a `>` needs.
                if x == FWC || y == FWC {
                    return true;
                }
                if x != PWC && y != PWC && x != y {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// A JetStream delivery's reply as nats-server 2.10+ sends it over routes and gateways,
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>@<subject>`: the
/// message was matched on the RMSG subject (a pull request's inbox, a push consumer's deliver
/// subject) and clients get it as `<subject>` with the reply before the `@` (its
/// `jsAckDeliverIdx`: the first `@` after eight dots; tokens may hold `@` themselves).
/// Returns (reply, subject), or `None` for any other reply.
pub fn js_ack_deliver_split(reply: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = reply.strip_prefix(b"$JS.ACK.")?;
    let mut dots = 2;
    for (i, &b) in rest.iter().enumerate() {
        match b {
            b'.' => dots += 1,
            b'@' if dots >= 8 => {
                let at = i + 8;
                return (at + 1 < reply.len()).then(|| (&reply[..at], &reply[at + 1..]));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_subjects() {
        for s in [
            "foo",
            "foo.bar",
            "foo.*",
            "*",
            ">",
            "foo.>",
            "*.*.>",
            "a*b",
            "foo>",
            "foo.>bar.baz",
            "$SYS.REQ",
            "foo-bar_baz",
            "ü.ñ",
        ] {
            assert!(is_valid_subject(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn invalid_subjects() {
        for s in [
            "",
            ".",
            "foo.",
            ".foo",
            "foo..bar",
            "foo bar",
            "foo\tbar",
            "foo\r",
            "\nfoo",
            ">.foo",
            "foo.>.bar",
            "foo. .bar",
            "foo.>.>",
        ] {
            assert!(!is_valid_subject(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn literal_subjects() {
        assert!(is_valid_literal_subject(b"foo.bar"));
        assert!(is_valid_literal_subject(b"foo.a*b.c>"));
        assert!(!is_valid_literal_subject(b"foo.*"));
        assert!(!is_valid_literal_subject(b"foo.>"));
        assert!(!is_valid_literal_subject(b">"));
        assert!(!is_valid_literal_subject(b"foo..bar"));
        assert!(!is_valid_literal_subject(b""));
    }

    #[test]
    fn wildcard_detection() {
        assert!(has_wildcard(b"*"));
        assert!(has_wildcard(b"foo.*.bar"));
        assert!(has_wildcard(b"foo.>"));
        assert!(!has_wildcard(b"foo.bar"));
        assert!(!has_wildcard(b"a*.b>"));
        assert!(!has_wildcard(b""));
    }

    #[test]
    fn queue_names() {
        assert!(is_valid_queue_name(b"workers"));
        assert!(is_valid_queue_name(b"q.with.dots"));
        assert!(!is_valid_queue_name(b""));
        assert!(!is_valid_queue_name(b"bad queue"));
        assert!(!is_valid_queue_name(b"bad\tq"));
        assert!(!is_valid_queue_name(b"q\r\n"));
    }

    #[test]
    fn token_iteration() {
        let t: Vec<&[u8]> = tokens(b"a.bb.*.>").collect();
        assert_eq!(t, vec![&b"a"[..], b"bb", b"*", b">"]);
        assert_eq!(tokens(b"foo").count(), 1);
        assert_eq!(tokens(b"a..b").count(), 3);
    }

    #[test]
    fn pattern_matching() {
        let yes = [
            ("foo", "foo"),
            ("foo.bar", "foo.bar"),
            ("foo.*", "foo.bar"),
            ("*.bar", "foo.bar"),
            ("*", "foo"),
            (">", "foo"),
            (">", "foo.bar.baz"),
            ("foo.>", "foo.bar"),
            ("foo.>", "foo.bar.baz"),
            ("foo.*.>", "foo.a.b"),
            // Subject wildcard tokens compare literally.
            ("foo.*", "foo.*"),
            ("foo.>", "foo.*"),
            ("foo.>", "foo.>"),
            ("foo.*", "foo.>"),
        ];
        for (p, s) in yes {
            assert!(pattern_matches(p.as_bytes(), s.as_bytes()), "{p} ~ {s}");
        }
        let no = [
            ("foo", "bar"),
            ("foo", "foo.bar"),
            ("foo.bar", "foo"),
            ("foo.*", "foo"),
            ("foo.*", "foo.bar.baz"),
            ("foo.>", "foo"),
            ("*", "foo.bar"),
            ("foo.*.>", "foo.a"),
            ("foo.bar", "foo.*"),
            ("", "foo"),
            ("foo", ""),
            ("a*b", "axb"),
        ];
        for (p, s) in no {
            assert!(!pattern_matches(p.as_bytes(), s.as_bytes()), "{p} !~ {s}");
        }
    }

    #[test]
    fn subset_matching() {
        let yes = [
            ("foo.bar", "foo.bar"),
            ("foo.bar", "foo.*"),
            ("foo.bar", "foo.>"),
            ("foo.*", "foo.*"),
            ("foo.*", "foo.>"),
            ("foo.*", "*.*"),
            ("foo.>", "foo.>"),
            ("foo.>", ">"),
            ("foo.*.bar", "foo.>"),
            (">", ">"),
            ("*", "*"),
            ("*", ">"),
        ];
        for (s, p) in yes {
            assert!(subset_match(s.as_bytes(), p.as_bytes()), "{s} ⊂ {p}");
        }
        let no = [
            ("foo.>", "foo.*"),
            ("foo.*", "foo.bar"),
            ("foo", "foo.>"),
            ("foo.bar", "foo"),
            ("foo", "foo.bar"),
            (">", "*"),
            (">", "foo.>"),
            ("foo.>", "foo.*.>"),
            ("*", "foo"),
            ("foo.bar", "foo.baz"),
            ("", "foo"),
        ];
        for (s, p) in no {
            assert!(!subset_match(s.as_bytes(), p.as_bytes()), "{s} ⊄ {p}");
        }
    }

    #[test]
    fn overlapping() {
        let yes = [
            ("foo", "foo"),
            ("foo.*", "foo.bar"),
            ("*.bar", "foo.*"),
            ("foo.>", "*.bar.baz"),
            (">", "foo"),
            (">", "*.*.*"),
            ("foo.>", "foo.*"),
            ("foo.*.baz", "*.bar.>"),
            ("*", "*"),
        ];
        for (a, b) in yes {
            assert!(overlaps(a.as_bytes(), b.as_bytes()), "{a} ∩ {b}");
            assert!(overlaps(b.as_bytes(), a.as_bytes()), "{b} ∩ {a}");
        }
        let no = [
            ("foo", "bar"),
            ("foo.*", "foo"),
            ("foo.>", "foo"),
            ("foo.*", "foo.*.*"),
            ("*.bar", "foo.baz"),
            ("foo.*.baz", "*.bar.qux"),
            ("bar.>", "foo.>"),
            ("", "foo"),
        ];
        for (a, b) in no {
            assert!(!overlaps(a.as_bytes(), b.as_bytes()), "{a} ∩ {b}");
            assert!(!overlaps(b.as_bytes(), a.as_bytes()), "{b} ∩ {a}");
        }
    }

    #[test]
    fn subset_implies_overlap_and_literal_match() {
        // Cross-check the three comparisons on a small universe of patterns.
        let pats = [
            "a", "b", "a.b", "a.c", "*", ">", "a.*", "*.b", "a.>", "*.>", "a.b.c", "a.*.c",
            "*.*.*", "a.b.>",
        ];
        let lits = [
            "a", "b", "a.b", "a.c", "x.b", "a.b.c", "a.x.c", "a.b.d", "x.y.z", "a.b.c.d",
        ];
        for p in pats {
            for q in pats {
                let (p, q) = (p.as_bytes(), q.as_bytes());
                let shared = lits
                    .iter()
                    .any(|l| pattern_matches(p, l.as_bytes()) && pattern_matches(q, l.as_bytes()));
                if shared {
                    assert!(overlaps(p, q));
                }
                if subset_match(p, q) {
                    for l in lits {
                        if pattern_matches(p, l.as_bytes()) {
                            assert!(pattern_matches(q, l.as_bytes()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn js_ack_deliver_suffix_is_split_as_nats_server_does() {
        let r = b"$JS.ACK.ORDERS.worker.1.1.1.1796196891105706631.2@orders.0";
        assert_eq!(
            js_ack_deliver_split(r),
            Some((
                &b"$JS.ACK.ORDERS.worker.1.1.1.1796196891105706631.2"[..],
                &b"orders.0"[..]
            ))
        );
        // An `@` inside the stream or consumer name is part of the name.
        let r = b"$JS.ACK.S@x.c@y.1.2.3.4.5@a.b@c";
        assert_eq!(
            js_ack_deliver_split(r),
            Some((&b"$JS.ACK.S@x.c@y.1.2.3.4.5"[..], &b"a.b@c"[..]))
        );
        for plain in [
            &b"$JS.ACK.ORDERS.worker.1.1.1.1796196891105706631.2"[..],
            b"$JS.ACK.S.c.1.2@x",
            b"$JS.ACK.ORDERS.worker.1.1.1.17.2@",
            b"_INBOX.abc@d",
            b"$JS.ACKS.a.b.c.d.e.f.g@x",
        ] {
            assert_eq!(
                js_ack_deliver_split(plain),
                None,
                "{:?}",
                String::from_utf8_lossy(plain)
            );
        }
    }
}
