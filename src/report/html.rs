//! The report as one static HTML page: inline CSS, an inline SVG chart, no external assets.
//! The page is the template `templates/report.html.j2`, every value HTML-escaped;
//! [`super::view::View`] computes what it shows.

use super::Report;
use super::view::{RenderError, View, render as render_view};

pub use super::view::esc;

pub fn render(r: &Report<'_>) -> Result<String, RenderError> {
    render_view("report.html", &View::of(r))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::bundle;

    /// Bundles are other machines' files: a component, version, machine or test name holding
    /// markup shows as text, in every table and in the failing tests.
    #[test]
    fn names_from_bundles_are_escaped() {
        // A content key is 64 hex digits, checked where a bundle is read: no markup there.
        let key = "a".repeat(64);
        let bundles = vec![bundle(
            ("<script>alert(1)</script>", "1.0\"><script>", &key),
            "gfx90c",
            ("<img src=x onerror=alert(1)>", "gfx90c"),
            false,
            &[("T.<script>x</script>", "failed", Some("assertion"))],
        )];
        let r = super::super::build(&bundles);
        let html = super::render(&r).unwrap();
        for bad in ["<script", "<img"] {
            assert!(!html.contains(bad), "{bad} unescaped:\n{html}");
        }
        assert!(
            html.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(
            html.contains("<td>T.&lt;script&gt;x&lt;/script&gt;</td>"),
            "{html}"
        );
        // The page's own markup is not escaped.
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    }
}
