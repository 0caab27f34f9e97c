//! The report's grid: one row per component, one column per (target, machine) pair that has
//! results, each cell the runs of that component's artifact for that target on that machine.

use super::Row;
use crate::ids::ComponentName;

pub struct Grid<'r, 'a> {
    /// (target of the tested artifact, machine), sorted.
    pub columns: Vec<(&'a str, &'a str)>,
    /// Component, then one cell per column (empty where nothing ran).
    pub rows: Vec<(&'a ComponentName, Vec<Vec<&'r Row<'a>>>)>,
}

pub fn of<'r, 'a>(rows: &'r [Row<'a>]) -> Grid<'r, 'a> {
    let mut columns: Vec<(&str, &str)> = rows.iter().map(|r| (r.arch, r.machine)).collect();
    columns.sort();
    columns.dedup();
    let mut components: Vec<&ComponentName> = rows.iter().map(|r| r.component).collect();
    components.sort();
    components.dedup();
    // Each run goes to its cell once: searching every run for every cell was cubic in the
    // number of bundles (2,000 took 22 s).
    let mut cells: std::collections::BTreeMap<(&ComponentName, &str, &str), Vec<&Row<'a>>> =
        std::collections::BTreeMap::new();
    for r in rows {
        cells
            .entry((r.component, r.arch, r.machine))
            .or_default()
            .push(r);
    }
    let rows = components
        .into_iter()
        .map(|c| {
            let cells = columns
                .iter()
                .map(|&(arch, machine)| cells.remove(&(c, arch, machine)).unwrap_or_default())
                .collect();
            (c, cells)
        })
        .collect();
    Grid { columns, rows }
}

/// What identifies a run in a cell: the day it finished, the component's version and the
/// short content key of the tested artifact (as in its tarball's name), and how it ran.
pub fn run_label(r: &Row<'_>) -> (String, String, String, String) {
    let b = r.bundle;
    let day = crate::units::rfc3339(b.finished)[..10].to_string();
    let key: String = b.component.key.chars().take(8).collect();
    let how = if b.spoofed {
        format!(
            "spoofed on {}",
            r.device_target.unwrap_or("an unknown device")
        )
    } else {
        String::new()
    };
    (day, b.component.version.clone(), key, how)
}
