//! The report as markdown: for GitHub step summaries and release notes.

use std::fmt::Write as _;

use super::{Report, grid, provenance};
use crate::testrun::bundle::Summary;
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
    let _ = writeln!(
        m,
        "\n## Totals\n\n{}\n\nCounted as `rocforge test` counts them: hung and crashed tests are not among the failed ones.",
        r.total.line()
    );
    let g = grid::of(&r.rows);
    m += "\n## Component × target × machine\n\n| component |";
    for (arch, machine) in &g.columns {
        let _ = write!(m, " {} on {} |", cell(arch), cell(machine));
    }
    m += "\n| --- |";
    m += &" --- |".repeat(g.columns.len());
    m.push('\n');
    for (component, cells) in &g.rows {
        let _ = write!(m, "| {} |", cell(component));
        for runs in cells {
            if runs.is_empty() {
                m += " not run |";
                continue;
            }
            let text: Vec<String> = runs
                .iter()
                .map(|row| {
                    let (day, version, key, how) = grid::run_label(row);
                    let how = if how.is_empty() {
                        String::new()
                    } else {
                        format!(" · {how}")
                    };
                    format!(
                        "{day} · {} · `{key}`{how}<br>{}",
                        cell(&version),
                        row.summary().short()
                    )
                })
                .collect();
            let _ = write!(m, " {} |", text.join("<br>"));
        }
        m.push('\n');
    }
    m += "\n## Runs\n\n| component | target | device | machine | mode | passed | failed | skipped | hung | crashed | total | finished | version | key |\n| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n";
    for row in &r.rows {
        let s = row.summary();
        let (day, version, key, _) = grid::run_label(row);
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {day} | {} | `{key}` |",
            cell(row.component),
            cell(row.arch),
            cell(&row.device),
            cell(row.machine),
            row.mode(),
            s.passed,
            s.failed,
            s.skipped,
            s.hung,
            s.crashed,
            s.total,
            cell(&version),
        );
    }
    m += "\n## Failure classes\n\n| class | meaning | tests |\n| --- | --- | ---: |\n";
    for c in Class::ALL {
        if let Some(n) = r.classes.get(&c) {
            let _ = writeln!(m, "| {} | {} | {n} |", c.name(), c.describe());
        }
    }
    let comps = r.comparisons();
    if !comps.is_empty() {
        m += "\n## Native vs spoofed\n\n| component | device | machine | native | its tests | spoofed | its tests | fail only spoofed | fail only native |\n| --- | --- | --- | --- | --- | --- | --- | ---: | ---: |\n";
        for c in &comps {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(c.native.component),
                cell(&c.native.device),
                cell(c.native.machine),
                c.native.arch,
                c.native.summary().short(),
                c.spoofed.arch,
                c.spoofed.summary().short(),
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
                "\n<details><summary>{} {} on {} ({}): {}</summary>\n",
                row.component,
                row.arch,
                row.machine,
                row.mode(),
                Summary::of(row.failing.iter().map(|t| t.outcome)).short()
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

#[cfg(test)]
mod tests {
    use crate::testrun::bundle::{Bundle, Summary};
    use crate::testrun::classify::Outcome;

    /// A bundle as `rocforge test` writes it, with these tests: (name, outcome, class).
    fn bundle(
        component: (&str, &str, &str),
        arch: &str,
        machine: (&str, &str),
        spoofed: bool,
        tests: &[(&str, &str, Option<&str>)],
    ) -> Bundle {
        let outcome =
            |o: &str| -> Outcome { serde_json::from_value(serde_json::json!(o)).unwrap() };
        let summary = Summary::of(tests.iter().map(|t| outcome(t.1)));
        let mut classes = std::collections::BTreeMap::<String, usize>::new();
        for t in tests {
            if let Some(c) = t.2 {
                *classes.entry(c.into()).or_default() += 1;
            }
        }
        let (name, version, key) = component;
        let (machine, device) = machine;
        serde_json::from_value(serde_json::json!({
            "schema": "rocforge.results/1",
            "rocforge_version": "0.1.0",
            "machine": machine,
            "started": 1_764_633_600u64,
            "finished": 1_764_637_200u64,
            "component": {"name": name, "version": version, "key": key, "targets": [arch], "runtime": "podman"},
            "dependencies": [],
            "arch": arch,
            "spoofed": spoofed,
            "hsa_override": if spoofed { Some("9.0.0") } else { None },
            "device": {"target": device, "target_id": device, "name": "Renoir", "gfx_target_version": 90012, "compute_units": 8, "memory": "uma"},
            "profile": {"schema": "rocforge.device/1", "root": "/", "live": true, "kernel": "6.1.0",
                "driver_version": null, "xnack": {"hsa_xnack": null, "noretry": null, "mode": "unknown"},
                "devices": [], "why_none": []},
            "environment": {},
            "client": {"path": "bin/t", "args": [], "shards": 1, "timeout_secs": 600},
            "shards": [],
            "summary": summary,
            "classes": classes,
            "tests": tests.iter().map(|(n, o, c)| serde_json::json!({
                "name": n, "shard": 0, "outcome": o, "class": c, "duration_ms": 5,
                "excerpt": if *o == "passed" { "" } else { "the evidence\n" },
            })).collect::<Vec<_>>(),
            "xml_check": null,
            "kernel_log": "read",
        }))
        .unwrap()
    }

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
        ];
        let r = super::super::build(&bundles);
        assert_eq!(
            r.total.line(),
            "12 tests: 7 passed, 2 failed, 1 skipped, 1 hung, 1 crashed"
        );
        let md = super::render(&r);
        insta::assert_snapshot!(md);
    }
}
