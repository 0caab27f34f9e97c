//! Checks of single values a recipe writes (names, paths, digests, URLs, versions), shared by
//! its sections.

use std::sync::Arc;

use crate::diag::reader::Sp;
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

pub(super) fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// A relative path that stays inside the tree it is relative to.
pub fn is_inner_path(p: &str) -> bool {
    path_problem(p).is_none()
}

/// What is wrong with a path that must stay inside its tree, in words for a caret label.
pub(super) fn path_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        Some("empty path")
    } else if p.starts_with('/') {
        Some("absolute path")
    } else if p.contains('\\') {
        Some("backslash; separate directories with /")
    } else if p.split('/').any(|c| c == "..") {
        Some("\"..\" leaves the tree")
    } else if p.split('/').any(|c| c.is_empty() || c == ".") {
        Some("empty or \".\" path component")
    } else {
        None
    }
}

/// What is wrong with a hex digest or commit ID, in words for a caret label.
pub(super) fn hex_problem(s: &str, len: usize) -> String {
    if s.len() != len {
        format!(
            "expected {len} hex digits, found {} characters",
            s.chars().count()
        )
    } else if s.chars().all(|c| c.is_ascii_hexdigit()) {
        "uppercase hex digits; write them in lowercase".to_string()
    } else {
        "contains characters that are not hex digits".to_string()
    }
}

pub(super) fn check_url(file: &Arc<SourceFile>, url: &Sp<String>, d: &mut Diagnostics) {
    let ok = ["https://", "http://", "file://", "git://", "ssh://"]
        .iter()
        .any(|p| url.starts_with(p) && url.len() > p.len());
    if !ok || url.chars().any(char::is_whitespace) {
        d.push(
            Diagnostic::new(format!("malformed URL \"{}\"", url.value))
                .at(
                    file,
                    url.span.clone(),
                    "expected https://, http://, file://, git:// or ssh://",
                )
                .hint("write the full URL, e.g. \"https://github.com/ROCm/rocSPARSE.git\""),
        );
    }
}

/// Versions end up in file names (tarballs, store listings): no separators, no `..`.
pub(super) fn check_version(file: &Arc<SourceFile>, v: &Sp<String>, d: &mut Diagnostics) {
    if !is_version(v) {
        d.push(
            Diagnostic::new(format!("invalid version \"{}\"", v.value))
                .at(
                    file,
                    v.span.clone(),
                    "empty, or has characters other than letters, digits and . _ + ~ -",
                )
                .hint("write the upstream version, e.g. version = \"3.4.0\""),
        );
    }
}

fn is_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && !v.contains("..")
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c))
}
