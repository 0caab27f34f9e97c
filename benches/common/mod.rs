//! The machine-readable side of every benchmark: one `ROCFORGE-BENCH <json>` line on stdout per
//! figure, beside the human-readable line the benchmark prints anyway. `scripts/bench` collects
//! them into one table and `target/bench/results.json` (schema `rocforge.bench/1`, described in
//! docs/performance.md). Included by each bench as `#[path = "common/mod.rs"] mod common;`.

/// Prints one figure. `peer` is the peer tool's figure in the same unit; `ratio` is usually
/// figure / peer (or whatever the bench compares); `goal` is the goal in words ("" or "—" when
/// there is none) and `met` whether the figure reached it (None: no goal).
pub fn record(
    name: &str,
    figure: f64,
    unit: &str,
    peer: Option<(&str, f64)>,
    ratio: Option<f64>,
    goal: &str,
    met: Option<bool>,
) {
    let line = serde_json::json!({
        "bench": env!("CARGO_CRATE_NAME"),
        "name": name,
        "figure": figure,
        "unit": unit,
        "peer": peer.map(|(name, figure)| serde_json::json!({ "name": name, "figure": figure })),
        "ratio": ratio,
        "goal": goal,
        "met": met,
    });
    println!("ROCFORGE-BENCH {line}");
}
