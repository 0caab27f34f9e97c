//! The gate stage: what a build put in its staged entry is checked before it is committed:
//! native code for each target (or the recipe's declared kind of GPU code), license files,
//! and the test corpus a build that enables its tests must install. The Tensile logic its
//! kernels came from is recorded beside them.

use std::path::Path;

use super::step::{Progress, Stage};
use super::{Builder, StepError, license};
use crate::inspect::record::{CodeObjectRecord, CoverageRecord, DeclaredRecord};
use crate::recipe::{BuildSystem, Recipe};
use crate::source::prepare::Prepared;
use crate::store::Staging;

/// What the gates found, recorded in the store entry.
pub(super) struct Gated {
    pub coverage: Option<CoverageRecord>,
    pub licenses: Vec<String>,
}

impl Builder<'_> {
    pub(super) fn gate_entry(
        &self,
        s: &Stage<'_>,
        staging: &Staging,
        prepared: &Prepared,
        progress: &Progress<'_>,
    ) -> Result<Gated, StepError> {
        let (component, recipe) = (s.component, s.recipe);
        self.record_logic(s, staging)?;
        progress.phase("license files");
        let licenses = license::collect(recipe, &prepared.tree, &staging.tree())?.files;
        if licenses.is_empty() {
            self.reporter.note(&format!(
                "warning: {component}: no license file (LICENSE*, LICENCE*, COPYING*, NOTICE*, \
                 COPYRIGHT*) at the top of its source, so its packages carry none; list them with \
                 license-files = [\"…\"] in {}",
                recipe.file.display
            ));
        }
        let coverage = match &recipe.build.system {
            _ if recipe.gpu_code != crate::recipe::gpu_code::GpuCode::AheadOfTime => {
                progress.phase("checking the declared GPU code");
                Some(self.verdict_gate(component, recipe, &staging.tree())?)
            }
            BuildSystem::Copy { .. } => None,
            _ if !recipe.build.device_code => None,
            _ => {
                progress.phase("checking code objects");
                Some(self.gate(component, &staging.tree())?)
            }
        };
        self.check_test_corpus(s, staging)?;
        Ok(Gated { coverage, licenses })
    }

    /// Which Tensile logic each target's kernels were generated from travels with the
    /// artifact, where `inspect` finds it: derived, upstream, or a user's overlay.
    fn record_logic(&self, s: &Stage<'_>, staging: &Staging) -> Result<(), StepError> {
        let arches: Vec<&str> = self.plan.targets.iter().map(|t| t.arch.as_str()).collect();
        let overlays: Vec<&crate::catalog::Overlay> = self.sources.overlays.iter().collect();
        let logic = crate::catalog::logic::sources(
            s.recipe,
            &arches,
            &self.sources.catalog.arches,
            &overlays,
        );
        if !logic.is_empty() {
            let file = staging
                .tree()
                .join(crate::catalog::logic::PROVENANCE_DIR)
                .join(s.component)
                .join(crate::catalog::logic::PROVENANCE_FILE);
            std::fs::create_dir_all(file.parent().expect("a file in a directory"))
                .map_err(s.io("Tensile logic record"))?;
            let json = serde_json::to_vec_pretty(&logic).expect("plain data");
            std::fs::write(&file, json).map_err(s.io("Tensile logic record"))?;
        }
        Ok(())
    }

    /// The tests the recipe's `[test]` names, looked for in the staged tree.
    fn check_test_corpus(&self, s: &Stage<'_>, staging: &Staging) -> Result<(), StepError> {
        let (component, recipe) = (s.component, s.recipe);
        let Some(test) = &recipe.test else {
            return Ok(());
        };
        s.task.set_message("checking the test corpus");
        let enabled = crate::corpus::installed::tests_enabled(recipe);
        if let Err(why) = crate::corpus::installed::check(
            test,
            &staging.tree(),
            &self.sources.catalog.release.prefix,
        ) {
            // Only a build known to build its tests must have installed them; otherwise
            // the tests may simply be off (or built by a script rocforge cannot read).
            if enabled == Some(true) {
                s.task.finish(&format!("{component}: FAILED"));
                return Err(StepError::TestCorpus {
                    component: component.into(),
                    recipe: recipe.file.display.clone(),
                    why,
                });
            }
            // A build that switches its tests off installs none: nothing to say. Only where
            // rocforge cannot tell is the mismatch worth the recipe author's look.
            if enabled.is_none() {
                self.reporter.note(&format!(
                    "warning: {component}: {why} ([test] in {})",
                    recipe.file.display,
                ));
            }
        }
        Ok(())
    }

    /// The gate of a component whose `[coverage]` kind is not ahead-of-time: its verdict must
    /// hold (a runtime-compiled proof for each target, no GPU code in a host-only one), and it
    /// is recorded under its kind, never as code-object coverage.
    fn verdict_gate(
        &self,
        component: &str,
        recipe: &Recipe,
        tree: &Path,
    ) -> Result<CoverageRecord, StepError> {
        let report = self.tree_coverage(component, tree)?;
        let v = crate::inspect::verdict::verdict(&recipe.gpu_code, &report, &self.plan.targets)
            .expect("not ahead-of-time");
        let strip = |s: &str| s.replace(&format!("{}/", tree.display()), "");
        let gaps: Vec<String> = v
            .gaps
            .iter()
            .filter(|(t, _)| {
                t.as_ref().is_none_or(|t| {
                    !crate::inspect::coverage::allows(&self.options.allow_missing, t)
                })
            })
            .map(|(_, g)| format!("  {}", strip(g)))
            .collect();
        if !gaps.is_empty() {
            return Err(StepError::Coverage {
                component: component.into(),
                table: format!(
                    "{} (declared in {})\n{}",
                    v.kind,
                    recipe.display_file(),
                    gaps.join("\n")
                )
                .trim()
                .to_string(),
            });
        }
        for line in &v.lines {
            self.reporter.note(&format!("{component}: {}", strip(line)));
        }
        Ok(CoverageRecord::Declared(DeclaredRecord {
            kind: v.kind.to_string(),
            targets: self.plan.targets.clone(),
            declared: recipe.gpu_code.clone(),
            verdict: v.lines.iter().map(|l| strip(l)).collect(),
            missing_allowed: v.gaps.iter().map(|(_, g)| strip(g)).collect(),
        }))
    }

    /// What code objects the built tree carries for the plan's targets.
    fn tree_coverage(
        &self,
        component: &str,
        tree: &Path,
    ) -> Result<crate::inspect::CoverageReport, StepError> {
        crate::inspect::coverage(
            &[tree.to_path_buf()],
            &self.plan.targets,
            &self.sources.catalog.arches,
        )
        .map_err(|e| StepError::Coverage {
            component: component.into(),
            table: format!("  {e}"),
        })
    }

    /// The coverage gate: every library with device code must carry each requested target.
    fn gate(&self, component: &str, tree: &Path) -> Result<CoverageRecord, StepError> {
        let report = self.tree_coverage(component, tree)?;
        let strip = |lib: &str| {
            lib.strip_prefix(&format!("{}/", tree.display()))
                .unwrap_or(lib)
                .to_string()
        };
        use crate::inspect::coverage::{allows, spoof_note};
        let table = &self.sources.catalog.arches;
        let mut gaps: Vec<String> = report
            .missing()
            .filter(|(_, t)| !allows(&self.options.allow_missing, t))
            .map(|(lib, t)| format!("  {}: {}", strip(lib), report.gap_of(lib, t)))
            .collect();
        gaps.extend(
            report
                .spoofed()
                .filter(|(_, t, _)| !allows(&self.options.allow_spoof, t))
                .map(|(lib, t, n)| format!("  {}: {}", strip(lib), spoof_note(table, t, n))),
        );
        if !gaps.is_empty() || !report.errors.is_empty() {
            let mut table = gaps.join("\n");
            for e in &report.errors {
                table += &format!("\n  unreadable: {e}");
            }
            return Err(StepError::Coverage {
                component: component.into(),
                table: table.trim().to_string(),
            });
        }
        Ok(CoverageRecord::CodeObjects(CodeObjectRecord {
            libraries: report.rows.len(),
            targets: self.plan.targets.clone(),
            missing_allowed: report
                .missing()
                .map(|(lib, t)| (strip(lib), t.clone()))
                .collect(),
            spoof_allowed: Some(
                report
                    .spoofed()
                    .map(|(lib, t, n)| (strip(lib), t.clone(), n.to_string()))
                    .collect(),
            ),
            report,
        }))
    }
}
