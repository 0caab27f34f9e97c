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

    /// Bundles are other machines' files: a machine, version or test name holding markup
    /// shows as text, in every table and in the failing tests. (Component names and content
    /// keys are checked where a bundle is read; the machine is whatever `--machine` said.)
    #[test]
    fn names_from_bundles_are_escaped() {
        let key = "a".repeat(64);
        let bundles = vec![bundle(
            ("rocsparse", "1.0\"><script>", &key),
            "gfx90c",
            (
                "<script>alert(1)</script><img src=x onerror=alert(1)>",
                "gfx90c",
            ),
            false,
            &[("T.<script>x</script>", "failed", Some("assertion"))],
        )];
        let r = super::super::build(&bundles);
        let html = super::render(&r).unwrap();
        for bad in ["<script", "<img"] {
            assert!(!html.contains(bad), "{bad} unescaped:\n{html}");
        }
        let machine = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;";
        for shown in [
            format!("<td>{machine}</td>"),
            format!("<th>gfx90c on {machine}</th>"),
            format!("rocsparse gfx90c on {machine} ("),
        ] {
            assert!(html.contains(&shown), "{shown} not in:\n{html}");
        }
        assert!(
            html.contains("<td>T.&lt;script&gt;x&lt;/script&gt;</td>"),
            "{html}"
        );
        // The page's own markup is not escaped.
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    }
}
