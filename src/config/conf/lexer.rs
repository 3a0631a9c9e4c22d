//! The character level of the config language: a cursor that tracks line and column, the
//! trivia between tokens (blanks, new lines, `#` and `//` comments), the quoted and block
//! string forms, bare words, and what a bare word means (boolean, integer with a size unit,
//! float, date, variable reference or plain string). Knows nothing of maps, scopes or files.

use super::{ConfigError, Pos};
use std::path::Path;
use std::sync::Arc;

/// A position-tracking cursor over the source text.
pub(crate) struct Cursor<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    off: usize,
    line: u32,
    col: u32,
    file: Option<Arc<Path>>,
}

/// True for the characters that end a bare word (a value written without quotes), as in
/// nats-server: blanks, new lines, `,`, `;`, `]`, `}`.
pub(crate) fn ends_bare(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n' | ',' | ';' | ']' | '}')
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(src: &'a str, file: Option<Arc<Path>>) -> Self {
        let src = src.strip_prefix('\u{feff}').unwrap_or(src);
        Cursor {
            src,
            off: 0,
            line: 1,
            col: 1,
            file,
        }
    }

    pub(crate) fn pos(&self) -> Pos {
        Pos {
            file: self.file.clone(),
            line: self.line,
            col: self.col,
        }
    }

    pub(crate) fn err(&self, msg: impl Into<String>) -> ConfigError {
        ConfigError::at(&self.pos(), msg)
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.src[self.off..].chars().next()
    }

    pub(crate) fn peek2(&self) -> Option<char> {
        let mut it = self.src[self.off..].chars();
        it.next();
        it.next()
    }

    pub(crate) fn at_eof(&self) -> bool {
        self.off >= self.src.len()
    }

    pub(crate) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.off += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// Skip spaces and tabs (and `\r`), not new lines.
    pub(crate) fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.bump();
        }
    }

    /// True when a comment (`#` or `//`) starts here.
    pub(crate) fn at_comment(&self) -> bool {
        match self.peek() {
            Some('#') => true,
            Some('/') => self.peek2() == Some('/'),
            _ => false,
        }
    }

    /// Skip a comment up to (not including) the end of its line.
    pub(crate) fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }

    /// Skip blanks, new lines and comments.
    pub(crate) fn skip_trivia(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r' | '\n') => {
                    self.bump();
                }
                _ if self.at_comment() => self.skip_comment(),
                _ => return,
            }
        }
    }

    /// Skip blanks and new lines, not comments (between a key and its separator).
    pub(crate) fn skip_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r' | '\n')) {
            self.bump();
        }
    }

    /// A key written without quotes: up to a blank, new line, `=`, `:`, `{`, `[` or the end.
    pub(crate) fn bare_key(&mut self) -> String {
        let start = self.off;
        while let Some(c) = self.peek() {
            if matches!(
                c,
                ' ' | '\t' | '\r' | '\n' | '=' | ':' | '{' | '[' | ',' | ';' | '}' | ']'
            ) {
                break;
            }
            self.bump();
        }
        self.src[start..self.off].to_string()
    }

    /// A quoted key (`"key"` or `'key'`), the quote not yet consumed. No escapes, as in
    /// nats-server.
    pub(crate) fn quoted_key(&mut self) -> Result<String, ConfigError> {
        let open = self.pos();
        let Some(q) = self.bump() else {
            return Err(self.err("expected a key"));
        };
        let start = self.off;
        loop {
            match self.peek() {
                Some(c) if c == q => break,
                Some('\n') | None => {
                    return Err(ConfigError::at(
                        &open,
                        "unterminated quoted key: the closing quote is missing",
                    ))
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let key = self.src[start..self.off].to_string();
        self.bump();
        Ok(key)
    }

    /// A `"double-quoted"` string, the quote not yet consumed: escapes `\t \n \r \" \\ \xHH`.
    pub(crate) fn dq_string(&mut self) -> Result<String, ConfigError> {
        let open = self.pos();
        self.bump();
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(ConfigError::at(
                    &open,
                    "unterminated string: the closing '\"' is missing",
                ));
            };
            match c {
                '"' => {
                    self.bump();
                    break;
                }
                '\\' => {
                    let esc_pos = self.pos();
                    self.bump();
                    match self.bump() {
                        Some('t') => out.push(b'\t'),
                        Some('n') => out.push(b'\n'),
                        Some('r') => out.push(b'\r'),
                        Some('"') => out.push(b'"'),
                        Some('\\') => out.push(b'\\'),
                        Some('x') => {
                            let hi = self.bump().and_then(|c| c.to_digit(16));
                            let lo = self.bump().and_then(|c| c.to_digit(16));
                            match (hi, lo) {
                                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                                _ => {
                                    return Err(ConfigError::at(
                                        &esc_pos,
                                        "expected two hexadecimal digits after '\\x'",
                                    ))
                                }
                            }
                        }
                        other => {
                            let shown = match other {
                                None => "end of file".to_string(),
                                Some('\n') => "new line".to_string(),
                                Some(c) => format!("'{c}'"),
                            };
                            return Err(ConfigError::at(
                                &esc_pos,
                                format!(
                                    "invalid escape {shown}: only \\xXX, \\t, \\n, \\r, \\\" and \\\\ \
                                     are allowed"
                                ),
                            ));
                        }
                    }
                }
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    self.bump();
                }
            }
        }
        String::from_utf8(out)
            .map_err(|_| ConfigError::at(&open, "the \\x escapes of this string are not UTF-8"))
    }

    /// A `'single-quoted'` string, the quote not yet consumed: raw, no escapes.
    pub(crate) fn sq_string(&mut self) -> Result<String, ConfigError> {
        let open = self.pos();
        self.bump();
        let start = self.off;
        loop {
            match self.peek() {
                Some('\'') => break,
                None => {
                    return Err(ConfigError::at(
                        &open,
                        "unterminated string: the closing \"'\" is missing",
                    ))
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
        let s = self.src[start..self.off].to_string();
        self.bump();
        Ok(s)
    }

    /// A block string `( … )`, the `(` not yet consumed: everything up to a `)` that stands
    /// alone on its line (as nats-server: the text keeps its first and last new lines).
    pub(crate) fn block_string(&mut self) -> Result<String, ConfigError> {
        let open = self.pos();
        self.bump();
        let start = self.off;
        let mut line_start = true; // true right after a '\n'
        loop {
            match self.peek() {
                None => {
                    return Err(ConfigError::at(
                        &open,
                        "unterminated block string: expected a ')' alone on a line",
                    ))
                }
                Some(')') if line_start && matches!(self.peek2(), None | Some('\n' | '\r')) => {
                    let s = self.src[start..self.off].to_string();
                    self.bump();
                    return Ok(s);
                }
                Some(c) => {
                    line_start = c == '\n';
                    self.bump();
                }
            }
        }
    }

    /// A bare word (a value without quotes): up to a blank, new line, `,`, `;`, `]`, `}`.
    pub(crate) fn bare_word(&mut self) -> &'a str {
        let start = self.off;
        while let Some(c) = self.peek() {
            if ends_bare(c) {
                break;
            }
            self.bump();
        }
        &self.src[start..self.off]
    }

    /// The include target after `include `: quoted, or bare up to a blank, `;`, `}` or a new
    /// line.
    pub(crate) fn include_target(&mut self) -> Result<String, ConfigError> {
        match self.peek() {
            Some('"') => self.dq_string(),
            Some('\'') => self.sq_string(),
            None | Some('\n') => Err(self.err("expected a file name after include")),
            Some('[' | '{' | '(') => Err(self.err("expected a file name after include")),
            Some(_) => {
                let start = self.off;
                while let Some(c) = self.peek() {
                    if matches!(c, ' ' | '\t' | '\r' | '\n' | ';' | '}' | ',') {
                        break;
                    }
                    self.bump();
                }
                Ok(self.src[start..self.off].to_string())
            }
        }
    }
}

/// What a bare word means.
#[derive(Debug, PartialEq)]
pub(crate) enum Bare {
    Bool(bool),
    Integer {
        value: i64,
        unit: Option<String>,
    },
    Float(f64),
    DateTime(String),
    /// `$NAME`: the name without `$`.
    Variable(String),
    String(String),
}

/// The multiplier of a size suffix (case-insensitive): `k`=1000, `kb`/`ki`/`kib`=1024, and the
/// same for m, g, t, p, e — as nats-server 2.9 computes them.
pub(crate) fn unit_multiplier(unit: &str) -> Option<i64> {
    let u = unit.to_ascii_lowercase();
    let (letter, rest) = u.split_at(1.min(u.len()));
    let power: u32 = match letter {
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        "e" => 6,
        _ => return None,
    };
    match rest {
        "" => 1000i64.checked_pow(power),
        "b" | "i" | "ib" => 1024i64.checked_pow(power),
        _ => None,
    }
}

/// True for bcrypt hashes, which start with `$2a$`, `$2b$` or `$2y$` and are not variables.
fn is_bcrypt(word: &str) -> bool {
    ["$2a$", "$2b$", "$2y$"].iter().any(|p| word.starts_with(p))
}

fn is_date(w: &str) -> bool {
    let b = w.as_bytes();
    let shape = b"0000-00-00T00:00:00Z";
    b.len() == shape.len()
        && b.iter().zip(shape.iter()).all(|(c, s)| {
            if *s == b'0' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        })
}

/// Classify a bare word. `pos` is where it starts (for the error of an integer out of range).
pub(crate) fn classify(word: &str, pos: &Pos) -> Result<Bare, ConfigError> {
    let lower = word.to_ascii_lowercase();
    match lower.as_str() {
        "true" | "yes" | "on" => return Ok(Bare::Bool(true)),
        "false" | "no" | "off" => return Ok(Bare::Bool(false)),
        _ => {}
    }
    if let Some(name) = word.strip_prefix('$') {
        if is_bcrypt(word) {
            return Ok(Bare::String(word.to_string()));
        }
        if name.is_empty() {
            return Err(ConfigError::at(pos, "expected a variable name after '$'"));
        }
        return Ok(Bare::Variable(name.to_string()));
    }
    if is_date(word) {
        return Ok(Bare::DateTime(word.to_string()));
    }
    let digits_from = usize::from(word.starts_with('-'));
    let body = &word[digits_from..];
    let ndigits = body.bytes().take_while(u8::is_ascii_digit).count();
    if ndigits == 0 {
        return Ok(Bare::String(word.to_string()));
    }
    let num_text = &word[..digits_from + ndigits];
    let rest = &body[ndigits..];
    if rest.is_empty() || rest.bytes().all(|b| b.is_ascii_alphabetic()) {
        let mult = if rest.is_empty() {
            Some(1)
        } else {
            unit_multiplier(rest)
        };
        // Digits followed by letters that are not a size unit ("10s", "1x") are a string, as
        // in nats-server; a key that wants a number then reports the bad unit.
        let Some(mult) = mult else {
            return Ok(Bare::String(word.to_string()));
        };
        let n: i64 = num_text
            .parse()
            .map_err(|_| ConfigError::at(pos, format!("integer {word:?} is out of range")))?;
        let value = n
            .checked_mul(mult)
            .ok_or_else(|| ConfigError::at(pos, format!("integer {word:?} is out of range")))?;
        let unit = (!rest.is_empty()).then(|| rest.to_string());
        return Ok(Bare::Integer { value, unit });
    }
    if let Some(frac) = rest.strip_prefix('.') {
        if !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(f) = word.parse::<f64>() {
                return Ok(Bare::Float(f));
            }
        }
    }
    // IP addresses, host:port, versions …
    Ok(Bare::String(word.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(w: &str) -> Bare {
        classify(w, &Pos::default()).expect("classify")
    }

    fn int(value: i64, unit: Option<&str>) -> Bare {
        Bare::Integer {
            value,
            unit: unit.map(str::to_string),
        }
    }

    #[test]
    fn units_as_nats_server() {
        assert_eq!(c("1k"), int(1000, Some("k")));
        assert_eq!(c("1K"), int(1000, Some("K")));
        assert_eq!(c("1kb"), int(1024, Some("kb")));
        assert_eq!(c("1KB"), int(1024, Some("KB")));
        assert_eq!(c("1ki"), int(1024, Some("ki")));
        assert_eq!(c("1KiB"), int(1024, Some("KiB")));
        assert_eq!(c("2m"), int(2_000_000, Some("m")));
        assert_eq!(c("2mb"), int(2 << 20, Some("mb")));
        assert_eq!(c("2mib"), int(2 << 20, Some("mib")));
        assert_eq!(c("3g"), int(3_000_000_000, Some("g")));
        assert_eq!(c("3gb"), int(3 << 30, Some("gb")));
        assert_eq!(c("1t"), int(1_000_000_000_000, Some("t")));
        assert_eq!(c("1tib"), int(1 << 40, Some("tib")));
        assert_eq!(c("1p"), int(1_000_000_000_000_000, Some("p")));
        assert_eq!(c("1e"), int(1_000_000_000_000_000_000, Some("e")));
        assert_eq!(c("1eib"), int(1 << 60, Some("eib")));
        assert_eq!(c("-5"), int(-5, None));
        assert_eq!(c("4222"), int(4222, None));
        // Not units: strings.
        assert_eq!(c("1kbb"), Bare::String("1kbb".into()));
        assert_eq!(c("10s"), Bare::String("10s".into()));
        assert_eq!(c("1m30s"), Bare::String("1m30s".into()));
        assert!(classify("10e", &Pos::default()).is_err()); // 10^19 overflows i64
        assert!(classify("99999999999999999999", &Pos::default()).is_err());
    }

    #[test]
    fn words() {
        for t in ["true", "TRUE", "Yes", "on", "ON"] {
            assert_eq!(c(t), Bare::Bool(true), "{t}");
        }
        for f in ["false", "No", "off", "OFF"] {
            assert_eq!(c(f), Bare::Bool(false), "{f}");
        }
        assert_eq!(c("1.5"), Bare::Float(1.5));
        assert_eq!(c("-0.25"), Bare::Float(-0.25));
        assert_eq!(c("127.0.0.1"), Bare::String("127.0.0.1".into()));
        assert_eq!(c("0.0.0.0:4222"), Bare::String("0.0.0.0:4222".into()));
        assert_eq!(
            c("2023-01-02T03:04:05Z"),
            Bare::DateTime("2023-01-02T03:04:05Z".into())
        );
        assert_eq!(c("$FOO"), Bare::Variable("FOO".into()));
        assert_eq!(c("$2a$11$abc"), Bare::String("$2a$11$abc".into()));
        assert_eq!(c("$2y$10$abc"), Bare::String("$2y$10$abc".into()));
        assert!(classify("$", &Pos::default()).is_err());
        assert_eq!(c("nats://a:b@h:1"), Bare::String("nats://a:b@h:1".into()));
        assert_eq!(c("abc#def"), Bare::String("abc#def".into()));
    }

    #[test]
    fn cursor_positions_and_strings() {
        let mut cur = Cursor::new("a\n  \"x\\ty\\x41\" 'r\\aw' (\nblock )\n)", None);
        assert_eq!(cur.bare_word(), "a");
        cur.skip_trivia();
        assert_eq!((cur.pos().line, cur.pos().col), (2, 3));
        assert_eq!(cur.dq_string().expect("dq"), "x\tyA");
        cur.skip_blanks();
        assert_eq!(cur.sq_string().expect("sq"), "r\\aw");
        cur.skip_blanks();
        assert_eq!(cur.block_string().expect("block"), "\nblock )\n");
        assert!(cur.at_eof());

        let mut cur = Cursor::new("\"abc", None);
        let e = cur.dq_string().expect_err("unterminated");
        assert_eq!((e.line, e.col), (1, 1));
        let mut cur = Cursor::new("x \"a\\qb\"", None);
        cur.bare_word();
        cur.skip_blanks();
        let e = cur.dq_string().expect_err("bad escape");
        assert_eq!((e.line, e.col), (1, 5));
        assert!(e.msg.contains("invalid escape 'q'"), "{}", e.msg);
    }
}
