//! Diagnostics for things a user wrote: recipes, release files, the target table, flags.
//!
//! A diagnostic carries its own copy of the source text so it can be rendered long after the
//! loader that produced it is gone, and so the binary alone decides how it is printed.
//! [`reader`] reads TOML keeping every value's span, so each problem points at its text.

pub mod error;
pub mod reader;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};

/// An error that says what the user can do about it. Each error type keeps its hint beside
/// its variants; `?` turns one into the application's error with both ([`error::Error`]).
pub trait Hint: fmt::Display {
    fn hint(&self) -> String;
}

/// A file as the user knows it: the path to show and the text that was read.
#[derive(Debug)]
pub struct SourceFile {
    pub display: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(display: impl Into<String>, text: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            display: display.into(),
            text: text.into(),
        })
    }

    /// 1-based line and column of a byte offset (columns count characters, as editors do).
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

/// The largest char boundary of `s` at or below `i` (`str::floor_char_boundary`, not stable
/// at the crate's minimum Rust): where text from outside may be cut without a panic.
pub fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where a diagnostic points: a span of a file, a whole file, or nothing (flags, environment).
#[derive(Debug, Clone)]
pub struct Location {
    pub file: Arc<SourceFile>,
    pub span: Option<Range<usize>>,
}

#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub message: String,
    pub location: Option<Location>,
    /// What the caret line says under the offending text. Boxed: it is never grown, and the
    /// saved word keeps `Result<_, Diagnostic>` under clippy's large-error limit.
    pub label: Box<str>,
    /// Other places that explain this one (e.g. the first definition of a duplicate).
    pub related: Vec<(Location, String)>,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            location: None,
            label: Box::default(),
            related: Vec::new(),
            hint: None,
        }
    }

    pub fn at(
        mut self,
        file: &Arc<SourceFile>,
        span: Range<usize>,
        label: impl Into<String>,
    ) -> Self {
        self.location = Some(Location {
            file: file.clone(),
            span: Some(span),
        });
        self.label = label.into().into_boxed_str();
        self
    }

    pub fn in_file(mut self, file: &Arc<SourceFile>) -> Self {
        self.location = Some(Location {
            file: file.clone(),
            span: None,
        });
        self
    }

    pub fn related(
        mut self,
        file: &Arc<SourceFile>,
        span: Range<usize>,
        label: impl Into<String>,
    ) -> Self {
        self.related.push((
            Location {
                file: file.clone(),
                span: Some(span),
            },
            label.into(),
        ));
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn maybe_hint(mut self, hint: Option<String>) -> Self {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }

    /// `path:line:col` of the primary location, for one-line summaries and JSON output.
    pub fn position(&self) -> Option<String> {
        let loc = self.location.as_ref()?;
        Some(match &loc.span {
            Some(span) => {
                let (line, col) = loc.file.line_col(span.start);
                format!("{}:{line}:{col}", loc.file.display)
            }
            None => loc.file.display.clone(),
        })
    }

    /// Renders with source excerpts and carets; `color` only for terminals.
    pub fn render(&self, color: bool) -> String {
        let renderer = if color {
            Renderer::styled()
        } else {
            Renderer::plain()
        };
        if self.location.is_none() {
            // No source to excerpt: a snippet frame would hold nothing but its border.
            let mut out = renderer.render(&[Group::with_title(
                Level::ERROR.primary_title(self.message.as_str()),
            )]);
            if let Some(hint) = &self.hint {
                out += &format!("\n  = help: {hint}");
            }
            return out;
        }
        let mut group = Group::with_title(Level::ERROR.primary_title(self.message.as_str()));
        if let Some(loc) = &self.location {
            group = match loc.span {
                Some(_) => group.element(snippet(loc, AnnotationKind::Primary, &self.label)),
                None => group.element(Origin::path(loc.file.display.as_str())),
            };
        }
        for (loc, label) in &self.related {
            group = group.element(snippet(loc, AnnotationKind::Context, label));
        }
        if let Some(hint) = &self.hint {
            group = group.element(Level::HELP.message(hint.as_str()));
        }
        renderer.render(&[group])
    }
}

fn snippet<'a>(
    loc: &'a Location,
    kind: AnnotationKind,
    label: &'a str,
) -> Snippet<'a, annotate_snippets::Annotation<'a>> {
    let text = loc.file.text.as_str();
    let mut snippet = Snippet::source(text)
        .path(loc.file.display.as_str())
        .fold(true);
    let span = loc.span.clone().map(|s| clamp(text, s)).unwrap_or(0..0);
    let mut annotation = kind.span(span);
    if !label.is_empty() {
        annotation = annotation.label(label);
    }
    snippet = snippet.annotation(annotation);
    snippet
}

fn clamp(text: &str, span: Range<usize>) -> Range<usize> {
    let start = floor_char_boundary(text, span.start.min(text.len()));
    let end = floor_char_boundary(text, span.end.min(text.len())).max(start);
    start..end
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position() {
            Some(pos) => write!(f, "{pos}: {}", self.message)?,
            None => write!(f, "{}", self.message)?,
        }
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// A bag of problems found in one pass; loaders keep going and report them all.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Orders the diagnostics from `start` on by where they point, so the problems of one file
    /// read top to bottom even though checks run table by table (stable: ties keep their order).
    pub fn sort_from(&mut self, start: usize) {
        if start < self.0.len() {
            self.0[start..].sort_by_key(|d| {
                d.location
                    .as_ref()
                    .and_then(|l| l.span.as_ref())
                    .map_or(0, |s| s.start)
            });
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// The closest candidate, if it is close enough to be what the user meant.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(&word.to_ascii_lowercase(), &c.to_ascii_lowercase());
        if score >= 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(word, candidates).map(|c| format!("did you mean \"{c}\"?"))
}

#[cfg(test)]
mod tests {
    use super::floor_char_boundary;

    /// Text from outside is cut where a character ends, never inside one (`&s[..300]` on a
    /// test name printed by a client panicked: "byte index 300 is not a char boundary").
    #[test]
    fn text_is_cut_where_a_character_ends() {
        let s = format!("{}é", "a".repeat(299));
        assert!(!s.is_char_boundary(300));
        assert_eq!(floor_char_boundary(&s, 300), 299);
        assert_eq!(floor_char_boundary(&s, 301), 301);
        assert_eq!(floor_char_boundary(&s, 10_000), s.len());
        assert_eq!(floor_char_boundary("", 3), 0);
    }
}
