//! `.github/workflows/release.yml`, generated from the catalog and runners.toml.
//!
//! A matrix cannot order its entries, so every dependency level is its own job, fed by one
//! output of the plan job (`rocforge plan --format github-matrix`). The number of level jobs is
//! fixed when the workflow is generated: the deepest dependency chain of any release line, plus
//! one, and for each level as many parts as its components need at 256 entries a matrix. A
//! level with nothing to build is skipped through its `if:`; the levels after it still run
//! because every level job uses `always()` and checks the results of all its needs itself.
//!
//! The workflow's text is the template `templates/release.yml.j2`; this module computes what
//! varies (release lines, level jobs, their needs and conditions, runner labels, trusted keys)
//! into a typed context and renders it. Shell steps live in the template as they run, so
//! reading a step there is reading it in release.yml.

use std::collections::BTreeMap;

use crate::template::Delimiters;
use minijinja::Environment;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::plan::render::MATRIX_MAX;

use super::runners::Runners;

pub const WORKFLOW_PATH: &str = ".github/workflows/release.yml";
pub const ACTIONLINT_CONFIG_PATH: &str = ".github/actionlint.yaml";

/// The OCI build cache, one repository per owner.
const CACHE: &str = "oci://ghcr.io/${{ github.repository_owner }}/rocforge-cache";
/// Push to main, a release tag, or a manual run: events whose code a maintainer wrote.
pub const TRUSTED: &str = "((github.event_name == 'push' && (github.ref == 'refs/heads/main' || startsWith(github.ref, 'refs/tags/v'))) || github.event_name == 'workflow_dispatch')";
const UNTRUSTED: &str = "github.event_name == 'pull_request'";
/// A job that runs after skipped jobs: none of its needs failed or was cancelled.
const NEEDS_OK: &str =
    "!contains(needs.*.result, 'failure') && !contains(needs.*.result, 'cancelled')";
// Actions are pinned to commits (a moved tag cannot change what runs with the release key); the
// comment names the release each commit is. Checked against the actions' own repositories.
const CHECKOUT: &str = "actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0";
const UPLOAD: &str = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2";
const DOWNLOAD: &str =
    "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0";
const UPLOAD_PAGES: &str =
    "actions/upload-pages-artifact@56afc609e74202658d3ffba0e8f6dda462b719fa # v3.0.1";
const DEPLOY_PAGES: &str = "actions/deploy-pages@d6db90164ac5ed86f2b6aed7e0febac5b3c0c03e # v4.0.5";
const CACHE_ACTION: &str = "actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830 # v4.3.0";
/// Everything compiled into the rocforge binary: the catalog is embedded, so a recipe edit
/// changes the binary too.
const ROCFORGE_INPUTS: &str = "'Cargo.lock', 'Cargo.toml', 'crates/**', 'src/**', 'recipes/**', 'patches/**', 'containers/**', 'rocforge.lock', 'runners.toml'";
/// The weekly re-sign run. `rocforge package` signs indexes for 30 days: a weekly run leaves
/// three more tries before a missed one matters.
pub const RESIGN_CRON: &str = "23 5 * * 1";
/// The jq program that keeps pull requests off self-hosted runners: the plan's entries for
/// another runner than the hosted one, and everything depending on them (it would not fit a
/// hosted runner either, as it builds what it depends on), are left out and listed in
/// `.skipped`. Input: the github-matrix plan; `$plan`: the JSON plan (for `depends`, which
/// holds build-only dependencies too: a component is built after them all the same).
pub const PR_FILTER: &str = "def grow($deps): . as $s | ([$deps | to_entries[] | select(any(.value[]; . as $d | any($s[]; . == $d))) | .key] + $s | unique) as $n | if ($n | length) == ($s | length) then $s else ($n | grow($deps)) end; ($plan[0].steps | map({key: .component, value: .depends}) | from_entries) as $deps | ([.levels[].matrix.include[] | select(.runner != $hosted) | .component] | unique | grow($deps)) as $skip | .skipped = $skip | .levels |= map(.matrix.include |= map(select(.component as $c | any($skip[]; . == $c) | not)) | select(.matrix.include | length > 0))";

/// What the generator needs to know of one release line.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub image: String,
    /// Components with a `[test]` client, sorted.
    pub tested: Vec<String>,
    /// Dependency level of every component.
    pub levels: BTreeMap<String, usize>,
    /// Per level, the most jobs one of its builds may chain on a hosted runner (absent: one).
    pub rounds: BTreeMap<usize, u32>,
}

impl Line {
    pub fn from_catalog(c: &Catalog) -> Line {
        let mut levels = BTreeMap::new();
        for name in c.recipes.keys() {
            level_of(c, name, &mut levels);
        }
        let mut rounds = BTreeMap::new();
        for (name, r) in &c.recipes {
            let p = crate::plan::render::placement(&r.resources);
            let most = rounds.entry(levels[name]).or_insert(1);
            *most = (*most).max(p.rounds);
        }
        Line {
            rounds,
            name: c.release.name.clone(),
            image: c.release.image.clone(),
            tested: c
                .recipes
                .iter()
                .filter(|(_, r)| r.test.is_some() && !r.tests_apart)
                .map(|(n, _)| n.clone())
                .collect(),
            levels,
        }
    }

    /// Components at each level.
    fn widths(&self) -> Vec<usize> {
        let mut w = Vec::new();
        for &l in self.levels.values() {
            if w.len() <= l {
                w.resize(l + 1, 0);
            }
            w[l] += 1;
        }
        w
    }
}

/// Same rule as the plan: one more than the deepest dependency (the catalog has no cycles).
fn level_of(c: &Catalog, name: &str, memo: &mut BTreeMap<String, usize>) -> usize {
    if let Some(&l) = memo.get(name) {
        return l;
    }
    // Build-only dependencies order the jobs as much as the others: they are built first.
    let deps: Vec<String> = c.recipes[name]
        .all_depends()
        .map(|d| d.to_string())
        .collect();
    let l = deps
        .iter()
        .map(|d| level_of(c, d, memo) + 1)
        .max()
        .unwrap_or(0);
    memo.insert(name.to_string(), l);
    l
}

/// The level jobs: for each dependency level, how many parts (matrices of at most 256
/// entries) it may need. A plan entry is one component, so a level never holds more entries
/// than the catalog has components at that level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub parts: Vec<usize>,
    /// Per level, the jobs its longest hosted build may chain (1: no continuation jobs).
    pub rounds: Vec<u32>,
}

impl Layout {
    pub fn of(lines: &[Line]) -> Layout {
        let mut parts: Vec<usize> = Vec::new();
        for line in lines {
            for (level, width) in line.widths().into_iter().enumerate() {
                if parts.len() <= level {
                    parts.resize(level + 1, 1);
                }
                parts[level] = parts[level].max(width.div_ceil(MATRIX_MAX).max(1));
            }
        }
        if parts.is_empty() {
            parts.push(1);
        }
        let rounds = (0..parts.len())
            .map(|level| {
                lines
                    .iter()
                    .filter_map(|l| l.rounds.get(&level).copied())
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        Layout { parts, rounds }
    }

    /// Every (level, part) slot in order.
    pub fn slots(&self) -> Vec<(usize, usize)> {
        self.parts
            .iter()
            .enumerate()
            .flat_map(|(l, &n)| (0..n).map(move |p| (l, p)))
            .collect()
    }
}

pub fn output_name(level: usize, part: usize) -> String {
    format!("level_{level}_part_{part}")
}

fn build_job_id(prefix: &str, level: usize, part: usize) -> String {
    if part == 0 {
        format!("{prefix}build-{level}")
    } else {
        format!("{prefix}build-{level}-part-{part}")
    }
}

/// The templates, embedded: the binary writes the workflow wherever it runs.
const RELEASE_TEMPLATE: &str = include_str!("templates/release.yml.j2");
const ACTIONLINT_TEMPLATE: &str = include_str!("templates/actionlint.yaml.j2");

pub use crate::template::RenderError;

/// The template environment. GitHub's own `${{ … }}` expressions and bash's `${#array[@]}`
/// fill the workflow, so the template marks its variables `<{ … }>` and its comments
/// `<# … #>`, and keeps Jinja's `{% … %}` for statements (no `{%` occurs in the output).
/// Block lines leave no trace (trim and lstrip), and nothing is escaped: this is YAML with
/// shell in it, each value placed where the template puts it. An undefined name is an error.
fn environment(
    name: &'static str,
    source: &'static str,
) -> Result<Environment<'static>, RenderError> {
    let mut env = crate::template::environment(&[(name, source)], Delimiters::Angle)?;
    for (k, v) in [
        ("TRUSTED", TRUSTED),
        ("UNTRUSTED", UNTRUSTED),
        ("NEEDS_OK", NEEDS_OK),
        ("CACHE", CACHE),
        ("ROCFORGE_INPUTS", ROCFORGE_INPUTS),
        ("RESIGN_CRON", RESIGN_CRON),
        ("PR_FILTER", PR_FILTER),
        ("CHECKOUT", CHECKOUT),
        ("UPLOAD", UPLOAD),
        ("DOWNLOAD", DOWNLOAD),
        ("UPLOAD_PAGES", UPLOAD_PAGES),
        ("DEPLOY_PAGES", DEPLOY_PAGES),
        ("CACHE_ACTION", CACHE_ACTION),
    ] {
        env.add_global(k, v);
    }
    Ok(env)
}

fn render<C: Serialize>(
    name: &'static str,
    source: &'static str,
    ctx: &C,
) -> Result<String, RenderError> {
    let env = environment(name, source)?;
    crate::template::render(&env, name, ctx)
}

/// `.github/actionlint.yaml`: the self-hosted labels runners.toml names.
pub fn actionlint_config(runners: &Runners) -> Result<String, RenderError> {
    #[derive(Serialize)]
    struct Ctx<'a> {
        labels: Vec<&'a str>,
    }
    let labels = runners.self_hosted_labels();
    render("actionlint.yaml", ACTIONLINT_TEMPLATE, &Ctx { labels })
}

/// What the release template is given: everything in the workflow that depends on the catalog
/// and runners.toml, computed here; the rest is the template's text.
#[derive(Debug, Serialize)]
struct Workflow<'a> {
    /// The release lines, oldest first, and the newest one's name (the dispatch default).
    lines: Vec<LineContext<'a>>,
    /// The lines whose builder image a registry holds: the images job builds and pushes them.
    /// A `localhost/` image (made from a distribution's packages, `[image-base]`) is made on
    /// each build runner by `rocforge build` itself, as on a laptop, and never pushed.
    pushed: Vec<LineContext<'a>>,
    newest: &'a str,
    /// The GitHub-hosted runner label.
    hosted: &'a str,
    /// runners.toml's `[cache] trusted-keys`.
    trusted_keys: Vec<&'a str>,
    /// The plan job's outputs, one per (level, part) slot, and the same slots as `level:part`.
    outputs: Vec<String>,
    slots: Vec<String>,
    /// GPU targets runners.toml lists as registered.
    registered_gpus: Vec<&'a str>,
    /// Build runner labels runners.toml lists as not registered yet.
    waiting: Vec<&'a str>,
    /// The level jobs: the trusted ones, then the pull-request ones.
    builds: Vec<BuildJob>,
    gates: Vec<GateJob>,
    tests: Vec<TestJob<'a>>,
    /// The trusted level jobs (what test and publish wait for) and the test jobs (report's).
    trusted_builds: Vec<String>,
    test_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
struct LineContext<'a> {
    name: &'a str,
    image: &'a str,
}

/// One level job (one part of one dependency level's matrix), or one of its continuations.
#[derive(Debug, Serialize)]
struct BuildJob {
    id: String,
    /// Trusted events push to the cache; pull requests only read it and never get a secret.
    trusted: bool,
    level: usize,
    part: usize,
    /// The plan output holding its matrix.
    output: String,
    /// The matrix expression: the plan's output, or for a continuation its gate's (the
    /// entries the job before left unfinished).
    matrix: String,
    needs: Vec<String>,
    condition: String,
    runs_on: String,
    timeout: String,
    /// 0 for the level job; 1… for the jobs that continue its builds from their checkpoints.
    round: u32,
    /// No job continues this one: a build still unfinished here fails.
    last: bool,
    /// `--time-limit` on the hosted runner (where a job limit applies).
    time_limit: String,
}

/// Between two rounds of a level: which of its builds stopped at the time limit, as the next
/// round's matrix (empty when every one finished, so the next round is skipped).
#[derive(Debug, Serialize)]
struct GateJob {
    id: String,
    needs: Vec<String>,
    condition: String,
    output: String,
    /// The unfinished-marker artifacts of the round before: `unfinished-<level>-<part>-<round>-*`.
    markers: String,
}

/// One GPU target's test job.
#[derive(Debug, Serialize)]
struct TestJob<'a> {
    id: String,
    target: &'a str,
    timeout: u64,
    /// The newest line's tested components: the job's matrix.
    components: &'a [String],
    condition: String,
}

/// The workflow for these release lines (oldest first, as the catalog lists them).
pub fn workflow(lines: &[Line], runners: &Runners) -> Result<String, RenderError> {
    let layout = Layout::of(lines);
    let slots = layout.slots();
    let newest = lines.last().map(|l| l.name.as_str()).unwrap_or("");
    let pushed: Vec<LineContext> = lines
        .iter()
        .filter(|l| !is_local_image(&l.image))
        .map(|l| LineContext {
            name: &l.name,
            image: &l.image,
        })
        .collect();
    let (trusted_builds, gates) = build_jobs(runners, &layout, true, !pushed.is_empty());
    let (pr_builds, _) = build_jobs(runners, &layout, false, false);
    let trusted_ids: Vec<String> = trusted_builds
        .iter()
        .map(|b| b.id.clone())
        .chain(gates.iter().map(|g| g.id.clone()))
        .collect();
    let tests = test_jobs(lines, runners, newest);
    let ctx = Workflow {
        lines: lines
            .iter()
            .map(|l| LineContext {
                name: &l.name,
                image: &l.image,
            })
            .collect(),
        pushed,
        newest,
        hosted: &runners.hosted.label,
        trusted_keys: runners
            .cache
            .trusted_keys
            .iter()
            .map(String::as_str)
            .collect(),
        outputs: slots.iter().map(|&(l, p)| output_name(l, p)).collect(),
        slots: slots.iter().map(|(l, p)| format!("{l}:{p}")).collect(),
        registered_gpus: runners
            .registered_gpus()
            .map(|g| g.target.as_str())
            .collect(),
        waiting: runners
            .build
            .iter()
            .filter(|b| !b.registered)
            .map(|b| b.label.as_str())
            .collect(),
        test_ids: tests.iter().map(|t| t.id.clone()).collect(),
        builds: trusted_builds.into_iter().chain(pr_builds).collect(),
        gates,
        tests,
        trusted_builds: trusted_ids,
    };
    render("release.yml", RELEASE_TEMPLATE, &ctx)
}

/// An image no registry holds: `localhost/…` is what podman names an image made on the machine.
pub fn is_local_image(image: &str) -> bool {
    image.starts_with("localhost/")
}

/// One job per level and part, each needing the plan and every level job before it (and, when
/// trusted and a line's builder image is pushed, the images job). A trusted level whose hosted
/// builds may outlast a job gets continuation rounds: a gate listing what the round before left
/// unfinished (it stopped at `--time-limit` and pushed a checkpoint), then a job that continues
/// just those from their checkpoints.
fn build_jobs(
    runners: &Runners,
    layout: &Layout,
    trusted: bool,
    images: bool,
) -> (Vec<BuildJob>, Vec<GateJob>) {
    let prefix = if trusted { "" } else { "pr-" };
    let hosted = &runners.hosted.label;
    // The longest build runner's limit, at least the 6 hours a hosted job may run.
    let longest = runners
        .build
        .iter()
        .map(|b| b.hours)
        .fold(6.0_f64, f64::max);
    let time_limit = runners.hosted_time_limit();
    let mut jobs: Vec<BuildJob> = Vec::new();
    let mut gates: Vec<GateJob> = Vec::new();
    for (level, part) in layout.slots() {
        let output = output_name(level, part);
        let mut needs = vec!["plan".to_string()];
        if trusted && images {
            needs.push("images".into());
        }
        needs.extend(jobs.iter().map(|j| j.id.clone()));
        needs.extend(gates.iter().map(|g| g.id.clone()));
        let event = if trusted { TRUSTED } else { UNTRUSTED };
        let condition = format!(
            "always() && {event} && needs.plan.result == 'success' && needs.plan.outputs.{output} != '' && {NEEDS_OK}"
        );
        let (runs_on, timeout) = if trusted {
            (
                "${{ matrix.runner }}".to_string(),
                format!(
                    "${{{{ matrix.runner == '{hosted}' && 360 || {} }}}}",
                    (longest * 60.0).round() as u64
                ),
            )
        } else {
            // Never a self-hosted label, whatever the matrix says: the plan job has already
            // left out what needs one (PR_FILTER), and this is the guard if it had not.
            (hosted.clone(), "360".to_string())
        };
        let id = build_job_id(prefix, level, part);
        let rounds = if trusted {
            layout.rounds.get(level).copied().unwrap_or(1)
        } else {
            1
        };
        jobs.push(BuildJob {
            id: id.clone(),
            trusted,
            level,
            part,
            matrix: format!("needs.plan.outputs.{output}"),
            output: output.clone(),
            needs: needs.clone(),
            condition,
            runs_on: runs_on.clone(),
            timeout: timeout.clone(),
            round: 0,
            last: rounds == 1,
            time_limit: time_limit.clone(),
        });
        let mut before = id;
        for round in 1..rounds {
            let gate = format!("{before}-unfinished");
            let mut gate_needs = needs.clone();
            gate_needs.push(before.clone());
            gates.push(GateJob {
                id: gate.clone(),
                needs: gate_needs.clone(),
                condition: format!(
                    "always() && {event} && needs.plan.result == 'success' && needs.plan.outputs.{output} != '' && {NEEDS_OK}"
                ),
                output: output.clone(),
                markers: format!("unfinished-{level}-{part}-{}-*", round - 1),
            });
            let mut continue_needs = gate_needs;
            continue_needs.push(gate.clone());
            let id = format!("{}-round-{}", build_job_id(prefix, level, part), round + 1);
            jobs.push(BuildJob {
                id: id.clone(),
                trusted,
                level,
                part,
                matrix: format!("needs.{gate}.outputs.matrix"),
                output: output.clone(),
                needs: continue_needs,
                condition: format!(
                    "always() && {event} && needs.plan.result == 'success' && needs.{gate}.outputs.matrix != '' && {NEEDS_OK}"
                ),
                runs_on: runs_on.clone(),
                timeout: timeout.clone(),
                round,
                last: round + 1 == rounds,
                time_limit: time_limit.clone(),
            });
            before = id;
        }
    }
    (jobs, gates)
}

/// One job per GPU label of runners.toml; each runs only when the plan found a runner for it
/// (runners.toml's `registered`, or the GitHub API).
fn test_jobs<'a>(lines: &'a [Line], runners: &'a Runners, newest: &str) -> Vec<TestJob<'a>> {
    let components: &[String] = lines
        .iter()
        .find(|l| l.name == newest)
        .map(|l| l.tested.as_slice())
        .unwrap_or_default();
    runners
        .gpu
        .iter()
        .map(|gpu| {
            let t = gpu.target.as_str();
            TestJob {
                id: format!("test-{t}"),
                target: t,
                timeout: (gpu.hours * 60.0).round() as u64,
                components,
                condition: format!(
                    "always() && {TRUSTED} && needs.plan.result == 'success' && {NEEDS_OK} && contains(format(',{{0}},', needs.plan.outputs.gpu_ready), ',{t},')"
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One job's text: from its ID line to the blank line after it.
    fn job_text(wf: &str, id: &str) -> String {
        let start = wf
            .find(&format!("\n  {id}:\n"))
            .unwrap_or_else(|| panic!("no job {id}"));
        let rest = &wf[start + 1..];
        rest[..rest.find("\n\n").unwrap_or(rest.len())].to_string()
    }

    fn line(name: &str, levels: &[(&str, usize)]) -> Line {
        Line {
            name: name.into(),
            image: format!("ghcr.io/x/builder:{name}"),
            tested: vec!["b".into()],
            levels: levels.iter().map(|(n, l)| (n.to_string(), *l)).collect(),
            rounds: BTreeMap::new(),
        }
    }

    #[test]
    fn a_build_only_dependency_orders_the_levels() {
        let c = Catalog::load(crate::catalog::CatalogRoot::Embedded, Some("rocm-6.4.4")).unwrap();
        assert!(c.recipes["rocblas"].is_build_only("tensile"));
        let l = Line::from_catalog(&c);
        assert_eq!(l.levels["rocblas"], l.levels["tensile"] + 1);
    }

    #[test]
    fn layout_has_one_job_per_level_and_splits_wide_levels() {
        let small = line("l-1", &[("a", 0), ("b", 1), ("c", 1), ("d", 3)]);
        // Level 2 is empty in this line but still gets a job (skipped at run time).
        assert_eq!(
            Layout::of(std::slice::from_ref(&small)).parts,
            vec![1, 1, 1, 1]
        );
        let mut wide = line("l-2", &[("top", 1)]);
        for i in 0..300 {
            wide.levels.insert(format!("leaf-{i}"), 0);
        }
        let layout = Layout::of(&[small, wide]);
        assert_eq!(layout.parts, vec![2, 1, 1, 1]);
        assert_eq!(layout.slots(), vec![(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)]);
        let exactly = line("l-3", &(0..256).map(|_| ("x", 0)).collect::<Vec<_>>());
        // 256 entries of one name collapse to one component; build 256 distinct ones.
        let mut exact = exactly.clone();
        exact.levels = (0..256).map(|i| (format!("c{i}"), 0)).collect();
        assert_eq!(Layout::of(&[exact]).parts, vec![1]);
        assert_eq!(Layout::of(&[]).parts, vec![1]);
    }

    #[test]
    fn a_localhost_builder_image_is_made_on_the_runner_not_pushed() {
        let mut local = line("debian-1", &[("a", 0), ("b", 1)]);
        local.image = "localhost/rocforge/builder:debian-1".into();
        let wf = workflow(std::slice::from_ref(&local), &Runners::embedded()).unwrap();
        assert!(!wf.contains("\n  images:\n"), "{wf}");
        assert!(!wf.contains("localhost/rocforge/builder"), "{wf}");
        assert!(job_text(&wf, "build-1").contains("needs: [plan, build-0]"));
        // Beside a line whose image a registry holds: the images job builds that one alone.
        let both = workflow(&[local, line("l-2", &[("a", 0)])], &Runners::embedded()).unwrap();
        let images = job_text(&both, "images");
        assert!(images.contains("image: ghcr.io/x/builder:l-2"), "{images}");
        assert!(!images.contains("debian-1"), "{images}");
        assert!(job_text(&both, "build-1").contains("needs: [plan, images, build-0]"));
    }

    #[test]
    fn later_levels_run_after_skipped_ones() {
        let l = line("l-1", &[("a", 0), ("b", 1), ("c", 2)]);
        let wf = workflow(&[l], &Runners::embedded()).unwrap();
        let job = |id: &str| job_text(&wf, id);
        let b2 = job("build-2");
        assert!(
            b2.contains("needs: [plan, images, build-0, build-1]"),
            "{b2}"
        );
        assert!(b2.contains("if: always() && "), "{b2}");
        assert!(
            b2.contains("needs.plan.outputs.level_2_part_0 != ''"),
            "{b2}"
        );
        assert!(b2.contains("!contains(needs.*.result, 'failure')"), "{b2}");
        assert!(b2.contains("packages: write"), "{b2}");
        let pr = job("pr-build-2");
        assert!(pr.contains("needs: [plan, pr-build-0, pr-build-1]"), "{pr}");
        assert!(pr.contains("github.event_name == 'pull_request'"), "{pr}");
        assert!(
            pr.contains("packages: read") && !pr.contains("packages: write"),
            "{pr}"
        );
        assert!(!pr.contains("secrets."), "{pr}");
        // Every output the level jobs read is set by the plan job.
        for o in ["level_0_part_0", "level_1_part_0", "level_2_part_0"] {
            assert!(wf.contains(&format!("{o}: ${{{{ steps.plan.outputs.{o} }}}}")));
        }
        assert!(wf.contains("for slot in 0:0 1:0 2:0; do"));
        // The signing key reaches the publish and resign jobs only, both in the release
        // environment.
        let key = "secrets.ROCFORGE_SIGNING_KEY";
        assert_eq!(
            wf.matches(key).count(),
            job("publish").matches(key).count() + job("resign").matches(key).count()
        );
        for id in ["publish", "resign"] {
            let j = job(id);
            assert!(j.contains("secrets.ROCFORGE_SIGNING_KEY"), "{id}");
            assert!(j.contains("\n    environment: release\n"), "{id}");
        }
        // Every job has a timeout and its own permissions.
        let jobs = wf.split("\njobs:\n").nth(1).unwrap();
        let ids: Vec<&str> = jobs
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
            .map(|l| l.trim().trim_end_matches(':'))
            .collect();
        assert!(ids.len() > 10, "{ids:?}");
        for id in ids {
            let j = job(id);
            assert!(j.contains("\n    timeout-minutes: "), "{id} has no timeout");
            assert!(
                j.contains("\n    permissions:\n"),
                "{id} has no permissions"
            );
        }
        assert!(wf.contains("\npermissions: {}\n"));
    }

    #[test]
    fn gpu_jobs_run_only_where_the_plan_found_a_runner() {
        let l = line("l-1", &[("a", 0), ("b", 1)]);
        let mut r = Runners::embedded();
        r.gpu.iter_mut().for_each(|g| g.registered = false);
        let wf = workflow(std::slice::from_ref(&l), &r).unwrap();
        // Every GPU label gets a job; whether it runs is decided at run time by the plan.
        let target = r.gpu[0].target.clone();
        assert!(wf.contains(&format!("runs-on: [self-hosted, linux, {target}]")));
        assert!(
            wf.contains("registered=\"  \""),
            "none registered in runners.toml"
        );
        assert!(wf.contains("untested (no runner for $arch according to $source)"));
        assert!(wf.contains("rocforge ci runners --repo \"$REPO\" --format json"));
        assert!(wf.contains("secrets.ROCFORGE_RUNNERS_TOKEN"));
        let test = job_text(&wf, &format!("test-{target}"));
        assert!(test.contains(TRUSTED), "tests run for trusted events only");
        assert!(!test.contains("pull_request"));
        assert!(test.contains(&format!(
            "contains(format(',{{0}},', needs.plan.outputs.gpu_ready), ',{target},')"
        )));
        r.gpu[0].registered = true;
        let wf = workflow(&[l], &r).unwrap();
        assert!(wf.contains(&format!("registered=\" {target} \"")));
        assert!(wf.contains(&format!("needs: [plan, test-{target}")));
        // The runner-listing token reaches only trusted runs.
        let plan = job_text(&wf, "plan");
        assert!(plan.contains(&format!(
            "RUNNERS_TOKEN: ${{{{ {TRUSTED} && secrets.ROCFORGE_RUNNERS_TOKEN || '' }}}}"
        )));
    }
}
