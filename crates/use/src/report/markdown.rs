//! The report as markdown: for GitHub step summaries and release notes. The text is the
//! template `templates/report.md.j2`; [`super::view::View`] computes what it shows.

use super::Report;
use super::view::{RenderError, View, render as render_view};

pub fn render(r: &Report<'_>) -> Result<String, RenderError> {
    render_view("report.md", &View::of(r))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::bundle;

    /// Components × targets × machines, each cell with date, version, short key and the
    /// counts in `rocforge test`'s categories (the hung and crashed tests not among the failed).
    #[test]
    fn the_report_reads_as_a_grid() {
        let key = |c: char| c.to_string().repeat(64);
        let mixed = [
            ("S.pass", "passed", None),
            ("S.fail", "failed", Some("assertion")),
            ("S.hang", "hung", Some("hang")),
            ("S.segv", "crashed", Some("crash")),
            ("S.lib", "failed", Some("missing-library")),
            ("S.skip", "skipped", Some("skipped")),
        ];
        let passing = [("P.a", "passed", None), ("P.b", "passed", None)];
        // A machine whose container saw no /dev/kfd: nothing ran on a GPU.
        let no_gpu = [
            ("N.a", "no-gpu", Some("no-gpu")),
            ("N.b", "no-gpu", Some("no-gpu")),
        ];
        let bundles = vec![
            bundle(
                ("rocsparse", "3.4.0", &key('a')),
                "gfx90c",
                ("laptop", "gfx90c"),
                false,
                &mixed,
            ),
            bundle(
                ("rocsparse", "3.4.0", &key('b')),
                "gfx902",
                ("desk", "gfx902"),
                false,
                &passing,
            ),
            bundle(
                ("rocsparse", "3.4.0", &key('c')),
                "gfx900",
                ("laptop", "gfx90c"),
                true,
                &passing,
            ),
            bundle(
                ("rocprim", "3.4.1", &key('d')),
                "gfx90c",
                ("laptop", "gfx90c"),
                false,
                &passing,
            ),
            bundle(
                ("rocprim", "3.4.1", &key('d')),
                "gfx902",
                ("desk", "gfx902"),
                false,
                &no_gpu,
            ),
        ];
        let r = super::super::build(&bundles);
        assert_eq!(
            r.total.line(),
            "14 tests: 7 passed, 2 failed, 1 skipped, 1 hung, 1 crashed, 2 found no GPU"
        );
        let md = super::render(&r).unwrap();
        insta::assert_snapshot!(md);
    }

    /// A machine, version or test name from a bundle cannot steer the summary it lands in: no
    /// heading, link, image, HTML or extra table cell comes out of it, and a test name with
    /// backticks stays inside its code span. The snapshot shows what a reader sees.
    #[test]
    fn strings_from_bundles_are_escaped() {
        let key = "a".repeat(64);
        let bundles = vec![bundle(
            ("rocsparse", "1.0](http://evil.example)|x", &key),
            "gfx90c",
            (
                "\n# Owned\n![i](http://evil.example/p.png) [link](http://evil.example) <img src=x> *b* ~~s~~",
                "gfx90c",
            ),
            false,
            &[("T.`<b>`` x", "failed", Some("assertion"))],
        )];
        let r = super::super::build(&bundles);
        let md = super::render(&r).unwrap();
        for bad in ["\n# Owned", "![i]", "[link](", "<img", "*b*", "~~s~~"] {
            assert!(!md.contains(bad), "{bad} unescaped:\n{md}");
        }
        assert!(
            md.contains("\\# Owned \\!\\[i\\](http://evil.example/p.png)"),
            "{md}"
        );
        assert!(md.contains("1.0\\](http://evil.example)\\|x"), "{md}");
        assert!(md.contains("- ```T.`<b>`` x```: failed"), "{md}");
        insta::assert_snapshot!(md);
    }
}
