//! What the report templates show: a [`Report`] turned into plain, serializable values (every
//! string, count and chart coordinate computed here), and the template environment that renders
//! them. The page's and the summary's text live in `templates/`.

use minijinja::AutoEscape;
use serde::Serialize;

use super::{Report, Row, grid, provenance};
use crate::ids::ComponentName;
use crate::testrun::bundle::Summary;
use crate::testrun::classify::Class;

const HTML_TEMPLATE: &str = include_str!("templates/report.html.j2");
const MARKDOWN_TEMPLATE: &str = include_str!("templates/report.md.j2");

pub use crate::template::RenderError;

/// `s` with HTML's five special characters as entities. Every value the HTML template inserts
/// goes through this (autoescape), bundles being other machines' files: a component or machine
/// named `<script>` shows as text. The same five entities the page has always used, rather than
/// minijinja's own escaper, which also writes `/` as `&#x2f;` (harmless, but it changed every
/// path in an excerpt).
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

/// `s` as markdown text that stays text: the characters that start emphasis, code, links,
/// images, headings, tables, strike-through and HTML are escaped (`<`, `>` and `&` as entities,
/// the others with a backslash) and newlines folded, so a string from a bundle cannot add a
/// heading, a link or an image to a CI job summary. Every value the markdown template inserts
/// goes through this, as every value of the HTML one goes through [`esc`].
pub fn md(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '!' | '|' | '~' => {
                o.push('\\');
                o.push(c);
            }
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A markdown code span holding `s` literally: fenced by more backticks than any run inside it
/// (backslashes mean nothing in a code span), newlines folded.
fn code(s: &str) -> minijinja::Value {
    let s = s.replace(['\n', '\r'], " ");
    let (mut run, mut longest) = (0, 0);
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    minijinja::Value::from_safe_string(format!("{fence}{pad}{s}{pad}{fence}"))
}

/// A fenced code block's body: a line of three backticks cannot close the fence early.
fn fenced(s: &str) -> minijinja::Value {
    minijinja::Value::from_safe_string(s.replace("```", "\'\'\'"))
}

/// Renders `template` (`report.html` or `report.md`) for `view`. Templates whose name ends in
/// `.html` escape every inserted value; the markdown one inserts text as it is, with the `cell`
/// filter where the value sits in a table.
pub fn render(name: &'static str, view: &View) -> Result<String, RenderError> {
    let mut env = crate::template::environment(
        &[
            ("report.html", HTML_TEMPLATE),
            ("report.md", MARKDOWN_TEMPLATE),
        ],
        crate::template::Delimiters::Jinja,
    )?;
    env.set_formatter(|out, state, value| {
        let fail =
            |_| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, "formatting failed");
        if value.is_safe() || value.is_number() {
            minijinja::escape_formatter(out, state, value)
        } else if *state.auto_escape() == AutoEscape::Html {
            out.write_str(&esc(&value.to_string())).map_err(fail)
        } else if state.name().ends_with(".md") {
            out.write_str(&md(&value.to_string())).map_err(fail)
        } else {
            minijinja::escape_formatter(out, state, value)
        }
    });
    env.add_filter("code", |s: String| code(&s));
    env.add_filter("fenced", |s: String| fenced(&s));
    crate::template::render(&env, name, view)
}

#[derive(Debug, Serialize)]
pub struct View {
    /// The sentence every report opens with, then what the results do not cover.
    pub provenance: String,
    pub not_run: Vec<String>,
    pub machines: Vec<Machine>,
    /// Every run's counts added up, as one line.
    pub totals: String,
    pub grid: Grid,
    pub runs: Vec<Run>,
    pub chart: Chart,
    /// The failure classes that occur, in `Class::ALL` order.
    pub classes: Vec<ClassCount>,
    pub comparisons: Vec<Comparison>,
    /// The runs with failing tests.
    pub failing: Vec<Failing>,
}

#[derive(Debug, Serialize)]
pub struct Machine {
    pub machine: String,
    pub devices: String,
    pub kernel: String,
    /// `live` or `recorded`: where its device profile came from.
    pub profile: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Grid {
    /// (target, machine) per column.
    pub columns: Vec<Column>,
    pub rows: Vec<GridRow>,
}

#[derive(Debug, Serialize)]
pub struct Column {
    pub arch: String,
    pub machine: String,
}

#[derive(Debug, Serialize)]
pub struct GridRow {
    pub component: ComponentName,
    /// One cell per column: the runs there, none where nothing ran.
    pub cells: Vec<Vec<CellRun>>,
}

/// One run in a grid cell: when, which artifact, how, and its counts.
#[derive(Debug, Serialize)]
pub struct CellRun {
    pub day: String,
    pub version: String,
    pub key: String,
    /// Empty for a native run, else `spoofed on <device>`.
    pub how: String,
    /// `fail` when a test failed, hung or crashed, else `pass` (the HTML class).
    pub status: &'static str,
    pub short: String,
}

/// One run as a row of the runs table.
#[derive(Debug, Serialize)]
pub struct Run {
    pub component: ComponentName,
    pub arch: String,
    pub device: String,
    pub machine: String,
    pub mode: &'static str,
    pub summary: Summary,
    pub day: String,
    pub version: String,
    pub key: String,
}

/// The failure-class bar chart: an SVG `width` × `height`, one bar per class.
#[derive(Debug, Serialize)]
pub struct Chart {
    pub width: usize,
    pub height: usize,
    pub label_width: usize,
    pub bar_height: usize,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Serialize)]
pub struct Bar {
    pub name: &'static str,
    pub describe: &'static str,
    pub count: usize,
    /// Top of the bar, baseline of its texts, its width and where its count is written.
    pub y: usize,
    pub text_y: usize,
    pub width: usize,
    pub count_x: usize,
    pub color: &'static str,
}

#[derive(Debug, Serialize)]
pub struct ClassCount {
    pub name: &'static str,
    pub describe: &'static str,
    pub count: usize,
}

/// Native and spoofed runs of one component on one machine's device.
#[derive(Debug, Serialize)]
pub struct Comparison {
    pub component: ComponentName,
    pub device: String,
    pub machine: String,
    pub native_arch: String,
    pub native_short: String,
    pub spoofed_arch: String,
    /// The HSA_OVERRIDE_GFX_VERSION of the spoofed run, `?` when the bundle has none.
    pub hsa_override: String,
    pub spoofed_short: String,
    pub only_spoofed_fails: usize,
    pub only_native_fails: usize,
}

#[derive(Debug, Serialize)]
pub struct Failing {
    pub component: ComponentName,
    pub arch: String,
    pub machine: String,
    pub device: String,
    pub mode: &'static str,
    /// The failing tests' counts.
    pub short: String,
    pub tests: Vec<FailingTest>,
}

#[derive(Debug, Serialize)]
pub struct FailingTest {
    pub name: String,
    pub outcome: &'static str,
    /// The class's name and meaning, empty when unclassified.
    pub class: &'static str,
    pub class_describe: &'static str,
    pub excerpt: String,
}

/// The chart's geometry: label column, longest bar and row height, in pixels.
const LABEL_W: usize = 230;
const BAR_W: usize = 360;
const ROW_H: usize = 24;

impl View {
    pub fn of(r: &Report<'_>) -> View {
        let g = grid::of(&r.rows);
        let grid = Grid {
            columns: g
                .columns
                .iter()
                .map(|(arch, machine)| Column {
                    arch: arch.to_string(),
                    machine: machine.to_string(),
                })
                .collect(),
            rows: g
                .rows
                .iter()
                .map(|(component, cells)| GridRow {
                    component: (*component).clone(),
                    cells: cells
                        .iter()
                        .map(|runs| runs.iter().map(|row| cell_run(row)).collect())
                        .collect(),
                })
                .collect(),
        };
        let runs = r
            .rows
            .iter()
            .map(|row| {
                let (day, version, key, _) = grid::run_label(row);
                Run {
                    component: row.component.clone(),
                    arch: row.arch.to_string(),
                    device: row.device.clone(),
                    machine: row.machine.to_string(),
                    mode: row.mode(),
                    summary: row.summary().clone(),
                    day,
                    version,
                    key,
                }
            })
            .collect();
        let comparisons = r
            .comparisons()
            .iter()
            .map(|c| Comparison {
                component: c.native.component.clone(),
                device: c.native.device.clone(),
                machine: c.native.machine.to_string(),
                native_arch: c.native.arch.to_string(),
                native_short: c.native.summary().short(),
                spoofed_arch: c.spoofed.arch.to_string(),
                hsa_override: c
                    .spoofed
                    .bundle
                    .hsa_override
                    .clone()
                    .unwrap_or_else(|| "?".into()),
                spoofed_short: c.spoofed.summary().short(),
                only_spoofed_fails: c.only_spoofed_fails.len(),
                only_native_fails: c.only_native_fails.len(),
            })
            .collect();
        let failing = r
            .rows
            .iter()
            .filter(|row| !row.failing.is_empty())
            .map(|row| Failing {
                component: row.component.clone(),
                arch: row.arch.to_string(),
                machine: row.machine.to_string(),
                device: row.device.clone(),
                mode: row.mode(),
                short: Summary::of(row.failing.iter().map(|t| t.outcome)).short(),
                tests: row
                    .failing
                    .iter()
                    .map(|t| FailingTest {
                        name: t.name.clone(),
                        outcome: t.outcome.name(),
                        class: t.class.map_or("", |c| c.name()),
                        class_describe: t.class.map_or("", |c| c.describe()),
                        excerpt: t.excerpt.clone(),
                    })
                    .collect(),
            })
            .collect();
        View {
            provenance: provenance(r),
            not_run: r.not_run.clone(),
            machines: r
                .machines
                .iter()
                .map(|m| Machine {
                    machine: m.machine.clone(),
                    devices: m.devices.clone(),
                    kernel: m.kernel.clone(),
                    profile: if m.live { "live" } else { "recorded" },
                })
                .collect(),
            totals: r.total.line(),
            grid,
            runs,
            chart: chart(r),
            classes: Class::ALL
                .iter()
                .filter_map(|c| {
                    r.classes.get(c).map(|&count| ClassCount {
                        name: c.name(),
                        describe: c.describe(),
                        count,
                    })
                })
                .collect(),
            comparisons,
            failing,
        }
    }
}

fn cell_run(row: &Row<'_>) -> CellRun {
    let (day, version, key, how) = grid::run_label(row);
    let s = row.summary();
    CellRun {
        day,
        version,
        key,
        how,
        status: if s.failures() > 0 {
            "fail"
        } else if s.only_no_gpu() {
            "nogpu"
        } else {
            "pass"
        },
        short: s.short(),
    }
}

/// Every class of `Class::ALL`, zero counts included, each bar scaled to the largest count.
fn chart(r: &Report<'_>) -> Chart {
    let rows: Vec<(Class, usize)> = Class::ALL
        .iter()
        .map(|c| (*c, r.classes.get(c).copied().unwrap_or(0)))
        .collect();
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let bars = rows
        .iter()
        .enumerate()
        .map(|(i, &(c, n))| {
            let y = i * ROW_H + 5;
            let width = n * BAR_W / max;
            Bar {
                name: c.name(),
                describe: c.describe(),
                count: n,
                y,
                text_y: y + 15,
                width,
                count_x: LABEL_W + width + 6,
                color: match c {
                    Class::Skipped => "#9e9e9e",
                    Class::NoGpu => "#8a6d00",
                    _ => "#c62828",
                },
            }
        })
        .collect();
    Chart {
        width: LABEL_W + BAR_W + 60,
        height: rows.len() * ROW_H + 10,
        label_width: LABEL_W,
        bar_height: ROW_H - 6,
        bars,
    }
}
