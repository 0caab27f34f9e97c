//! The report as one static HTML page: inline CSS, an inline SVG chart, no external assets.

use std::fmt::Write as _;

use super::{Report, Row, grid, provenance};
use crate::testrun::bundle::Summary;
use crate::testrun::classify::Class;

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f2f2f2}td.n{text-align:right}.pass{color:#17692d}.fail{color:#b00020;font-weight:bold}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.6em 1em}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:.85em;white-space:pre-wrap}
details{margin:.4em 0}summary{cursor:pointer}";

/// Bar chart of failure classes as inline SVG.
pub fn chart(r: &Report<'_>) -> String {
    let rows: Vec<(Class, usize)> = Class::ALL
        .iter()
        .map(|c| (*c, r.classes.get(c).copied().unwrap_or(0)))
        .collect();
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let (label_w, bar_w, row_h) = (230, 360, 24);
    let h = rows.len() * row_h + 10;
    let mut s = format!(
        "<svg id=\"classes-chart\" width=\"{}\" height=\"{h}\" role=\"img\" aria-label=\"failure classes\">",
        label_w + bar_w + 60
    );
    for (i, (c, n)) in rows.iter().enumerate() {
        let y = i * row_h + 5;
        let w = n * bar_w / max;
        let color = if *c == Class::Skipped {
            "#9e9e9e"
        } else {
            "#c62828"
        };
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"13\">{}</text><rect x=\"{label_w}\" y=\"{y}\" width=\"{w}\" height=\"{}\" fill=\"{color}\"><title>{}: {n}</title></rect><text x=\"{}\" y=\"{}\" font-size=\"13\">{n}</text>",
            y + 15,
            esc(c.describe()),
            row_h - 6,
            esc(c.name()),
            label_w + w + 6,
            y + 15
        );
    }
    s + "</svg>"
}

/// The counts in `rocforge test`'s categories: hung and crashed apart from failed.
fn counts(r: &Row<'_>) -> String {
    let s = r.summary();
    let n = |v: usize, bad: bool| {
        format!(
            "<td class=\"n{}\">{v}</td>",
            if bad && v > 0 { " fail" } else { "" }
        )
    };
    format!(
        "<td class=\"n pass\">{}</td>{}<td class=\"n\">{}</td>{}{}<td class=\"n\">{}</td>",
        s.passed,
        n(s.failed, true),
        s.skipped,
        n(s.hung, true),
        n(s.crashed, true),
        s.total
    )
}

fn grid_table(r: &Report<'_>) -> String {
    let g = grid::of(&r.rows);
    let mut h = String::from("<table id=\"grid\"><tr><th>component</th>");
    for (arch, machine) in &g.columns {
        let _ = write!(h, "<th>{} on {}</th>", esc(arch), esc(machine));
    }
    h += "</tr>\n";
    for (component, cells) in &g.rows {
        let _ = write!(h, "<tr><td>{}</td>", esc(component));
        for runs in cells {
            if runs.is_empty() {
                h += "<td>not run</td>";
                continue;
            }
            h += "<td>";
            for (i, row) in runs.iter().enumerate() {
                let (day, version, key, how) = grid::run_label(row);
                let s = row.summary();
                let _ = write!(
                    h,
                    "{}{day} · {} · <code>{key}</code>{}<br><span class=\"{}\">{}</span>",
                    if i > 0 { "<br>" } else { "" },
                    esc(&version),
                    if how.is_empty() {
                        String::new()
                    } else {
                        format!(" · {}", esc(&how))
                    },
                    if s.failures() > 0 { "fail" } else { "pass" },
                    esc(&s.short())
                );
            }
            h += "</td>";
        }
        h += "</tr>\n";
    }
    h + "</table>\n"
}

pub fn render(r: &Report<'_>) -> String {
    let mut h = String::new();
    h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rocforge hardware test report</title><style>";
    h += CSS;
    h += "</style></head><body>\n<h1>rocforge hardware test report</h1>\n";
    let _ = writeln!(
        h,
        "<div class=\"note\" id=\"provenance\"><p>{}</p><ul>{}</ul></div>",
        esc(&provenance(r)),
        r.not_run
            .iter()
            .map(|n| format!("<li>{}</li>", esc(n)))
            .collect::<String>()
    );
    h += "<h2>Machines</h2>\n<table id=\"machines\"><tr><th>machine</th><th>device</th><th>kernel</th><th>profile</th></tr>\n";
    for m in &r.machines {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.machine),
            esc(&m.devices),
            esc(&m.kernel),
            if m.live { "live" } else { "recorded" }
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<h2>Totals</h2>\n<p id=\"totals\">{}</p>\n<p>Counted as <code>rocforge test</code> counts them: hung and crashed tests are not among the failed ones.</p>",
        esc(&r.total.line())
    );
    h += "<h2>Component × target × machine</h2>\n";
    h += &grid_table(r);
    h += "<h2>Runs</h2>\n<table id=\"matrix\"><tr><th>component</th><th>target</th><th>device</th><th>machine</th><th>mode</th><th>passed</th><th>failed</th><th>skipped</th><th>hung</th><th>crashed</th><th>total</th><th>finished</th><th>version</th><th>key</th></tr>\n";
    for row in &r.rows {
        let (day, version, key, _) = grid::run_label(row);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td>{day}</td><td>{}</td><td><code>{key}</code></td></tr>",
            esc(row.component),
            esc(row.arch),
            esc(&row.device),
            esc(row.machine),
            row.mode(),
            counts(row),
            esc(&version)
        );
    }
    h += "</table>\n<h2>Failure classes</h2>\n";
    h += &chart(r);
    h += "\n<h2>Native vs spoofed</h2>\n";
    let comps = r.comparisons();
    if comps.is_empty() {
        h += "<p>No component was run both natively and spoofed on the same device.</p>\n";
    } else {
        h += "<table id=\"comparison\"><tr><th>component</th><th>device</th><th>machine</th><th>native</th><th>its tests</th><th>spoofed</th><th>its tests</th><th>fail only spoofed</th><th>fail only native</th></tr>\n";
        for c in &comps {
            let pfs = |row: &Row<'_>| esc(&row.summary().short());
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} (HSA_OVERRIDE_GFX_VERSION={})</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(c.native.component),
                esc(&c.native.device),
                esc(c.native.machine),
                esc(c.native.arch),
                pfs(c.native),
                esc(c.spoofed.arch),
                esc(c.spoofed.bundle.hsa_override.as_deref().unwrap_or("?")),
                pfs(c.spoofed),
                c.only_spoofed_fails.len(),
                c.only_native_fails.len()
            );
        }
        h += "</table>\n";
    }
    h += "<h2>Failing tests</h2>\n";
    let mut any = false;
    for row in &r.rows {
        if row.failing.is_empty() {
            continue;
        }
        any = true;
        let _ = writeln!(
            h,
            "<details open><summary>{} {} on {} ({}, {}): {}</summary>\n<table class=\"failing\"><tr><th>test</th><th>outcome</th><th>class</th><th>excerpt</th></tr>",
            esc(row.component),
            esc(row.arch),
            esc(row.machine),
            esc(&row.device),
            row.mode(),
            Summary::of(row.failing.iter().map(|t| t.outcome)).short()
        );
        for t in &row.failing {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
                esc(&t.name),
                t.outcome.name(),
                t.class.map_or("", |c| c.name()),
                esc(&t.excerpt)
            );
        }
        h += "</table></details>\n";
    }
    if !any {
        h += "<p>No test failed.</p>\n";
    }
    h += "</body></html>\n";
    h
}
