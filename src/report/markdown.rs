//! The report as markdown: for GitHub step summaries and release notes.

use std::fmt::Write as _;

use super::{Report, provenance};
use crate::testrun::classify::Class;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn render(r: &Report<'_>) -> String {
    let mut m = String::from("# rocforge hardware test report\n\n");
    m += &format!("> {}\n", provenance(r));
    for n in &r.not_run {
        let _ = writeln!(m, "> - {n}");
    }
    m += "\n## Component × target × device\n\n| component | target | device | machine | mode | pass | fail | skip | hung/crashed | total |\n| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n";
    for row in &r.rows {
        let s = row.summary();
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(row.component),
            cell(row.arch),
            cell(&row.device),
            cell(row.machine),
            row.mode(),
            s.passed,
            s.failures(),
            s.skipped,
            s.hung + s.crashed,
            s.total
        );
    }
    m += "\n## Failure classes\n\n| class | tests |\n| --- | ---: |\n";
    for c in Class::ALL {
        if let Some(n) = r.classes.get(&c) {
            let _ = writeln!(m, "| {} | {n} |", c.describe());
        }
    }
    let comps = r.comparisons();
    if !comps.is_empty() {
        m += "\n## Native vs spoofed\n\n| component | device | machine | native | pass/fail/skip | spoofed | pass/fail/skip | fail only spoofed | fail only native |\n| --- | --- | --- | --- | --- | --- | --- | ---: | ---: |\n";
        for c in &comps {
            let (a, b) = (c.native.summary(), c.spoofed.summary());
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {}/{}/{} | {} | {}/{}/{} | {} | {} |",
                cell(c.native.component),
                cell(&c.native.device),
                cell(c.native.machine),
                c.native.arch,
                a.passed,
                a.failures(),
                a.skipped,
                c.spoofed.arch,
                b.passed,
                b.failures(),
                b.skipped,
                c.only_spoofed_fails.len(),
                c.only_native_fails.len()
            );
        }
    }
    let failing: Vec<_> = r.rows.iter().filter(|r| !r.failing.is_empty()).collect();
    if !failing.is_empty() {
        m += "\n## Failing tests\n";
        for row in failing {
            let _ = writeln!(
                m,
                "\n<details><summary>{} {} on {} ({}): {} failing</summary>\n",
                row.component,
                row.arch,
                row.machine,
                row.mode(),
                row.failing.len()
            );
            for t in &row.failing {
                let _ = writeln!(
                    m,
                    "- `{}`: {} ({})\n\n```\n{}```\n",
                    t.name,
                    t.outcome.name(),
                    t.class.map_or("", |c| c.describe()),
                    t.excerpt.replace("```", "'''")
                );
            }
            m += "</details>\n";
        }
    }
    m
}
