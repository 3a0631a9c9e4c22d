//! The grammar of the config language over `lexer::Cursor`: a file is the body of a map;
//! `key [=|:] value` entries end at a new line, `,` or `;`; values are maps, arrays, strings
//! and the bare words `lexer::classify` recognises. Variables (`$NAME`) resolve while parsing,
//! in the maps being built from the innermost outward, then in the environment (whose value
//! is parsed as a value, so `PORT=4222` is an integer). `include FILE` parses FILE on its own
//! (it sees no variables of the includer) and merges its keys into the current map.
//!
//! Bounded: nesting deeper than `MAX_DEPTH`, includes deeper than `MAX_INCLUDE_DEPTH` or in a
//! cycle, and variables that refer to themselves through the environment are errors.

use super::lexer::{classify, ends_bare, Bare, Cursor};
use super::{ConfigError, Entry, Kind, Map, Pos, Value, MAX_DEPTH, MAX_INCLUDE_DEPTH};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// State shared by a file and everything it includes.
#[derive(Default)]
struct Ctx {
    /// Canonical paths of the files being parsed, outermost first.
    include_stack: Vec<PathBuf>,
    /// Environment variables being resolved (to refuse self-reference).
    env_stack: Vec<String>,
    /// Values copied by variable references so far (bounded by [`MAX_COPIED`]).
    copied: usize,
}

/// How many values variable references may copy in one parse. A reference copies what it
/// names, so references to maps that hold references double at every level: a few KB of
/// config could otherwise ask for gigabytes (found by the `config_parser` fuzz target). Real
/// configs copy a few thousand values at most.
const MAX_COPIED: usize = 100_000;

/// The number of values in `v` (itself included), counting no further than `limit`.
fn count_values(v: &Value, limit: usize) -> usize {
    let mut n = 1;
    match &v.kind {
        Kind::Array(items) => {
            for i in items {
                if n > limit {
                    break;
                }
                n += count_values(i, limit - n);
            }
        }
        Kind::Map(m) => {
            for e in &m.entries {
                if n > limit {
                    break;
                }
                n += count_values(&e.value, limit - n);
            }
        }
        _ => {}
    }
    n
}

struct Parser<'a, 'c> {
    cur: Cursor<'a>,
    /// Directory includes are relative to.
    dir: PathBuf,
    /// The maps being built, outermost first: the scopes of variable lookup.
    scopes: Vec<Map>,
    depth: usize,
    ctx: &'c mut Ctx,
}

/// Parse config text that did not come from a file; includes are relative to the current
/// directory.
pub fn parse_str(src: &str) -> Result<Map, ConfigError> {
    let mut ctx = Ctx::default();
    let mut p = Parser {
        cur: Cursor::new(src, None),
        dir: PathBuf::from("."),
        scopes: Vec::new(),
        depth: 0,
        ctx: &mut ctx,
    };
    p.parse_top()
}

/// Parse a config file (and what it includes).
pub fn parse_file(path: &Path) -> Result<Map, ConfigError> {
    let mut ctx = Ctx::default();
    parse_file_in(path, &mut ctx)
}

fn parse_file_in(path: &Path, ctx: &mut Ctx) -> Result<Map, ConfigError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::whole(Some(path), format!("cannot read config file: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let last_line = good.rsplit(|b| *b == b'\n').next().unwrap_or(good);
        let col = String::from_utf8_lossy(last_line).chars().count() as u32 + 1;
        ConfigError {
            file: Some(path.to_path_buf()),
            line,
            col,
            msg: "the file is not UTF-8 text".into(),
            parse: false,
        }
    })?;
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    ctx.include_stack.push(canon);
    let result = {
        let mut p = Parser {
            cur: Cursor::new(text, Some(Arc::from(path))),
            dir,
            scopes: Vec::new(),
            depth: 0,
            ctx: &mut *ctx,
        };
        p.parse_top()
    };
    ctx.include_stack.pop();
    result
}

fn shown(c: char) -> String {
    match c {
        '\n' => "a new line".into(),
        c => format!("'{c}'"),
    }
}

impl Parser<'_, '_> {
    /// A whole file: the entries of the top-level map, optionally wrapped in `{ … }`.
    fn parse_top(&mut self) -> Result<Map, ConfigError> {
        self.cur.skip_trivia();
        if self.cur.peek() == Some('{') {
            let open = self.cur.pos();
            self.cur.bump();
            let m = self.parse_body(Some(&open))?;
            self.cur.skip_trivia();
            if let Some(c) = self.cur.peek() {
                return Err(self.cur.err(format!(
                    "unexpected {} after the '}}' that closes the file's top-level map",
                    shown(c)
                )));
            }
            return Ok(m);
        }
        self.parse_body(None)
    }

    /// The entries of a map up to its `}` (`open` is where its `{` is) or, at the top, the end.
    fn parse_body(&mut self, open: Option<&Pos>) -> Result<Map, ConfigError> {
        self.enter()?;
        self.scopes.push(Map::default());
        let r = self.entries(open);
        let map = self.scopes.pop().unwrap_or_default();
        self.depth -= 1;
        r.map(|()| map)
    }

    fn enter(&mut self) -> Result<(), ConfigError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.cur.err(format!(
                "maps and arrays are nested too deeply (more than {MAX_DEPTH} levels)"
            )));
        }
        self.depth += 1;
        Ok(())
    }

    fn entries(&mut self, open: Option<&Pos>) -> Result<(), ConfigError> {
        loop {
            self.cur.skip_trivia();
            match self.cur.peek() {
                None => {
                    return match open {
                        Some(o) => Err(self.cur.err(format!(
                            "unexpected end of file: the map opened at line {} column {} is not \
                             closed with '}}'",
                            o.line, o.col
                        ))),
                        None => Ok(()),
                    }
                }
                Some('}') if open.is_some() => {
                    self.cur.bump();
                    return Ok(());
                }
                Some(c @ ('}' | ']' | ',' | ';' | '=' | ':' | '[' | '{' | ')')) => {
                    return Err(self
                        .cur
                        .err(format!("unexpected '{c}' where a key was expected")));
                }
                _ => {}
            }
            let key_pos = self.cur.pos();
            let quoted = matches!(self.cur.peek(), Some('"' | '\''));
            let key = if quoted {
                self.cur.quoted_key()?
            } else {
                self.cur.bare_key()
            };
            if !quoted && key.eq_ignore_ascii_case("include") && self.at_blank() {
                self.cur.skip_blanks();
                let target_pos = self.cur.pos();
                let target = self.cur.include_target()?;
                self.include(&target, &target_pos)?;
                self.value_end("include")?;
                continue;
            }
            self.cur.skip_space();
            match self.cur.peek() {
                Some('=' | ':') => {
                    self.cur.bump();
                    self.cur.skip_blanks();
                    if self.cur.at_comment() {
                        return Err(self
                            .cur
                            .err(format!("expected a value for {key:?}, found a comment")));
                    }
                }
                None => {
                    return Err(ConfigError::at(
                        &key_pos,
                        format!("key {key:?} has no value (unexpected end of file)"),
                    ))
                }
                _ => {}
            }
            let value = self.parse_value(&key)?;
            self.set(Entry {
                key: key.clone(),
                key_pos,
                value,
                used_as_variable: false,
            });
            self.value_end(&key)?;
        }
    }

    fn at_blank(&self) -> bool {
        matches!(self.cur.peek(), Some(' ' | '\t'))
    }

    fn set(&mut self, entry: Entry) {
        if let Some(m) = self.scopes.last_mut() {
            m.insert(entry);
        }
    }

    /// After a map value: blanks, then a comment, new line, `,`, `;`, `}` or the end.
    fn value_end(&mut self, key: &str) -> Result<(), ConfigError> {
        self.cur.skip_blanks();
        if self.cur.at_comment() {
            self.cur.skip_comment();
            return Ok(());
        }
        match self.cur.peek() {
            None | Some('}') => Ok(()),
            Some('\n' | ',' | ';') => {
                self.cur.bump();
                Ok(())
            }
            Some(c) => Err(self.cur.err(format!(
                "expected a new line, ',' or ';' after the value of {key:?}, found {}",
                shown(c)
            ))),
        }
    }

    fn parse_value(&mut self, key: &str) -> Result<Value, ConfigError> {
        let pos = self.cur.pos();
        let kind = match self.cur.peek() {
            None => {
                return Err(self.cur.err(format!(
                    "expected a value for {key:?}, found the end of the file"
                )))
            }
            Some('\n') => {
                return Err(self
                    .cur
                    .err(format!("expected a value for {key:?}, found a new line")))
            }
            Some('[') => self.parse_array(key, &pos)?,
            Some('{') => {
                self.cur.bump();
                Kind::Map(self.parse_body(Some(&pos))?)
            }
            Some('"') => Kind::String(self.cur.dq_string()?),
            Some('\'') => Kind::String(self.cur.sq_string()?),
            Some('(') => Kind::String(self.cur.block_string()?),
            Some(c) if ends_bare(c) => {
                return Err(self
                    .cur
                    .err(format!("expected a value for {key:?}, found {}", shown(c))))
            }
            Some(_) => {
                let word = self.cur.bare_word();
                match classify(word, &pos)? {
                    Bare::Bool(b) => Kind::Bool(b),
                    Bare::Integer { value, unit } => Kind::Integer { value, unit },
                    Bare::Float(f) => Kind::Float(f),
                    Bare::DateTime(d) => Kind::DateTime(d),
                    Bare::String(s) => Kind::String(s),
                    Bare::Variable(name) => return self.lookup(&name, &pos),
                }
            }
        };
        Ok(Value { kind, pos })
    }

    fn parse_array(&mut self, key: &str, open: &Pos) -> Result<Kind, ConfigError> {
        self.enter()?;
        self.cur.bump();
        let r = self.array_items(key, open);
        self.depth -= 1;
        r.map(Kind::Array)
    }

    fn array_items(&mut self, key: &str, open: &Pos) -> Result<Vec<Value>, ConfigError> {
        let mut items = Vec::new();
        loop {
            self.cur.skip_trivia();
            match self.cur.peek() {
                None => {
                    return Err(self.cur.err(format!(
                        "unexpected end of file: the array opened at line {} column {} is not \
                         closed with ']'",
                        open.line, open.col
                    )))
                }
                Some(']') => {
                    self.cur.bump();
                    return Ok(items);
                }
                Some(',') => return Err(self.cur.err("unexpected ',' in an array")),
                _ => {}
            }
            items.push(self.parse_value(key)?);
            self.cur.skip_blanks();
            if self.cur.at_comment() {
                self.cur.skip_comment();
            }
            match self.cur.peek() {
                Some(',' | '\n') => {
                    self.cur.bump();
                }
                Some(']') | None => {}
                Some(c) => {
                    return Err(self.cur.err(format!(
                        "expected ',', a new line or ']' after an array element, found {}",
                        shown(c)
                    )))
                }
            }
        }
    }

    /// `$name`: the maps being built from the innermost outward, then the environment.
    fn lookup(&mut self, name: &str, pos: &Pos) -> Result<Value, ConfigError> {
        for scope in self.scopes.iter_mut().rev() {
            if let Some(e) = scope.entries.iter_mut().find(|e| e.key == name) {
                e.used_as_variable = true;
                let left = MAX_COPIED.saturating_sub(self.ctx.copied);
                let n = count_values(&e.value, left);
                if n > left {
                    return Err(ConfigError::at(
                        pos,
                        format!(
                            "variable ${name}: references copy more than {MAX_COPIED} values \
                             in all (references to maps holding references grow at every level)"
                        ),
                    ));
                }
                self.ctx.copied += n;
                let mut v = e.value.clone();
                v.pos = pos.clone();
                return Ok(v);
            }
        }
        if self.ctx.env_stack.iter().any(|n| n == name) {
            return Err(ConfigError::at(
                pos,
                format!("variable ${name} refers to itself (through the environment)"),
            ));
        }
        let Ok(text) = std::env::var(name) else {
            return Err(ConfigError::at(
                pos,
                format!("variable reference for '{name}' can not be found"),
            ));
        };
        self.ctx.env_stack.push(name.to_string());
        let r = self.env_value(&text, pos);
        self.ctx.env_stack.pop();
        let mut v = r?;
        v.pos = pos.clone();
        Ok(v)
    }

    /// An environment variable's text parsed as a value; text that is not one value (e.g. it
    /// has spaces) stays a string. A reference to another variable must resolve.
    fn env_value(&mut self, text: &str, pos: &Pos) -> Result<Value, ConfigError> {
        let t = text.trim();
        if let Some(name) = t.strip_prefix('$') {
            if !name.is_empty() && !t.contains(ends_bare) {
                if let Bare::Variable(n) = classify(t, pos)? {
                    return self.lookup(&n, pos);
                }
            }
        }
        let mut sub = Parser {
            cur: Cursor::new(text, None),
            dir: self.dir.clone(),
            scopes: Vec::new(),
            depth: 0,
            ctx: &mut *self.ctx,
        };
        sub.cur.skip_blanks();
        let parsed = sub.parse_value("$ENV").and_then(|v| {
            sub.cur.skip_trivia();
            if sub.cur.at_eof() {
                Ok(v)
            } else {
                Err(sub.cur.err("more than one value"))
            }
        });
        Ok(parsed.unwrap_or_else(|_| Value {
            kind: Kind::String(text.to_string()),
            pos: pos.clone(),
        }))
    }

    /// `include target`: parse the file (relative to this file's directory) and merge its keys.
    fn include(&mut self, target: &str, pos: &Pos) -> Result<(), ConfigError> {
        if target.is_empty() {
            return Err(ConfigError::at(pos, "expected a file name after include"));
        }
        let path = {
            let t = Path::new(target);
            if t.is_absolute() {
                t.to_path_buf()
            } else {
                self.dir.join(t)
            }
        };
        let canon = std::fs::canonicalize(&path).map_err(|e| {
            ConfigError::at(
                pos,
                format!("cannot include {target:?} ({}): {e}", path.display()),
            )
        })?;
        if self.ctx.include_stack.contains(&canon) {
            return Err(ConfigError::at(
                pos,
                format!(
                    "include cycle: {target:?} ({}) is already being parsed",
                    path.display()
                ),
            ));
        }
        if self.ctx.include_stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(ConfigError::at(
                pos,
                format!("includes are nested too deeply (more than {MAX_INCLUDE_DEPTH} levels)"),
            ));
        }
        let map = parse_file_in(&path, self.ctx).map_err(|e| {
            if e.line == 0 {
                ConfigError::at(pos, format!("cannot include {target:?}: {}", e.msg))
            } else {
                e
            }
        })?;
        for e in map.entries {
            self.set(e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Map {
        match parse_str(s) {
            Ok(m) => m,
            Err(e) => panic!("parse {s:?}: {e}"),
        }
    }

    fn err(s: &str) -> ConfigError {
        match parse_str(s) {
            Ok(m) => panic!("expected an error for {s:?}, got {m:?}"),
            Err(e) => e,
        }
    }

    /// References to maps that hold references double at every level: 2^40 values from a
    /// few hundred bytes. Refused once more than `MAX_COPIED` values were copied (before, the
    /// parser tried to build them all: the fuzzer's 4 KB input took 6 s and 1 GB).
    #[test]
    fn exponential_variable_copies_are_refused() {
        let mut text = String::from("v0 = 1\n");
        for i in 1..=40 {
            text.push_str(&format!("v{i} {{ a: $v{}, b: $v{} }}\n", i - 1, i - 1));
        }
        let e = err(&text);
        assert!(
            e.msg.contains("references copy more than 100000 values"),
            "{e}"
        );
        // Below the bound the same shape parses: 2^12 values copied at the last level.
        let mut text = String::from("v0 = 1\n");
        for i in 1..=12 {
            text.push_str(&format!("v{i} {{ a: $v{}, b: $v{} }}\n", i - 1, i - 1));
        }
        let m = parse(&text);
        assert!(matches!(kind(&m, "v12"), Kind::Map(_)));
    }

    fn kind<'m>(m: &'m Map, k: &str) -> &'m Kind {
        match m.get(k) {
            Some(e) => &e.value.kind,
            None => panic!("no key {k} in {m:?}"),
        }
    }

    fn int(v: i64) -> Kind {
        Kind::Integer {
            value: v,
            unit: None,
        }
    }

    #[test]
    fn separators_and_terminators() {
        let m = parse("a: 1\nb = 2\nc 3\nd:4; e=5, f 6 # c\ng: 7 // c\n");
        for (k, v) in [
            ("a", 1),
            ("b", 2),
            ("c", 3),
            ("d", 4),
            ("e", 5),
            ("f", 6),
            ("g", 7),
        ] {
            assert_eq!(kind(&m, k), &int(v), "{k}");
        }
        let m = parse("{ port: 4222, debug: true }");
        assert_eq!(kind(&m, "port"), &int(4222));
        assert_eq!(kind(&m, "debug"), &Kind::Bool(true));
        let m = parse("\"quoted key\": 1\n'other': 2");
        assert_eq!(kind(&m, "quoted key"), &int(1));
        assert_eq!(kind(&m, "other"), &int(2));
    }

    #[test]
    fn maps_and_arrays() {
        let m =
            parse("a { b: 1, c { d: [1, 2,\n 3 # c\n // c\n ] } }\nx: [ {u: a}, {u: b}, ]\ny: []");
        let Kind::Map(a) = kind(&m, "a") else {
            panic!("a")
        };
        let Kind::Map(c) = kind(a, "c") else {
            panic!("c")
        };
        let Kind::Array(d) = kind(c, "d") else {
            panic!("d")
        };
        assert_eq!(d.len(), 3);
        assert_eq!(d[2].kind, int(3));
        assert_eq!((d[2].pos.line, d[2].pos.col), (2, 2));
        let Kind::Array(x) = kind(&m, "x") else {
            panic!("x")
        };
        assert!(matches!(&x[1].kind, Kind::Map(m) if m.get("u").is_some()));
        assert_eq!(kind(&m, "y"), &Kind::Array(vec![]));
        let m = parse("a = {\n  b = 1\n}\nc: {}\nd {\n}");
        assert!(matches!(kind(&m, "c"), Kind::Map(x) if x.is_empty()));
        assert!(matches!(kind(&m, "d"), Kind::Map(x) if x.is_empty()));
    }

    #[test]
    fn strings() {
        let m = parse(
            "a: bare\nb: \"dq \\\"x\\\" \\t\\x41\"\nc: 'sq \\n'\nd: (\nline1\n  line2 )\n)\ne: nats://u:p@h:1\n",
        );
        assert_eq!(kind(&m, "a"), &Kind::String("bare".into()));
        assert_eq!(kind(&m, "b"), &Kind::String("dq \"x\" \tA".into()));
        assert_eq!(kind(&m, "c"), &Kind::String("sq \\n".into()));
        assert_eq!(kind(&m, "d"), &Kind::String("\nline1\n  line2 )\n".into()));
        assert_eq!(kind(&m, "e"), &Kind::String("nats://u:p@h:1".into()));
    }

    #[test]
    fn duplicate_keys_keep_the_last() {
        let m = parse("a: 1\nb: 2\na: 3");
        assert_eq!(m.len(), 2);
        assert_eq!(kind(&m, "a"), &int(3));
    }

    #[test]
    fn variables_scope_and_environment() {
        let m = parse("x = 1\na { x = 2, y: $x }\nz: $x\nh: $2a$11$abc");
        let Kind::Map(a) = kind(&m, "a") else {
            panic!("a")
        };
        assert_eq!(kind(a, "y"), &int(2));
        assert_eq!(kind(&m, "z"), &int(1));
        assert_eq!(kind(&m, "h"), &Kind::String("$2a$11$abc".into()));
        assert!(m.get("x").is_some_and(|e| e.used_as_variable));
        // Variables are case-sensitive.
        let e = err("X = 1\np: $x_natsd_conf_nope");
        assert!(e.msg.contains("can not be found"), "{e}");
        assert_eq!((e.line, e.col), (2, 4));
        // Environment values are parsed as values.
        std::env::set_var("NATSD_CONF_TEST_PORT", "4333");
        std::env::set_var("NATSD_CONF_TEST_WORDS", "two words");
        std::env::set_var("NATSD_CONF_TEST_SELF", "$NATSD_CONF_TEST_SELF");
        let m = parse("p: $NATSD_CONF_TEST_PORT\nw: $NATSD_CONF_TEST_WORDS");
        assert_eq!(kind(&m, "p"), &int(4333));
        assert_eq!(kind(&m, "w"), &Kind::String("two words".into()));
        let e = err("p: $NATSD_CONF_TEST_SELF");
        assert!(e.msg.contains("refers to itself"), "{e}");
        // A variable defined in terms of itself is not defined yet.
        let e = err("natsd_conf_a = $natsd_conf_a");
        assert!(e.msg.contains("can not be found"), "{e}");
    }

    #[test]
    fn errors_have_positions() {
        let cases: &[(&str, u32, u32, &str)] = &[
            ("a: \"abc", 1, 4, "unterminated string"),
            ("a: 'abc", 1, 4, "unterminated string"),
            ("a: (\nabc\n", 1, 4, "unterminated block"),
            ("a {\n b: 1\n", 3, 1, "not closed with '}'"),
            ("a: [1, 2\n", 2, 1, "not closed with ']'"),
            ("a: [1,, 2]", 1, 7, "unexpected ','"),
            ("a: 1 2", 1, 6, "after the value of \"a\""),
            ("a:\n1", 1, 3, "found a new line"),
            ("a: \"x\\qy\"", 1, 6, "invalid escape"),
            ("a: $", 1, 4, "variable name"),
            ("a: 99999999999999999999", 1, 4, "out of range"),
            ("a: 1\n}", 2, 1, "unexpected '}'"),
            ("b", 1, 1, "has no value"),
            ("a: [1 2]", 1, 7, "after an array element"),
            ("{ a: 1 } b", 1, 10, "after the '}'"),
        ];
        for (src, line, col, msg) in cases {
            let e = err(src);
            assert_eq!((e.line, e.col), (*line, *col), "{src:?}: {e}");
            assert!(e.msg.contains(msg), "{src:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = "a: ".to_string() + &"[".repeat(10_000);
        let e = err(&deep);
        assert!(e.msg.contains("nested too deeply"), "{e}");
        let deep = "a ".to_string() + &"{ a ".repeat(10_000);
        let e = err(&deep);
        assert!(e.msg.contains("nested too deeply"), "{e}");
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet = b"ab1 :=\n{}[](),;#/\"'$\\.-kKx\t";
        for _ in 0..3000 {
            let len = (seed % 40) as usize;
            let mut s = String::new();
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                s.push(alphabet[(seed % alphabet.len() as u64) as usize] as char);
            }
            let _ = parse_str(&s);
        }
    }
}
