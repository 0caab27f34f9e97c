//! Typed, span-keeping reads from a parsed TOML table.
//!
//! serde stops at the first problem in a file; a recipe author wants every problem at once, each
//! pointing at the text that caused it. This reader records what it was asked for, reports wrong
//! types as it goes and unknown keys at the end, and never gives up on the rest of the table.

use std::collections::BTreeMap;
use std::ops::{Deref, Range};
use std::sync::Arc;

use serde::Serialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, Diagnostics, SourceFile, suggest};

/// A value with the byte span it was read from. Serializes as the bare value, so resolved
/// recipes can be hashed without their positions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sp<T> {
    pub value: T,
    pub span: Range<usize>,
}

impl<T> Sp<T> {
    pub fn new(value: T, span: Range<usize>) -> Self {
        Self { value, span }
    }
}

impl<T> Deref for Sp<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Serialize> Serialize for Sp<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

/// Parses TOML text, reporting every syntax error with its position.
pub fn parse<'i>(
    file: &'i Arc<SourceFile>,
    diags: &mut Diagnostics,
) -> Option<Spanned<DeTable<'i>>> {
    let (table, errors) = DeTable::parse_recoverable(&file.text);
    if errors.is_empty() {
        return Some(table);
    }
    let mut errors = errors;
    // The parser recovers out of order (an unclosed table header can be found after an
    // unclosed string above it); a reader expects the list top to bottom.
    errors.sort_by_key(|e| e.span().map_or(0, |s| s.start));
    for e in errors {
        let message = e.message().trim().replace('\n', "; ");
        let span = e.span().unwrap_or(0..0);
        let (label, hint) = syntax_help(&message);
        diags.push(
            Diagnostic::new(format!("invalid TOML: {message}"))
                .at(file, span, label)
                .hint(hint),
        );
    }
    None
}

/// The parser's messages say what it expected; these say what to write instead.
fn syntax_help(message: &str) -> (&'static str, &'static str) {
    // First match wins: "string values must be quoted, expected literal string" is about quoting.
    const HELP: &[(&str, &str, &str)] = &[
        (
            "duplicate key",
            "defined again here",
            "a key can appear once per table; delete or rename one of them",
        ),
        (
            "unclosed table",
            "header not closed",
            "close the table header: [name]",
        ),
        (
            "invalid table header",
            "malformed header",
            "table headers are [name] or [name.sub] on a line of their own",
        ),
        (
            "must be quoted",
            "not a valid value",
            "quote strings: key = \"...\"; numbers, true/false, [arrays] and {tables} are bare",
        ),
        (
            "basic string",
            "string not closed",
            "close the string with \" on the same line; use \"\"\" for text over several lines",
        ),
        (
            "literal string",
            "string not closed",
            "close the string with ' on the same line",
        ),
        (
            "keys cannot be empty",
            "key expected here",
            "write key = value; in a dotted name (a.b) each dot needs a key on both sides",
        ),
        (
            "key with no value",
            "no = after the key",
            "write key = value",
        ),
        (
            "unclosed array",
            "array not closed",
            "close the array with ]; it may span several lines",
        ),
        (
            "array",
            "in this array",
            "arrays are [\"a\", \"b\"], with commas between items",
        ),
        (
            "expected newline",
            "expected the end of the line",
            "one key = value or [table] per line",
        ),
    ];
    HELP.iter()
        .find(|(needle, _, _)| message.contains(needle))
        .map_or(
            (
                "here",
                "see https://toml.io for the syntax; strings need double quotes, tables are [name]",
            ),
            |(_, l, h)| (*l, *h),
        )
}

pub fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// One table being read. `path` is how the table is named in messages (`[source]`, `the recipe`).
pub struct TableReader<'a, 'i> {
    file: &'a Arc<SourceFile>,
    table: &'a DeTable<'i>,
    span: Range<usize>,
    path: String,
    known: Vec<&'static str>,
    /// Required keys reported missing, with the index of their diagnostic: a misspelt key
    /// found by `finish` replaces the "missing" report instead of adding a second one.
    missing: Vec<(&'static str, usize)>,
}

impl<'a, 'i> TableReader<'a, 'i> {
    pub fn new(
        file: &'a Arc<SourceFile>,
        table: &'a Spanned<DeTable<'i>>,
        path: impl Into<String>,
    ) -> Self {
        Self::with_span(file, table.get_ref(), table.span(), path)
    }

    pub fn with_span(
        file: &'a Arc<SourceFile>,
        table: &'a DeTable<'i>,
        span: Range<usize>,
        path: impl Into<String>,
    ) -> Self {
        Self {
            file,
            table,
            span,
            path: path.into(),
            known: Vec::new(),
            missing: Vec::new(),
        }
    }

    pub fn file(&self) -> &'a Arc<SourceFile> {
        self.file
    }

    pub fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The dotted name of a key in this table, for messages (`build.args`).
    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.path, key)
        }
    }

    fn get(
        &mut self,
        key: &'static str,
    ) -> Option<(
        &'a Spanned<toml::de::DeString<'i>>,
        &'a Spanned<DeValue<'i>>,
    )> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        self.table.get_key_value(key)
    }

    fn wrong_type(
        &self,
        d: &mut Diagnostics,
        key: &str,
        v: &Spanned<DeValue<'_>>,
        expected: &str,
        hint: Option<String>,
    ) {
        d.push(
            Diagnostic::new(format!(
                "wrong type for \"{}\": expected {expected}, found {}",
                self.key_path(key),
                type_name(v.get_ref())
            ))
            .at(self.file, v.span(), format!("expected {expected}"))
            .maybe_hint(hint),
        );
    }

    pub fn missing(&mut self, d: &mut Diagnostics, key: &'static str, hint: &str) {
        let diag = if self.path.is_empty() {
            // The top level has no header to point at; its first key shows where keys go.
            let first = self
                .table
                .iter()
                .map(|(k, _)| k.span())
                .min_by_key(|s| s.start)
                .unwrap_or(0..0);
            Diagnostic::new(format!("missing required key \"{key}\"")).at(
                self.file,
                first,
                format!("no \"{key}\" in this file"),
            )
        } else if self.span.is_empty() {
            Diagnostic::new(format!("missing required key \"{key}\" in [{}]", self.path))
                .in_file(self.file)
        } else {
            Diagnostic::new(format!("missing required key \"{key}\" in [{}]", self.path)).at(
                self.file,
                self.span.clone(),
                format!("\"{key}\" belongs in this table"),
            )
        };
        self.missing.push((key, d.len()));
        d.push(diag.hint(hint.to_string()));
    }

    pub fn opt_str(&mut self, key: &'static str, d: &mut Diagnostics) -> Option<Sp<String>> {
        let (_, v) = self.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(Sp::new(s.to_string(), inner(v.span()))),
            DeValue::Array(_) => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "a string",
                    Some(format!("\"{key}\" takes one value, not a list")),
                );
                None
            }
            _ => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "a string",
                    Some("quote the value: \"...\"".into()),
                );
                None
            }
        }
    }

    pub fn str(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
        hint: &str,
    ) -> Option<Sp<String>> {
        if self.table.contains_key(key) {
            self.opt_str(key, d)
        } else {
            self.known.push(key);
            self.missing(d, key, hint);
            None
        }
    }

    pub fn opt_bool(&mut self, key: &'static str, d: &mut Diagnostics) -> Option<Sp<bool>> {
        let (_, v) = self.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Sp::new(*b, v.span())),
            _ => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "a boolean",
                    Some("write true or false, without quotes".into()),
                );
                None
            }
        }
    }

    pub fn opt_int(&mut self, key: &'static str, d: &mut Diagnostics) -> Option<Sp<i64>> {
        let (_, v) = self.get(key)?;
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(Sp::new(n, v.span())),
                Err(_) => {
                    self.wrong_type(d, key, v, "an integer that fits in 64 bits", None);
                    None
                }
            },
            _ => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "an integer",
                    Some("write a whole number without quotes, e.g. 4".into()),
                );
                None
            }
        }
    }

    /// A number that may be written as an integer or a float (`hours = 2` or `hours = 1.5`).
    pub fn opt_number(&mut self, key: &'static str, d: &mut Diagnostics) -> Option<Sp<f64>> {
        let (_, v) = self.get(key)?;
        let parsed = match v.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        };
        match parsed {
            Some(n) if n.is_finite() => Some(Sp::new(n, v.span())),
            _ => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "a number",
                    Some("write a number without quotes, e.g. 1.5".into()),
                );
                None
            }
        }
    }

    /// An array of strings; a bare string gets a hint to wrap it in brackets.
    pub fn opt_str_list(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
    ) -> Option<Vec<Sp<String>>> {
        let (_, v) = self.get(key)?;
        read_str_list(self.file, &self.key_path(key), v, d)
    }

    pub fn opt_table(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
    ) -> Option<TableReader<'a, 'i>> {
        let (_, v) = self.get(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(TableReader {
                file: self.file,
                table: t,
                span: v.span(),
                path: self.key_path(key),
                known: Vec::new(),
                missing: Vec::new(),
            }),
            _ => {
                self.wrong_type(
                    d,
                    key,
                    v,
                    "a table",
                    Some(format!("write it as a [{}] section", self.key_path(key))),
                );
                None
            }
        }
    }

    /// An array of tables (`[[inputs]]`), each read by its own reader.
    pub fn opt_table_array(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
    ) -> Option<Vec<TableReader<'a, 'i>>> {
        let (_, v) = self.get(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(
                d,
                key,
                v,
                "an array of tables",
                Some(format!(
                    "write each entry as a [[{}]] section",
                    self.key_path(key)
                )),
            );
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.get_ref() {
                DeValue::Table(t) => out.push(TableReader {
                    file: self.file,
                    table: t,
                    span: item.span(),
                    path: format!("{}[{i}]", self.key_path(key)),
                    known: Vec::new(),
                    missing: Vec::new(),
                }),
                other => d.push(
                    Diagnostic::new(format!(
                        "wrong type in \"{}\": expected a table, found {}",
                        self.key_path(key),
                        type_name(other)
                    ))
                    .at(self.file, item.span(), "expected a table")
                    .hint(format!(
                        "write each entry as a [[{}]] section",
                        self.key_path(key)
                    )),
                ),
            }
        }
        Some(out)
    }

    /// A list of two-string pairs (`replace = [["gfx900", "{arch}"]]`).
    pub fn opt_pair_list(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
    ) -> Option<Vec<(Sp<String>, Sp<String>)>> {
        let (_, v) = self.get(key)?;
        let path = self.key_path(key);
        let bad = |d: &mut Diagnostics, span: Range<usize>| {
            d.push(
                Diagnostic::new(format!(
                    "wrong type for \"{path}\": expected a list of [from, to] string pairs"
                ))
                .at(self.file, span, "expected [\"from\", \"to\"]")
                .hint(format!("e.g. {key} = [[\"vega10\", \"{{codename}}\"]]")),
            );
        };
        let DeValue::Array(items) = v.get_ref() else {
            bad(d, v.span());
            return None;
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let pair = match item.get_ref() {
                DeValue::Array(p) if p.len() == 2 => match (p[0].get_ref(), p[1].get_ref()) {
                    (DeValue::String(a), DeValue::String(b)) => Some((
                        Sp::new(a.to_string(), inner(p[0].span())),
                        Sp::new(b.to_string(), inner(p[1].span())),
                    )),
                    _ => None,
                },
                _ => None,
            };
            match pair {
                Some(p) => out.push(p),
                None => bad(d, item.span()),
            }
        }
        Some(out)
    }

    /// A table of string values (`env = { CC = "clang" }`).
    pub fn opt_str_map(
        &mut self,
        key: &'static str,
        d: &mut Diagnostics,
    ) -> Option<BTreeMap<String, Sp<String>>> {
        let mut t = self.opt_table(key, d)?;
        let mut out = BTreeMap::new();
        for (k, v) in t.rest() {
            match v.get_ref() {
                DeValue::String(s) => {
                    out.insert(
                        k.get_ref().to_string(),
                        Sp::new(s.to_string(), inner(v.span())),
                    );
                }
                _ => t.wrong_type(
                    d,
                    k.get_ref(),
                    v,
                    "a string",
                    Some("quote the value: \"...\"".into()),
                ),
            }
        }
        Some(out)
    }

    /// Entries not claimed by name, for tables whose keys are data (per-arch lists).
    /// Claims them all, so `finish` will not call them unknown.
    pub fn rest(
        &mut self,
    ) -> Vec<(
        &'a Spanned<toml::de::DeString<'i>>,
        &'a Spanned<DeValue<'i>>,
    )> {
        let out: Vec<_> = self
            .table
            .iter()
            .filter(|(k, _)| !self.known.contains(&k.get_ref().as_ref()))
            .collect();
        self.known.clear();
        self.known.push("\0all");
        out
    }

    /// Reports every key that nothing asked for, suggesting the nearest known one. Returns the
    /// known keys it suggested, so callers can skip checks that the misspelling already explains
    /// (`commit = "…"` makes "no tag or rev" noise).
    pub fn finish(self, d: &mut Diagnostics) -> Vec<&'static str> {
        let mut suggested = Vec::new();
        if self.known.contains(&"\0all") {
            return suggested;
        }
        let mut replaced = Vec::new();
        for (k, _) in self.table.iter() {
            let name = k.get_ref().as_ref();
            if self.known.contains(&name) {
                continue;
            }
            let meant =
                synonym(name, &self.known).or_else(|| suggest(name, self.known.iter().copied()));
            let hint = match meant {
                Some(m) => format!("did you mean \"{m}\"?"),
                None if name == "branch" && self.known.contains(&"tag") => {
                    "a branch moves; pin a tag = \"…\" or a rev = \"<40 hex digits>\"".to_string()
                }
                None => {
                    let mut keys: Vec<&str> = self.known.clone();
                    keys.sort_unstable();
                    format!("the keys allowed here are: {}", keys.join(", "))
                }
            };
            if name == "branch" && meant.is_none() && self.known.contains(&"tag") {
                suggested.push("tag"); // it stands in for the ref, which is then not "missing"
            }
            if let Some(m) = meant {
                suggested.push(m);
                if let Some((_, i)) = self.missing.iter().find(|(key, _)| *key == m) {
                    replaced.push(*i);
                }
            }
            let place = if self.path.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in [{}]", self.path)
            };
            d.push(
                Diagnostic::new(format!("unknown key \"{name}\" {place}"))
                    .at(self.file, k.span(), "unknown key")
                    .hint(hint),
            );
        }
        // The misspelt key is the better report: it points at the text to fix.
        replaced.sort_unstable();
        replaced.dedup();
        for i in replaced.into_iter().rev() {
            d.0.remove(i);
        }
        suggested
    }
}

/// Names people reach for from other tools, which no edit distance would relate to ours.
fn synonym<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    const SYNONYMS: &[(&str, &str)] = &[
        ("commit", "rev"),
        ("revision", "rev"),
        ("sha", "rev"),
        ("checksum", "sha256"),
        ("digest", "sha256"),
        ("repo", "git"),
        ("repository", "git"),
        ("ram", "memory"),
        ("mem", "memory"),
        ("dependencies", "depends"),
        ("deps", "depends"),
        ("requires", "depends"),
        ("build-dependencies", "build-depends"),
        ("build-requires", "build-depends"),
        ("makedepends", "build-depends"),
        ("cmake-args", "args"),
        ("flags", "args"),
        ("targets", "arch-vars"),
    ];
    let lower = name.to_ascii_lowercase();
    SYNONYMS
        .iter()
        .find(|(from, to)| *from == lower && known.contains(to))
        .and_then(|(_, to)| known.iter().copied().find(|k| k == to))
}

pub fn read_str_list(
    file: &Arc<SourceFile>,
    path: &str,
    v: &Spanned<DeValue<'_>>,
    d: &mut Diagnostics,
) -> Option<Vec<Sp<String>>> {
    match v.get_ref() {
        DeValue::Array(items) => {
            let mut out = Vec::new();
            let mut ok = true;
            for item in items.iter() {
                match item.get_ref() {
                    DeValue::String(s) => out.push(Sp::new(s.to_string(), inner(item.span()))),
                    other => {
                        ok = false;
                        d.push(
                            Diagnostic::new(format!(
                                "wrong type in \"{path}\": expected a string, found {}",
                                type_name(other)
                            ))
                            .at(file, item.span(), "expected a string")
                            .hint("every entry of this list is a quoted string"),
                        );
                    }
                }
            }
            ok.then_some(out)
        }
        DeValue::String(s) => {
            d.push(
                Diagnostic::new(format!(
                    "wrong type for \"{path}\": expected an array of strings, found a string"
                ))
                .at(file, v.span(), "expected an array of strings")
                .hint(format!(
                    "wrap it in brackets: {path} = [\"{s}\"]",
                    path = path.rsplit('.').next().unwrap_or(path)
                )),
            );
            None
        }
        other => {
            d.push(
                Diagnostic::new(format!(
                    "wrong type for \"{path}\": expected an array of strings, found {}",
                    type_name(other)
                ))
                .at(file, v.span(), "expected an array of strings")
                .hint("write a list of quoted strings: [\"a\", \"b\"]"),
            );
            None
        }
    }
}

/// The span of a string's contents, without its quotes, so carets sit under the text itself.
fn inner(span: Range<usize>) -> Range<usize> {
    if span.end >= span.start + 2 {
        span.start + 1..span.end - 1
    } else {
        span
    }
}
