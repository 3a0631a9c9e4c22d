//! Subject mapping transforms: what a `mappings { "src": "dest" }` entry does to a published
//! subject, with the semantics of nats-server 2.15 (`server/subject_transform.go` plus the
//! `ValidateMapping` check the account layer runs first).
//!
//! A destination is a subject whose tokens are literals, a trailing `>` (only when the source
//! ends in `>`), or placeholders that pull from the source's `*` wildcards (numbered from 1):
//!
//! * `$n` and `{{wildcard(n)}}`: the n-th wildcard token;
//! * `{{partition(buckets, n...)}}`: FNV-1a 32 of the listed wildcard tokens concatenated (or of
//!   the whole subject when none are listed), modulo `buckets`;
//! * `{{split(n, sep)}}`, `{{splitfromleft(n, pos)}}`, `{{splitfromright(n, pos)}}`,
//!   `{{slicefromleft(n, size)}}`, `{{slicefromright(n, size)}}`, `{{left(n, len)}}`,
//!   `{{right(n, len)}}`: cut one wildcard token into several (or shorten it);
//! * `{{random(n)}}`: a random number in `0..n`.
//!
//! Function names follow Go's regexes exactly: only the first letter of each camel-case word may
//! be either case (`SplitFromLeft`, `splitfromleft`, `splitFromLeft`, not `SPLITFROMLEFT`), and
//! whitespace is allowed after `{{`, around `(` and before `}}`. Cuts are byte-based like Go's; a
//! cut through a multi-byte character can only be represented lossily (U+FFFD) in a `String`.

use std::io::Write as _;

/// Error text for a bad source, or a destination that is not a subject or mismatches the source.
const BAD_SUBJECT: &str = "invalid subject";
const INVALID_TRANSFORM: &str = "invalid transform";
const UNKNOWN_FUNCTION: &str = "unknown function";
const INDEX_OUT_OF_RANGE: &str = "wildcard index out of range";
const NOT_ENOUGH_ARGS: &str = "not enough arguments passed to the function";
const INVALID_ARG: &str = "function argument is invalid or in the wrong format";
const TOO_MANY_ARGS: &str = "too many arguments passed to the function";

/// Go's `mappingDestinationErr` text: `invalid mapping destination: <what>[ in <token>]`.
fn dest_err(what: &str, token: &str) -> String {
    if token.is_empty() {
        format!("invalid mapping destination: {what}")
    } else {
        format!("invalid mapping destination: {what} in {token}")
    }
}

/// Function names in the order Go tries them. An upper-case letter matches either case, a
/// lower-case one only itself (Go: `[sS]plit[fF]rom[lL]eft`).
const FN_WILDCARD: &str = "Wildcard";
const FN_PARTITION: &str = "Partition";
const FN_SPLIT_FROM_LEFT: &str = "SplitFromLeft";
const FN_SPLIT_FROM_RIGHT: &str = "SplitFromRight";
const FN_SLICE_FROM_LEFT: &str = "SliceFromLeft";
const FN_SLICE_FROM_RIGHT: &str = "SliceFromRight";
const FN_RIGHT: &str = "Right";
const FN_LEFT: &str = "Left";
const FN_SPLIT: &str = "Split";
const FN_RANDOM: &str = "Random";
const ALL_FUNCTIONS: [&str; 10] = [
    FN_WILDCARD,
    FN_PARTITION,
    FN_SPLIT_FROM_LEFT,
    FN_SPLIT_FROM_RIGHT,
    FN_SLICE_FROM_LEFT,
    FN_SLICE_FROM_RIGHT,
    FN_RIGHT,
    FN_LEFT,
    FN_SPLIT,
    FN_RANDOM,
];

/// Go regexp `\s`.
fn is_re_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

fn skip_re_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_re_space(b[i]) {
        i += 1;
    }
    i
}

/// Does `name` (see [`ALL_FUNCTIONS`]) occur at `b[i..]`? Returns the index after it.
fn match_name(b: &[u8], i: usize, name: &str) -> Option<usize> {
    let n = name.as_bytes();
    let cand = b.get(i..i + n.len())?;
    let ok = n
        .iter()
        .zip(cand)
        .all(|(&p, &c)| c == p || (p.is_ascii_uppercase() && c == p.to_ascii_lowercase()));
    ok.then_some(i + n.len())
}

/// The argument text of `name` in `token`, as Go's unanchored
/// `{{\s*name\s*\((.*)\)\s*}}` finds it: leftmost `{{`, then the greedy (newline-free) capture
/// ending at the last `)` that is followed by `\s*}}`.
fn fn_args<'a>(token: &'a str, name: &str) -> Option<&'a str> {
    let b = token.as_bytes();
    let mut p = 0;
    while p + 1 < b.len() {
        if b[p] == b'{' && b[p + 1] == b'{' {
            if let Some(args) = fn_args_at(token, p + 2, name) {
                return Some(args);
            }
        }
        p += 1;
    }
    None
}

fn fn_args_at<'a>(token: &'a str, start: usize, name: &str) -> Option<&'a str> {
    let b = token.as_bytes();
    let i = skip_re_space(b, start);
    let i = match_name(b, i, name)?;
    let i = skip_re_space(b, i);
    if b.get(i) != Some(&b'(') {
        return None;
    }
    let c = i + 1;
    let line_end = b[c..]
        .iter()
        .position(|&x| x == b'\n')
        .map_or(b.len(), |n| c + n);
    (c..line_end).rev().find_map(|r| {
        if b[r] != b')' {
            return None;
        }
        let k = skip_re_space(b, r + 1);
        (b.get(k..k + 2) == Some(b"}}")).then(|| &token[c..r])
    })
}

/// Go's `regexp.MustCompile(`,\s*`).Split(args, -1)`.
fn split_args(args: &str) -> Vec<&str> {
    args.split(',')
        .enumerate()
        .map(|(i, a)| {
            if i == 0 {
                a
            } else {
                a.trim_start_matches(|c: char| c.is_ascii() && is_re_space(c as u8))
            }
        })
        .collect()
}

/// Go's `strconv.Atoi(strings.Trim(s, " "))` (64-bit `int`).
fn atoi(s: &str) -> Option<i64> {
    s.trim_matches(' ').parse().ok()
}

/// Go's `strconv.ParseInt(strings.Trim(s, " "), 10, 32)`.
fn atoi32(s: &str) -> Option<i32> {
    s.trim_matches(' ').parse().ok()
}

/// Go's Atoi-then-`> MaxInt32`-then-`int32()` for bucket counts: large negatives wrap.
fn atoi_max32(s: &str) -> Option<i32> {
    atoi(s)
        .filter(|&n| n <= i64::from(i32::MAX))
        .map(|n| n as i32)
}

/// Functions taking a wildcard index and an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    SplitFromLeft,
    SplitFromRight,
    SliceFromLeft,
    SliceFromRight,
    Left,
    Right,
}

/// A destination token as parsed, before wildcard indexes are resolved against the source.
#[derive(Debug, PartialEq, Eq)]
enum Placeholder<'a> {
    Literal,
    Wildcard(i64),
    Partition(i32, Vec<i64>),
    Cut(Cut, i64, i32),
    Split(i64, &'a str),
    Random(i32),
}

/// Go's `indexPlaceHolders`.
fn parse_placeholder(token: &str) -> Result<Placeholder<'_>, String> {
    let b = token.as_bytes();
    let n = b.len();
    if n > 1 && b[0] == b'$' {
        // Anything that is not a number is a literal (other features use `$` tokens).
        return Ok(match token[1..].parse::<i64>() {
            Ok(i) => Placeholder::Wildcard(i),
            Err(_) => Placeholder::Literal,
        });
    }
    if !(n > 4 && b.starts_with(b"{{") && b.ends_with(b"}}")) {
        return Ok(Placeholder::Literal);
    }
    let err = |what| Err(dest_err(what, token));
    if let Some(a) = fn_args(token, FN_WILDCARD) {
        let args = split_args(a);
        return match args.as_slice() {
            [""] => err(NOT_ENOUGH_ARGS),
            [one] => atoi(one).map_or_else(|| err(INVALID_ARG), |i| Ok(Placeholder::Wildcard(i))),
            _ => err(TOO_MANY_ARGS),
        };
    }
    if let Some(a) = fn_args(token, FN_PARTITION) {
        let args = split_args(a);
        let Some(buckets) = args.first().and_then(|s| atoi_max32(s)) else {
            return err(INVALID_ARG);
        };
        let mut idx = Vec::with_capacity(args.len() - 1);
        for s in &args[1..] {
            match atoi(s) {
                Some(i) => idx.push(i),
                None => return err(INVALID_ARG),
            }
        }
        return Ok(Placeholder::Partition(buckets, idx));
    }
    let cuts = [
        (FN_SPLIT_FROM_LEFT, Cut::SplitFromLeft),
        (FN_SPLIT_FROM_RIGHT, Cut::SplitFromRight),
        (FN_SLICE_FROM_LEFT, Cut::SliceFromLeft),
        (FN_SLICE_FROM_RIGHT, Cut::SliceFromRight),
        (FN_RIGHT, Cut::Right),
        (FN_LEFT, Cut::Left),
    ];
    for (name, cut) in cuts {
        if let Some(a) = fn_args(token, name) {
            let args = split_args(a);
            return match args.as_slice() {
                [_] => err(NOT_ENOUGH_ARGS),
                [i, v] => match (atoi(i), atoi32(v)) {
                    (Some(i), Some(v)) => Ok(Placeholder::Cut(cut, i, v)),
                    _ => err(INVALID_ARG),
                },
                _ => err(TOO_MANY_ARGS),
            };
        }
    }
    if let Some(a) = fn_args(token, FN_SPLIT) {
        let args = split_args(a);
        return match args.as_slice() {
            [_] => err(NOT_ENOUGH_ARGS),
            [i, sep] => match atoi(i) {
                Some(i) if !sep.contains([' ', '.']) => Ok(Placeholder::Split(i, sep)),
                _ => err(INVALID_ARG),
            },
            _ => err(TOO_MANY_ARGS),
        };
    }
    if let Some(a) = fn_args(token, FN_RANDOM) {
        return match split_args(a).as_slice() {
            [one] => {
                atoi_max32(one).map_or_else(|| err(INVALID_ARG), |n| Ok(Placeholder::Random(n)))
            }
            _ => err(NOT_ENOUGH_ARGS),
        };
    }
    err(UNKNOWN_FUNCTION)
}

/// Go's `subjectInfo`: `Some((partial wildcards, ends in '>'))` for a syntactically valid
/// subject (non-empty tokens, `>` last), no whitespace check.
fn subject_info(s: &str) -> Option<(usize, bool)> {
    if s.is_empty() {
        return None;
    }
    let (mut npwcs, mut fwc) = (0, false);
    for t in s.split('.') {
        if t.is_empty() || fwc {
            return None;
        }
        match t {
            "*" => npwcs += 1,
            ">" => fwc = true,
            _ => {}
        }
    }
    Some((npwcs, fwc))
}

/// Go's `IsValidSubject` (no whitespace either).
fn is_valid_subject(s: &str) -> bool {
    subject_info(s).is_some() && !s.bytes().any(is_subject_space)
}

fn is_subject_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// Go's `ValidateMapping` (run by `AddWeightedMappings` before compiling).
fn validate_mapping(dest: &str) -> Result<(), String> {
    let mut fwc = false;
    for t in dest.split('.') {
        if t.is_empty() || fwc {
            return Err(dest_err(INVALID_TRANSFORM, t));
        }
        let b = t.as_bytes();
        if b.len() > 4 && b.starts_with(b"{{") && b.ends_with(b"}}") {
            if !ALL_FUNCTIONS.iter().any(|f| fn_args(t, f).is_some()) {
                return Err(dest_err(UNKNOWN_FUNCTION, t));
            }
            continue;
        }
        if t == ">" {
            fwc = true;
        } else if b.iter().copied().any(is_subject_space) {
            return Err(dest_err(INVALID_TRANSFORM, ""));
        }
    }
    Ok(())
}

/// One compiled destination token. `usize` fields are positions in the published subject.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Literal(Box<str>),
    /// The destination's trailing `>`: the published tokens matched by the source's `>`.
    Tail,
    Wildcard(usize),
    /// An empty key list hashes the whole subject.
    Partition(i32, Box<[usize]>),
    Cut(Cut, usize, i32),
    Split(usize, Box<str>),
    Random(i32),
}

/// A compiled `src -> dest` subject transform.
#[derive(Debug, Clone)]
pub struct Transform {
    src: String,
    dest: String,
    /// Tokens of the effective source (`>` for an empty one).
    src_toks: Box<[Box<str>]>,
    /// Empty for an empty destination, which maps a matching subject to itself.
    ops: Box<[Op]>,
    /// Source and destination both `>` (or the destination empty): anything passes unchanged.
    passthrough: bool,
}

impl Transform {
    /// Compile a mapping as a `mappings {}` entry does (nats-server's NewSubjectTransform, non-strict).
    /// Errors: a message naming the problem, as close to nats-server's text as practical
    /// (e.g. invalid source/destination subject, unknown function, wildcard index out of range,
    /// not all source wildcards used is fine for mappings, etc. — follow Go).
    ///
    /// An empty `src` means `>`; an empty `dest` maps every matching subject to itself.
    pub fn new(src: &str, dest: &str) -> Result<Transform, String> {
        let esrc = if src.is_empty() { ">" } else { src };
        if !is_valid_subject(esrc) {
            return Err(BAD_SUBJECT.to_string());
        }
        let src_toks: Box<[Box<str>]> = esrc.split('.').map(Box::from).collect();
        let mut t = Transform {
            src: src.to_string(),
            dest: dest.to_string(),
            src_toks,
            ops: Box::new([]),
            passthrough: esrc == ">" && (dest.is_empty() || dest == ">"),
        };
        if dest.is_empty() {
            return Ok(t);
        }
        validate_mapping(dest)?;
        let (npwcs, sfwc) = subject_info(esrc).ok_or(BAD_SUBJECT)?;
        match subject_info(dest) {
            Some((0, dfwc)) if dfwc == sfwc => {}
            _ => return Err(BAD_SUBJECT.to_string()),
        }
        // Position in the source of wildcard n (1-based). Go's map lookup yields 0 for any
        // index below 1, so `$0` or `$-1` mean "the first token".
        let pwcs: Vec<usize> = t
            .src_toks
            .iter()
            .enumerate()
            .filter_map(|(i, s)| (&**s == "*").then_some(i))
            .collect();
        let has_wc = npwcs > 0 || sfwc;
        let resolve = |token: &str, i: i64| -> Result<usize, String> {
            if i > npwcs as i64 {
                return Err(dest_err(INDEX_OUT_OF_RANGE, &format!("{token}: [{i}]")));
            }
            let k = usize::try_from(i).unwrap_or(0);
            Ok(k.checked_sub(1)
                .and_then(|k| pwcs.get(k).copied())
                .unwrap_or(0))
        };
        let mut ops = Vec::new();
        for token in dest.split('.') {
            let op = match parse_placeholder(token)? {
                Placeholder::Literal if token == ">" => Op::Tail,
                Placeholder::Literal => Op::Literal(token.into()),
                Placeholder::Random(n) => Op::Random(n),
                // Without source wildcards only random and (whole-subject) partition make sense.
                Placeholder::Partition(n, _) if !has_wc => Op::Partition(n, Box::new([])),
                _ if !has_wc => return Err(dest_err(INDEX_OUT_OF_RANGE, token)),
                Placeholder::Wildcard(i) => Op::Wildcard(resolve(token, i)?),
                Placeholder::Partition(n, idx) => {
                    let keys = idx
                        .iter()
                        .map(|&i| resolve(token, i))
                        .collect::<Result<_, _>>()?;
                    Op::Partition(n, keys)
                }
                Placeholder::Cut(cut, i, v) => Op::Cut(cut, resolve(token, i)?, v),
                Placeholder::Split(i, sep) => Op::Split(resolve(token, i)?, sep.into()),
            };
            ops.push(op);
        }
        t.ops = ops.into();
        Ok(t)
    }

    /// The source subject (filter) as given.
    pub fn src(&self) -> &str {
        &self.src
    }

    /// The destination as given.
    pub fn dest(&self) -> &str {
        &self.dest
    }

    /// If `subject` (a literal published subject) matches the source, the transformed subject;
    /// otherwise None. Must never panic on any input (subjects come from the network).
    pub fn apply(&self, subject: &str) -> Option<String> {
        if self.passthrough {
            // Go's Match returns the subject untouched here, before any validity check.
            return Some(subject.to_string());
        }
        let n = subject.bytes().filter(|&b| b == b'.').count() + 1;
        let mut stack = [""; 32];
        let heap: Vec<&str>;
        let toks: &[&str] = if n <= stack.len() {
            for (slot, t) in stack.iter_mut().zip(subject.split('.')) {
                *slot = t;
            }
            &stack[..n]
        } else {
            heap = subject.split('.').collect();
            &heap
        };
        if !toks.iter().all(|t| !t.is_empty() && *t != "*" && *t != ">") || !self.matches(toks) {
            return None;
        }
        if self.ops.is_empty() {
            return Some(subject.to_string());
        }
        Some(self.render(toks, subject))
    }

    /// Go's `isSubsetMatch` of literal tokens against the source.
    fn matches(&self, toks: &[&str]) -> bool {
        for (i, s) in self.src_toks.iter().enumerate() {
            let Some(t) = toks.get(i) else {
                return false;
            };
            match &**s {
                ">" => return true,
                "*" => {}
                lit if lit != *t => return false,
                _ => {}
            }
        }
        toks.len() == self.src_toks.len()
    }

    /// Go's `TransformTokenizedSubject`: build the destination from matched tokens.
    /// Missing tokens (impossible after a match) render as nothing.
    fn render(&self, toks: &[&str], subject: &str) -> String {
        let mut out = Vec::with_capacity(self.dest.len() + subject.len() + 8);
        let tok = |i: usize| toks.get(i).copied().unwrap_or("");
        let last = self.ops.len().saturating_sub(1);
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Op::Tail => {
                    // Append the published tokens from the source's `>` on.
                    let from = self.src_toks.len().saturating_sub(1);
                    let rest = toks.get(from..).unwrap_or(&[]);
                    for (k, t) in rest.iter().enumerate() {
                        if k > 0 {
                            out.push(b'.');
                        }
                        out.extend_from_slice(t.as_bytes());
                    }
                    break;
                }
                Op::Literal(s) => out.extend_from_slice(s.as_bytes()),
                Op::Wildcard(at) => out.extend_from_slice(tok(*at).as_bytes()),
                Op::Partition(buckets, keys) => {
                    let h = if keys.is_empty() {
                        fnv1a32(subject.as_bytes(), FNV_OFFSET)
                    } else {
                        keys.iter()
                            .fold(FNV_OFFSET, |h, &k| fnv1a32(tok(k).as_bytes(), h))
                    };
                    let v = if *buckets == 0 {
                        0
                    } else {
                        h % (*buckets as u32)
                    };
                    let _ = write!(out, "{v}");
                }
                Op::Cut(cut, at, v) => cut_token(&mut out, *cut, tok(*at).as_bytes(), *v),
                Op::Split(at, sep) => split_token(&mut out, tok(*at), sep),
                Op::Random(n) => {
                    let v = if *n == 0 {
                        0
                    } else {
                        // Go: rand.Int31() % n, truncated (so in 0..|n|).
                        i64::from(rand::random::<u32>() >> 1) % i64::from(*n)
                    };
                    let _ = write!(out, "{v}");
                }
            }
            if i < last {
                out.push(b'.');
            }
        }
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a 32 (Go's `hash/fnv.New32a`), continuing from `h`.
fn fnv1a32(data: &[u8], mut h: u32) -> u32 {
    for &b in data {
        h ^= u32::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The index/integer functions, byte-based as in Go; out-of-range sizes leave the token whole.
fn cut_token(out: &mut Vec<u8>, cut: Cut, t: &[u8], v: i32) {
    let len = t.len();
    let n = match usize::try_from(v) {
        Ok(n) if n > 0 && n < len => n,
        _ => {
            out.extend_from_slice(t);
            return;
        }
    };
    match cut {
        Cut::SplitFromLeft | Cut::SplitFromRight => {
            let at = if cut == Cut::SplitFromLeft {
                n
            } else {
                len - n
            };
            out.extend_from_slice(&t[..at]);
            out.push(b'.');
            out.extend_from_slice(&t[at..]);
        }
        Cut::Left => out.extend_from_slice(&t[..n]),
        Cut::Right => out.extend_from_slice(&t[len - n..]),
        Cut::SliceFromLeft => {
            // Whole slices of n from the left, the short remainder last.
            for (k, chunk) in t.chunks(n).enumerate() {
                if k > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(chunk);
            }
        }
        Cut::SliceFromRight => {
            // The short remainder first, then whole slices of n.
            let rem = len % n;
            if rem > 0 {
                out.extend_from_slice(&t[..rem]);
                out.push(b'.');
            }
            for (k, chunk) in t[rem..].chunks(n).enumerate() {
                if k > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(chunk);
            }
        }
    }
}

/// `{{split(n, sep)}}` with Go's joining rule: empty pieces vanish, except that after a leading
/// empty piece a second empty one still leaves a `.` (`--a` gives `.a`, as nats-server does).
/// An empty separator splits into characters, as Go's `strings.Split(s, "")` does.
fn split_token(out: &mut Vec<u8>, t: &str, sep: &str) {
    if sep.is_empty() {
        let chars = t.char_indices().map(|(i, c)| &t[i..i + c.len_utf8()]);
        join_pieces(out, chars);
    } else {
        join_pieces(out, t.split(sep));
    }
}

fn join_pieces<'a>(out: &mut Vec<u8>, pieces: impl Iterator<Item = &'a str>) {
    let mut it = pieces.peekable();
    let mut first = true;
    while let Some(p) = it.next() {
        out.extend_from_slice(p.as_bytes());
        if let Some(next) = it.peek() {
            let no_sep = next.is_empty() || (first && p.is_empty());
            if !no_sep {
                out.push(b'.');
            }
        }
        first = false;
    }
}

#[cfg(test)]
mod tests;
