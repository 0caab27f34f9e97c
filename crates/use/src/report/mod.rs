//! Reports compiled from any number of results bundles from any number of machines: one
//! self-contained HTML page (`html`) and a markdown summary (`markdown`).

pub mod grid;
pub mod html;
pub mod markdown;
pub mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ids::ComponentName;
use crate::testrun::bundle::{Bundle, Summary, TestResult};
use crate::testrun::classify::{Class, Outcome};

/// One run: a component's artifact for one target on one machine's device.
pub struct Row<'a> {
    pub bundle: &'a Bundle,
    pub component: &'a ComponentName,
    pub arch: &'a str,
    pub machine: &'a str,
    /// The device as `gfx90c (Renoir)`.
    pub device: String,
    pub device_target: Option<&'a str>,
    pub failing: Vec<&'a TestResult>,
}

impl Row<'_> {
    pub fn mode(&self) -> &'static str {
        if self.bundle.spoofed {
            "spoofed"
        } else {
            "native"
        }
    }

    pub fn summary(&self) -> &Summary {
        &self.bundle.summary
    }
}

/// Native and spoofed runs of one component on one machine's device.
pub struct Comparison<'a> {
    pub native: &'a Row<'a>,
    pub spoofed: &'a Row<'a>,
    /// Tests that pass natively and fail spoofed, and the other way round.
    pub only_spoofed_fails: Vec<&'a str>,
    pub only_native_fails: Vec<&'a str>,
}

pub struct Report<'a> {
    pub rows: Vec<Row<'a>>,
    /// Every run's counts added up, in `rocforge test`'s categories.
    pub total: Summary,
    pub classes: BTreeMap<Class, usize>,
    pub machines: Vec<MachineLine>,
    /// What these results do not cover, one sentence each.
    pub not_run: Vec<String>,
}

pub struct MachineLine {
    pub machine: String,
    pub devices: String,
    pub kernel: String,
    pub live: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct LoadError {
    pub path: String,
    pub why: String,
}

impl crate::diag::Hint for LoadError {
    fn hint(&self) -> String {
        "pass results.json files written by `rocforge test` (schema rocforge.results/1)".into()
    }
}

/// The most of a results.json read: a whole volunteer's run of every corpus is a few MiB.
const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// Reads a results bundle.
pub fn load(path: &Path) -> Result<Bundle, LoadError> {
    let err = |why: String| LoadError {
        path: path.display().to_string(),
        why,
    };
    let text =
        crate::fsutil::read_regular(path, MAX_RESULTS_BYTES).map_err(|e| err(e.to_string()))?;
    parse(&text, &path.display().to_string())
}

/// The results in a directory `rocforge test` wrote: one run's DIR/results.json, or every
/// component's of a `rocforge test --all` bundle (DIR/<component>/results.json, by name), so
/// `rocforge-results/*` reads every run there.
pub fn load_dir(dir: &Path) -> Result<Vec<Bundle>, LoadError> {
    let err = |why: String| LoadError {
        path: dir.display().to_string(),
        why,
    };
    let one = dir.join("results.json");
    if one.is_file() {
        return Ok(vec![load(&one)?]);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| err(e.to_string()))?
        .flatten()
        .map(|e| e.path().join("results.json"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(err(
            "holds neither results.json nor <component>/results.json (not a directory `rocforge test` wrote)".into(),
        ));
    }
    found.iter().map(|p| load(p)).collect()
}

/// A results bundle from its bytes; `what` names it in errors (a path or an OCI reference).
pub fn parse(bytes: &[u8], what: &str) -> Result<Bundle, LoadError> {
    let err = |why: String| LoadError {
        path: what.to_string(),
        why,
    };
    let mut b: Bundle = serde_json::from_slice(bytes).map_err(|e| err(e.to_string()))?;
    if !crate::testrun::bundle::RESULTS_SCHEMAS_READ.contains(&b.schema.as_str()) {
        return Err(err(format!("unknown schema \"{}\"", b.schema)));
    }
    // The counts are what the tests say, as `rocforge test` wrote them: a bundle from outside
    // cannot claim others (or counts that overflow when a report adds them up).
    b.summary = Summary::of(b.tests.iter().map(|t| t.outcome));
    b.classes = crate::testrun::bundle::classes(&b.tests);
    Ok(b)
}

pub fn device_label(b: &Bundle) -> String {
    match &b.device {
        Some(d) => match (&d.target, &d.name) {
            (Some(t), Some(n)) => format!("{t} ({n})"),
            (Some(t), None) => t.clone(),
            _ => format!("gfx_target_version {}", d.gfx_target_version),
        },
        None => "no GPU detected".into(),
    }
}

pub fn build(bundles: &[Bundle]) -> Report<'_> {
    let mut rows: Vec<Row<'_>> = bundles
        .iter()
        .map(|b| Row {
            bundle: b,
            component: &b.component.name,
            arch: &b.arch,
            machine: &b.machine,
            device: device_label(b),
            device_target: b.device.as_ref().and_then(|d| d.target.as_deref()),
            failing: b.tests.iter().filter(|t| t.outcome.is_failure()).collect(),
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.component, a.machine, &a.device, a.bundle.spoofed, a.arch).cmp(&(
            b.component,
            b.machine,
            &b.device,
            b.bundle.spoofed,
            b.arch,
        ))
    });
    let mut total = Summary::default();
    for b in bundles {
        total.add(&b.summary);
    }
    let mut classes: BTreeMap<Class, usize> = BTreeMap::new();
    for b in bundles {
        for (c, n) in &b.classes {
            *classes.entry(*c).or_insert(0) += n;
        }
    }
    let mut machines: BTreeMap<String, MachineLine> = BTreeMap::new();
    for b in bundles {
        let m = machines
            .entry(b.machine.clone())
            .or_insert_with(|| MachineLine {
                machine: b.machine.clone(),
                devices: device_label(b),
                kernel: b.profile.kernel.clone().unwrap_or_else(|| "unknown".into()),
                live: b.profile.live,
            });
        m.live &= b.profile.live;
    }
    let mut not_run = Vec::new();
    let recorded: Vec<&str> = machines
        .values()
        .filter(|m| !m.live)
        .map(|m| m.machine.as_str())
        .collect();
    if !recorded.is_empty() {
        not_run.push(format!(
            "The device profile of {} was read from a recorded sysfs tree (--sysfs-root), not from a live GPU: those runs are not hardware results.",
            recorded.join(", ")
        ));
    }
    if machines.values().all(|m| !m.live) {
        not_run.push("None of these results was produced on real GPU hardware.".into());
    }
    // component × target pairs with runs, but none native on a device of that target.
    let mut pairs: BTreeMap<(&str, &str), bool> = BTreeMap::new();
    for r in &rows {
        let native = !r.bundle.spoofed && r.device_target == Some(r.arch);
        *pairs.entry((r.component.as_str(), r.arch)).or_insert(false) |= native;
    }
    for ((c, a), native) in pairs {
        if !native {
            not_run.push(format!(
                "{c} for {a} has no native run on a {a} device here (only spoofed or other devices)."
            ));
        }
    }
    let hung: usize = bundles.iter().map(|b| b.summary.hung).sum();
    if hung > 0 {
        not_run.push(format!(
            "{hung} hung test(s) were killed; their results are unknown beyond the hang."
        ));
    }
    not_run.push(
        "Any component, target, device or test not listed in this report was not run.".into(),
    );
    Report {
        rows,
        total,
        classes,
        machines: machines.into_values().collect(),
        not_run,
    }
}

impl<'a> Report<'a> {
    /// Native vs spoofed pairs: same component and machine device, one native, one spoofed.
    pub fn comparisons(&'a self) -> Vec<Comparison<'a>> {
        let mut out = Vec::new();
        // Spoofed runs by what pairs them, so pairing is not every run against every run.
        let mut spoofed: BTreeMap<_, Vec<&'a Row<'a>>> = BTreeMap::new();
        for s in self.rows.iter().filter(|r| r.bundle.spoofed) {
            spoofed
                .entry((s.component, s.machine, s.device.as_str()))
                .or_default()
                .push(s);
        }
        for n in self.rows.iter().filter(|r| !r.bundle.spoofed) {
            let partners = spoofed.get(&(n.component, n.machine, n.device.as_str()));
            for &s in partners.into_iter().flatten() {
                let status = |r: &'a Row<'a>| -> BTreeMap<&'a str, Outcome> {
                    r.bundle
                        .tests
                        .iter()
                        .map(|t| (t.name.as_str(), t.outcome))
                        .collect()
                };
                let (ns, ss) = (status(n), status(s));
                let only_spoofed_fails = ss
                    .iter()
                    .filter(|(k, o)| o.is_failure() && ns.get(*k) == Some(&Outcome::Passed))
                    .map(|(k, _)| *k)
                    .collect();
                let only_native_fails = ns
                    .iter()
                    .filter(|(k, o)| o.is_failure() && ss.get(*k) == Some(&Outcome::Passed))
                    .map(|(k, _)| *k)
                    .collect();
                out.push(Comparison {
                    native: n,
                    spoofed: s,
                    only_spoofed_fails,
                    only_native_fails,
                });
            }
        }
        out
    }
}

/// The sentence every report opens with.
pub fn provenance(r: &Report<'_>) -> String {
    let names: Vec<String> = r
        .machines
        .iter()
        .map(|m| {
            format!(
                "{} ({}{})",
                m.machine,
                m.devices,
                if m.live { "" } else { ", recorded profile" }
            )
        })
        .collect();
    format!(
        "These results come only from the {} machine(s) listed: {}. Nothing else was run on hardware.",
        r.machines.len(),
        names.join("; ")
    )
}

/// Results bundles for the report tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::testrun::bundle::{Bundle, Summary};
    use crate::testrun::classify::Outcome;

    /// A bundle as `rocforge test` writes it, with these tests: (name, outcome, class).
    pub fn bundle(
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
}

#[cfg(test)]
mod tests {
    use super::fixtures::bundle;

    /// Version 1 bundles (no `release` in their artifacts) still read; an unknown version is
    /// refused by name.
    #[test]
    fn results_of_both_versions_are_read() {
        let b = bundle(
            ("rocsparse", "3.4.0", &"a".repeat(64)),
            "gfx90c",
            ("laptop", "gfx90c"),
            false,
            &[("P.a", "passed", None)],
        );
        let mut v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["schema"], "rocforge.results/1");
        v["component"].as_object_mut().unwrap().remove("release");
        let old = super::parse(v.to_string().as_bytes(), "old.json").unwrap();
        assert_eq!(
            (old.component.release.as_str(), old.component.name.as_str()),
            ("", "rocsparse")
        );
        v["schema"] = "rocforge.results/2".into();
        assert!(super::parse(v.to_string().as_bytes(), "new.json").is_ok());
        v["schema"] = "rocforge.results/9".into();
        let e = super::parse(v.to_string().as_bytes(), "future.json").unwrap_err();
        assert!(e.why.contains("rocforge.results/9"), "{}", e.why);
    }

    /// A bundle's counts are its tests': one that claims more (here, counts that overflowed
    /// when a report added them: "attempt to add with overflow") is read with the true ones.
    #[test]
    fn a_bundle_is_counted_by_its_tests_not_by_its_summary() {
        let b = bundle(
            ("rocsparse", "3.4.0", &"a".repeat(64)),
            "gfx90c",
            ("laptop", "gfx90c"),
            false,
            &[
                ("P.a", "passed", None),
                ("P.b", "failed", Some("assertion")),
            ],
        );
        let mut v = serde_json::to_value(&b).unwrap();
        v["summary"]["failed"] = u64::MAX.into();
        v["summary"]["hung"] = 1.into();
        v["classes"]["assertion"] = u64::MAX.into();
        let read = super::parse(v.to_string().as_bytes(), "claims.json").unwrap();
        assert_eq!(read.summary, b.summary);
        assert_eq!((read.summary.failures(), read.summary.passed), (1, 1));
        assert_eq!(read.classes, b.classes);
    }
}
