//! The NATS config language (nats-server's `conf` package): text in, a tree of positioned
//! `Value`s out. Owns the syntax — keys and separators, maps, arrays, comments, the string
//! forms, numbers with size units, booleans, dates, `include` and `$VARIABLES` — and nothing
//! about what keys mean: `config/file/` maps the tree onto `Options`.
//!
//! `lexer.rs` is the character cursor and the classification of bare words; `parser.rs` is the
//! recursive-descent grammar, variable scopes and includes. Every value and key carries the
//! file, line and column it came from, so later stages can name the place of an error.

mod lexer;
mod parser;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use parser::{parse_file, parse_str};

/// Deepest nesting of maps and arrays accepted (deeper input is refused, never a stack overflow).
pub const MAX_DEPTH: usize = 128;
/// Deepest chain of includes accepted.
pub const MAX_INCLUDE_DEPTH: usize = 32;

/// Where something is: file (if parsed from one), 1-based line, 1-based column (in characters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub file: Option<Arc<Path>>,
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}:{}:{}", p.display(), self.line, self.col),
            None => write!(f, "{}:{}", self.line, self.col),
        }
    }
}

/// A config error: where (when known) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: Option<PathBuf>,
    /// 1-based; 0 when the error has no position (e.g. a file that cannot be read).
    pub line: u32,
    pub col: u32,
    pub msg: String,
    /// A syntax error of the server's config file, shown as nats-server shows one:
    /// `Parse error on line N: '<msg>'`, then `(file:line:col)` (`ConfigError::parse_error`).
    pub parse: bool,
}

impl ConfigError {
    /// Mark a positioned error as a syntax error of the server's config file.
    pub fn parse_error(mut self) -> Self {
        self.parse = self.line > 0;
        self
    }

    /// An error at a position.
    pub fn at(pos: &Pos, msg: impl Into<String>) -> Self {
        ConfigError {
            file: pos.file.as_ref().map(|p| p.to_path_buf()),
            line: pos.line,
            col: pos.col,
            msg: msg.into(),
            parse: false,
        }
    }

    /// An error about a whole file (or none), without a line.
    pub fn whole(file: Option<&Path>, msg: impl Into<String>) -> Self {
        ConfigError {
            file: file.map(Path::to_path_buf),
            line: 0,
            col: 0,
            msg: msg.into(),
            parse: false,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parse {
            // nats-server's words first; where exactly after them.
            write!(f, "Parse error on line {}: '{}' (", self.line, self.msg)?;
            if let Some(p) = &self.file {
                write!(f, "{}:", p.display())?;
            }
            return write!(f, "{}:{})", self.line, self.col);
        }
        match (&self.file, self.line) {
            (Some(p), 0) => write!(f, "{}: {}", p.display(), self.msg),
            (Some(p), l) => write!(f, "{}:{}:{}: {}", p.display(), l, self.col, self.msg),
            (None, 0) => write!(f, "{}", self.msg),
            (None, l) => write!(f, "{}:{}: {}", l, self.col, self.msg),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A value and where it was written (for a variable reference: where `$NAME` was written).
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub kind: Kind,
    pub pos: Pos,
}

/// The value types of the language.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    String(String),
    /// An integer; `unit` is the size suffix it was written with (`"kb"`, `"Mi"` …), already
    /// applied to `value`.
    Integer {
        value: i64,
        unit: Option<String>,
    },
    Float(f64),
    Bool(bool),
    /// An ISO 8601 Zulu date-time (`2006-01-02T15:04:05Z`), kept as written.
    DateTime(String),
    Array(Vec<Value>),
    Map(Map),
}

impl Kind {
    /// The type's name for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kind::String(_) => "a string",
            Kind::Integer { .. } => "an integer",
            Kind::Float(_) => "a float",
            Kind::Bool(_) => "a boolean",
            Kind::DateTime(_) => "a date",
            Kind::Array(_) => "an array",
            Kind::Map(_) => "a map",
        }
    }
}

/// One `key: value` of a map.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The key as written (case preserved; variables are case-sensitive, options are not).
    pub key: String,
    pub key_pos: Pos,
    pub value: Value,
    /// True when `$key` was referenced: the entry is a variable definition, and nats-server
    /// does not report it as an unknown field.
    pub used_as_variable: bool,
}

/// A map in the order it was written. A key written twice keeps its last value (in the place
/// of the first), as nats-server's map does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Map {
    pub entries: Vec<Entry>,
}

impl Map {
    /// The entry with exactly this key.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// Insert, replacing the value of an existing entry with the same key.
    pub fn insert(&mut self, entry: Entry) {
        match self.entries.iter_mut().find(|e| e.key == entry.key) {
            Some(old) => {
                old.value = entry.value;
                old.key_pos = entry.key_pos;
                old.used_as_variable |= entry.used_as_variable;
            }
            None => self.entries.push(entry),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
