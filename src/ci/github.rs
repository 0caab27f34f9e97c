//! `.github/workflows/release.yml`, generated from the catalog and runners.toml.
//!
//! A matrix cannot order its entries, so every dependency level is its own job, fed by one
//! output of the plan job (`rocforge plan --format github-matrix`). The number of level jobs is
//! fixed when the workflow is generated: the deepest dependency chain of any release line, plus
//! one, and for each level as many parts as its components need at 256 entries a matrix. A
//! level with nothing to build is skipped through its `if:`; the levels after it still run
//! because every level job uses `always()` and checks the results of all its needs itself.

use std::collections::BTreeMap;
use std::fmt::Write;

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
/// rocforge's registry client (cache pulls and pushes, OCI publishing) takes these.
const REGISTRY_USER: (&str, &str) = ("ROCFORGE_REGISTRY_USER", "${{ github.actor }}");
const REGISTRY_PASSWORD: (&str, &str) = ("ROCFORGE_REGISTRY_PASSWORD", "${{ github.token }}");
const UPLOAD: &str = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02 # v4.6.2";
const DOWNLOAD: &str =
    "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093 # v4.3.0";
const UPLOAD_PAGES: &str =
    "actions/upload-pages-artifact@56afc609e74202658d3ffba0e8f6dda462b719fa # v3.0.1";
const DEPLOY_PAGES: &str = "actions/deploy-pages@d6db90164ac5ed86f2b6aed7e0febac5b3c0c03e # v4.0.5";
const CACHE_ACTION: &str = "actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830 # v4.3.0";
/// Everything compiled into the rocforge binary: the catalog is embedded, so a recipe edit
/// changes the binary too.
const ROCFORGE_INPUTS: &str = "'Cargo.lock', 'Cargo.toml', 'build.rs', 'src/**', 'recipes/**', 'patches/**', 'rocforge.lock', 'runners.toml'";
/// The weekly re-sign run. `rocforge package` signs indexes for 30 days: a weekly run leaves
/// three more tries before a missed one matters.
pub const RESIGN_CRON: &str = "23 5 * * 1";
/// The jq program that keeps pull requests off self-hosted runners: the plan's entries for
/// another runner than the hosted one, and everything depending on them (it would not fit a
/// hosted runner either, as it builds what it depends on), are left out and listed in
/// `.skipped`. Input: the github-matrix plan; `$plan`: the JSON plan (for `depends`).
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
}

impl Line {
    pub fn from_catalog(c: &Catalog) -> Line {
        let mut levels = BTreeMap::new();
        for name in c.recipes.keys() {
            level_of(c, name, &mut levels);
        }
        Line {
            name: c.release.name.clone(),
            image: c.release.image.clone(),
            tested: c
                .recipes
                .iter()
                .filter(|(_, r)| r.test.is_some())
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
/// The start of every step that signs: the key from the release environment's secret into a
/// file only the job reads, removed when the step ends, or a clear error when it is not set.
const SIGNING_KEY_FILE: &str = "\
set -euo pipefail
if [ -z \"$SIGNING_KEY\" ]; then
  echo \"::error::the ROCFORGE_SIGNING_KEY secret is not set in the release environment (docs/ci.md)\"
  exit 1
fi
key=\"$RUNNER_TEMP/rocforge.key\"
trap 'rm -f \"$key\"' EXIT
(umask 077 && printf '%s\\n' \"$SIGNING_KEY\" > \"$key\")
";

fn level_of(c: &Catalog, name: &str, memo: &mut BTreeMap<String, usize>) -> usize {
    if let Some(&l) = memo.get(name) {
        return l;
    }
    let deps: Vec<String> = c.recipes[name]
        .depends
        .iter()
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
        Layout { parts }
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

/// `.github/actionlint.yaml`: the self-hosted labels runners.toml names.
pub fn actionlint_config(runners: &Runners) -> String {
    let mut y = String::from(
        "# Generated by `rocforge ci github` from runners.toml. Do not edit.\nself-hosted-runner:\n  labels:\n",
    );
    for l in runners.self_hosted_labels() {
        let _ = writeln!(y, "    - {l}");
    }
    y
}

struct Y(String);

impl Y {
    fn line(&mut self, indent: usize, text: &str) {
        if text.is_empty() {
            self.0.push('\n');
        } else {
            let _ = writeln!(self.0, "{:indent$}{text}", "");
        }
    }

    /// A `run: |` block at `indent` (the key's indentation).
    fn run(&mut self, indent: usize, script: &str) {
        self.line(indent, "run: |");
        for l in script.lines() {
            self.line(indent + 2, l);
        }
    }

    fn env(&mut self, indent: usize, vars: &[(&str, &str)]) {
        if vars.is_empty() {
            return;
        }
        self.line(indent, "env:");
        for (k, v) in vars {
            self.line(indent + 2, &format!("{k}: {v}"));
        }
    }

    fn permissions(&mut self, scopes: &[(&str, &str)]) {
        self.line(4, "permissions:");
        for (k, v) in scopes {
            self.line(6, &format!("{k}: {v}"));
        }
    }

    fn checkout(&mut self) {
        self.line(6, &format!("- uses: {CHECKOUT}"));
        self.line(8, "with:");
        self.line(10, "persist-credentials: false");
    }

    /// The rocforge binary the plan job built, on PATH.
    fn rocforge(&mut self) {
        self.line(6, &format!("- uses: {DOWNLOAD}"));
        self.line(8, "with:");
        self.line(10, "name: rocforge");
        self.line(10, "path: bin");
        self.line(6, "- name: rocforge on PATH");
        self.run(
            8,
            "chmod +x bin/rocforge\necho \"$PWD/bin\" >> \"$GITHUB_PATH\"",
        );
    }

    /// rocforge built once per change of its sources: restored from the Actions cache when
    /// an earlier run built the same sources, else built here. Caches written by pull-request
    /// runs are scoped to their pull request, so a trusted run never restores one of them.
    fn rocforge_build(&mut self) {
        self.line(
            6,
            "- name: rocforge from the Actions cache (keyed on its sources)",
        );
        self.line(8, "id: rocforge-cache");
        self.line(8, &format!("uses: {CACHE_ACTION}"));
        self.line(8, "with:");
        self.line(10, "path: target/release/rocforge");
        self.line(
            10,
            &format!("key: rocforge-${{{{ runner.os }}}}-${{{{ hashFiles({ROCFORGE_INPUTS}) }}}}"),
        );
        self.line(6, "- name: Build rocforge");
        self.line(8, "if: steps.rocforge-cache.outputs.cache-hit != 'true'");
        self.run(8, "cargo build --release --locked");
    }

    /// Pulls accept cache entries signed by runners.toml's `[cache] trusted-keys` and, with
    /// `run_keys`, by the keys this run's earlier build jobs made for themselves (the
    /// `cache-pub-*` artifacts): without a configured cache key, each trusted build job signs
    /// its pushes with a key of its own, so later jobs of the same run reuse what it built.
    fn trust(&mut self, keys: &[String], run_keys: bool) {
        if run_keys {
            self.line(6, &format!("- uses: {DOWNLOAD}"));
            self.line(8, "with:");
            self.line(10, "pattern: cache-pub-*");
            self.line(10, "path: cache-pubs");
            self.line(10, "merge-multiple: true");
        }
        self.line(6, "- name: Trust the cache's signing keys");
        let list: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        let mut s = String::from("set -euo pipefail\n");
        let _ = writeln!(
            s,
            "# runners.toml [cache] trusted-keys\nkeys=({})",
            list.join(" ")
        );
        if run_keys {
            s += "# The public halves of this run's own build-job keys (artifacts of this run only)\n";
            s += "for f in cache-pubs/*.pub; do\n";
            s += "  [ -e \"$f\" ] || continue\n";
            s += "  k=$(head -c 200 \"$f\")\n";
            s += "  if [[ \"$k\" =~ ^RW[A-Za-z0-9+/=]{54}$ ]]; then keys+=(\"$k\"); fi\n";
            s += "done\n";
        }
        s += "if [ ${#keys[@]} -eq 0 ]; then\n";
        s += "  echo \"::notice::no cache signing key is trusted yet: every entry this job needs is built\"\n";
        s += "  exit 0\n";
        s += "fi\n";
        s += "list=$(printf '\"%s\", ' \"${keys[@]}\")\n";
        s += "printf '[trust]\\nkeys = [%s]\\n' \"${list%, }\" > \"$RUNNER_TEMP/rocforge.toml\"\n";
        s += "echo \"ROCFORGE_CONFIG=$RUNNER_TEMP/rocforge.toml\" >> \"$GITHUB_ENV\"\n";
        self.run(8, &s);
    }

    fn login(&mut self, why: &str) {
        self.line(6, &format!("- name: Log in to ghcr.io ({why})"));
        self.env(
            8,
            &[
                ("ACTOR", "${{ github.actor }}"),
                ("TOKEN", "${{ github.token }}"),
            ],
        );
        self.run(
            8,
            "printf '%s\\n' \"$TOKEN\" | podman login ghcr.io --username \"$ACTOR\" --password-stdin",
        );
    }
}

/// The workflow for these release lines (oldest first, as the catalog lists them).
pub fn workflow(lines: &[Line], runners: &Runners) -> String {
    let layout = Layout::of(lines);
    let slots = layout.slots();
    let newest = lines.last().map(|l| l.name.as_str()).unwrap_or("");
    let mut y = Y(String::new());
    header(&mut y, lines, newest);
    plan_job(&mut y, lines, runners, &slots);
    images_job(&mut y, lines);
    let trusted_builds = build_jobs(&mut y, runners, &slots, true);
    build_jobs(&mut y, runners, &slots, false);
    let tests = test_jobs(&mut y, lines, runners, newest, &trusted_builds);
    report_job(&mut y, &tests);
    publish_jobs(&mut y, runners, &trusted_builds);
    resign_job(&mut y);
    y.0
}

fn header(y: &mut Y, lines: &[Line], newest: &str) {
    y.line(
        0,
        "# Generated by `rocforge ci github` from the catalog and runners.toml. Do not edit: change",
    );
    y.line(
        0,
        "# the recipes, runners.toml or src/ci/github.rs and run `rocforge ci github`. CI fails when",
    );
    y.line(
        0,
        "# this file differs from the generated one (`rocforge ci github --check`). See docs/ci.md.",
    );
    y.line(0, "name: release");
    y.line(0, "on:");
    y.line(2, "push:");
    y.line(4, "branches: [main]");
    y.line(4, "tags: [\"v*\"]");
    y.line(2, "pull_request:");
    y.line(4, "paths:");
    for p in [
        "recipes/**",
        "patches/**",
        "containers/**",
        "runners.toml",
        "rocforge.lock",
        ".github/workflows/release.yml",
    ] {
        y.line(6, &format!("- \"{p}\""));
    }
    y.line(2, "workflow_dispatch:");
    y.line(4, "inputs:");
    y.line(6, "release:");
    y.line(8, "description: Release line");
    y.line(8, "type: choice");
    y.line(8, &format!("default: {newest}"));
    y.line(8, "options:");
    for l in lines.iter().rev() {
        y.line(10, &format!("- {}", l.name));
    }
    y.line(6, "targets:");
    y.line(
        8,
        "description: GPU targets, a comma list such as gfx90c,gfx902 (empty for the release line's)",
    );
    y.line(8, "type: string");
    y.line(8, "default: \"\"");
    // Published indexes expire: the resign job signs them again before they do.
    y.line(2, "schedule:");
    y.line(4, &format!("- cron: \"{RESIGN_CRON}\""));
    y.line(0, "permissions: {}");
    y.line(0, "concurrency:");
    y.line(2, "group: release-${{ github.ref }}");
    y.line(
        2,
        "cancel-in-progress: ${{ github.event_name == 'pull_request' }}",
    );
    y.line(0, "env:");
    y.line(2, &format!("CACHE: {CACHE}"));
    y.line(0, "jobs:");
}

fn plan_job(y: &mut Y, lines: &[Line], runners: &Runners, slots: &[(usize, usize)]) {
    y.line(2, "plan:");
    // The scheduled run only re-signs (resign job); every other job follows the plan.
    y.line(4, "if: github.event_name != 'schedule'");
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 45");
    y.permissions(&[("contents", "read")]);
    y.line(4, "outputs:");
    for o in ["release", "targets", "gpu_ready", "gpu_source"] {
        y.line(6, &format!("{o}: ${{{{ steps.plan.outputs.{o} }}}}"));
    }
    for &(l, p) in slots {
        let o = output_name(l, p);
        y.line(6, &format!("{o}: ${{{{ steps.plan.outputs.{o} }}}}"));
    }
    y.line(4, "steps:");
    y.checkout();
    y.rocforge_build();
    y.line(6, &format!("- uses: {UPLOAD}"));
    y.line(8, "with:");
    y.line(10, "name: rocforge");
    y.line(10, "path: target/release/rocforge");
    y.line(10, "if-no-files-found: error");
    y.line(10, "retention-days: 7");
    y.line(6, "- name: Plan, one matrix per dependency level");
    y.line(8, "id: plan");
    y.env(
        8,
        &[
            ("RELEASE", "${{ inputs.release }}"),
            ("TARGETS", "${{ inputs.targets }}"),
            ("TRUSTED", &format!("${{{{ {TRUSTED} }}}}")),
            ("REPO", "${{ github.repository }}"),
            ("HOSTED", &runners.hosted.label),
            // Only trusted runs see the token that lists runners (docs/ci.md).
            (
                "RUNNERS_TOKEN",
                &format!("${{{{ {TRUSTED} && secrets.ROCFORGE_RUNNERS_TOKEN || '' }}}}"),
            ),
        ],
    );
    let slot_list: Vec<String> = slots.iter().map(|(l, p)| format!("{l}:{p}")).collect();
    let registered: Vec<&str> = runners
        .registered_gpus()
        .map(|g| g.target.as_str())
        .collect();
    let unregistered_build: Vec<&str> = runners
        .build
        .iter()
        .filter(|b| !b.registered)
        .map(|b| b.label.as_str())
        .collect();
    let mut s = String::new();
    s += "set -euo pipefail\n";
    s += "args=()\n";
    s += "if [ -n \"${RELEASE:-}\" ]; then args+=(--release \"$RELEASE\"); fi\n";
    s += "if [ -n \"${TARGETS:-}\" ]; then args+=(--arch \"$TARGETS\"); fi\n";
    s += "target/release/rocforge \"${args[@]}\" --locked plan --format github-matrix > matrix.json\n";
    s += "target/release/rocforge \"${args[@]}\" --locked plan --format json > plan.json\n";
    s += "skipped=\"\"\n";
    s += "if [ \"$TRUSTED\" != true ]; then\n";
    s += "  # Pull requests never reach a self-hosted runner: what the plan sends to one, and what\n";
    s += "  # depends on it, is left out of their build jobs (rocforge ci github, PR_FILTER).\n";
    let _ = writeln!(
        s,
        "  jq --arg hosted \"$HOSTED\" --slurpfile plan plan.json '{PR_FILTER}' matrix.json > matrix.pr.json"
    );
    s += "  mv matrix.pr.json matrix.json\n";
    s += "  skipped=$(jq -r '.skipped | join(\", \")' matrix.json)\n";
    s += "fi\n";
    s += "release=$(jq -r .release matrix.json)\n";
    s += "targets=$(jq -r '.targets | join(\",\")' plan.json)\n";
    s += "echo \"release=$release\" >> \"$GITHUB_OUTPUT\"\n";
    s += "echo \"targets=$targets\" >> \"$GITHUB_OUTPUT\"\n";
    s +=
        "# GPU targets whose test jobs run: runners.toml's registered labels, or the runners the\n";
    s += "# GitHub API reports online when ROCFORGE_RUNNERS_TOKEN is set (rocforge ci runners).\n";
    let _ = writeln!(s, "registered=\" {} \"", registered.join(" "));
    s += "source=runners.toml\n";
    s += "if [ -n \"${RUNNERS_TOKEN:-}\" ]; then\n";
    s += "  if api=$(ROCFORGE_RUNNERS_TOKEN=\"$RUNNERS_TOKEN\" target/release/rocforge ci runners --repo \"$REPO\" --format json); then\n";
    s += "    registered=\" $(jq -r '.gpu_ready | join(\" \")' <<<\"$api\") \"\n";
    s += "    source=\"the GitHub API\"\n";
    s += "  else\n";
    s += "    echo \"::warning::listing the repository's runners failed: runners.toml decides\"\n";
    s += "  fi\n";
    s += "fi\n";
    s += "ready=\"\"\n";
    s += "if [ \"$TRUSTED\" = true ]; then\n";
    s += "  for t in ${targets//,/ }; do\n";
    s += "    arch=${t%%:*}\n";
    s += "    if [[ \"$registered\" == *\" $arch \"* ]]; then ready=\"${ready:+$ready,}$arch\"; fi\n";
    s += "  done\n";
    s += "fi\n";
    s += "echo \"gpu_ready=$ready\" >> \"$GITHUB_OUTPUT\"\n";
    s += "echo \"gpu_source=$source\" >> \"$GITHUB_OUTPUT\"\n";
    s +=
        "# One output per level job of this workflow; empty when the level has nothing to build.\n";
    s += "used=0\n";
    let _ = writeln!(s, "for slot in {}; do", slot_list.join(" "));
    s += "  level=${slot%:*}\n";
    s += "  part=${slot#*:}\n";
    s += "  matrix=$(jq -c --argjson l \"$level\" --argjson p \"$part\" \\\n";
    s += "    'first(.levels[] | select(.level == $l and .part == $p) | .matrix) // empty' matrix.json)\n";
    s += "  echo \"level_${level}_part_${part}=$matrix\" >> \"$GITHUB_OUTPUT\"\n";
    s += "  if [ -n \"$matrix\" ]; then used=$((used + 1)); fi\n";
    s += "done\n";
    s += "if [ \"$used\" -ne \"$(jq '.levels | length' matrix.json)\" ]; then\n";
    s += "  echo \"::error::the plan has more levels or parts than this workflow has jobs: run \\`rocforge ci github\\` and commit the result\"\n";
    s += "  exit 1\n";
    s += "fi\n";
    if !unregistered_build.is_empty() {
        s += "# Build runners runners.toml lists as not registered yet: their jobs would wait.\n";
        let _ = writeln!(s, "waiting=({})", unregistered_build.join(" "));
        s += "for label in \"${waiting[@]}\"; do\n";
        s += "  jq -r --arg r \"$label\" '.levels[].matrix.include[] | select(.runner == $r) | .component' matrix.json |\n";
        s += "    while read -r c; do\n";
        s += "      echo \"::warning::$c needs a '$label' runner, which runners.toml lists as not registered: its job waits until one is (docs/ci.md)\"\n";
        s += "    done\n";
        s += "done\n";
    }
    s += "{\n";
    s += "  echo \"## Plan for $release ($targets)\"\n";
    s += "  echo\n";
    s += "  echo '| level | component | runner |'\n";
    s += "  echo '| --- | --- | --- |'\n";
    s += "  jq -r '.levels[] | .level as $l | .matrix.include[] | \"| \\($l) | \\(.component) | \\(.runner) |\"' matrix.json\n";
    s += "  echo\n";
    s += "  if [ -n \"$skipped\" ]; then\n";
    s += "    echo \"Not built for a pull request (a self-hosted runner's, or depending on one): $skipped\"\n";
    s += "    echo\n";
    s += "  fi\n";
    s += "  echo '### Hardware tests'\n";
    s += "  echo\n";
    s += "  for t in ${targets//,/ }; do\n";
    s += "    arch=${t%%:*}\n";
    s += "    if [ \"$TRUSTED\" != true ]; then\n";
    s += "      echo \"- $t: untested (pull requests never run on hardware runners)\"\n";
    s += "    elif [[ \",$ready,\" == *\",$arch,\"* ]]; then\n";
    s += "      echo \"- $t: tested on [self-hosted, linux, $arch]\"\n";
    s += "    else\n";
    s += "      echo \"- $t: untested (no runner for $arch according to $source)\"\n";
    s += "    fi\n";
    s += "  done\n";
    s += "} >> \"$GITHUB_STEP_SUMMARY\"\n";
    y.run(8, &s);
    // The patches meet the real upstream sources here, where the network is; CI checks only
    // their shape and verification records.
    y.line(
        6,
        "- name: Patches and derivations against the upstream sources",
    );
    y.env(8, &[("RELEASE", "${{ inputs.release }}")]);
    y.run(
        8,
        "set -euo pipefail\nargs=()\nif [ -n \"${RELEASE:-}\" ]; then args+=(--release \"$RELEASE\"); fi\ntarget/release/rocforge \"${args[@]}\" --locked check --sources --only-patched\n",
    );
    let _ = lines;
    y.line(0, "");
}

fn images_job(y: &mut Y, lines: &[Line]) {
    y.line(2, "images:");
    y.line(4, "name: builder image ${{ matrix.release }}");
    y.line(4, "needs: plan");
    y.line(4, &format!("if: {TRUSTED}"));
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 120");
    y.permissions(&[("contents", "read"), ("packages", "write")]);
    y.line(4, "strategy:");
    y.line(6, "fail-fast: false");
    y.line(6, "matrix:");
    y.line(8, "include:");
    for l in lines {
        y.line(10, &format!("- release: {}", l.name));
        y.line(12, &format!("image: {}", l.image));
        y.line(
            12,
            &format!("containerfile: containers/Containerfile.{}", l.name),
        );
    }
    y.line(4, "steps:");
    y.checkout();
    y.login("push");
    y.line(
        6,
        "- name: Build and push the image when its Containerfile changed",
    );
    y.env(
        8,
        &[
            ("RELEASE", "${{ matrix.release }}"),
            ("IMAGE", "${{ matrix.image }}"),
            ("CONTAINERFILE", "${{ matrix.containerfile }}"),
        ],
    );
    let s = "\
set -euo pipefail
# The image carries the sha256 of the Containerfile it was built from: build only when it differs.
sum=$(sha256sum \"$CONTAINERFILE\" | cut -d' ' -f1)
current=$(skopeo inspect \"docker://$IMAGE\" 2>/dev/null | jq -r '.Labels[\"org.rocforge.containerfile-sha256\"] // empty' || true)
if [ \"$current\" = \"$sum\" ]; then
  echo \"$IMAGE is up to date with $CONTAINERFILE\"
  digest=$(skopeo inspect \"docker://$IMAGE\" | jq -r .Digest)
else
  podman build --label \"org.rocforge.containerfile-sha256=$sum\" --timestamp 0 \\
    -f \"$CONTAINERFILE\" -t \"$IMAGE\" containers
  podman push --digestfile digest \"$IMAGE\"
  digest=$(cat digest)
fi
mkdir -p out
echo \"$IMAGE@$digest\" > \"out/builder-$RELEASE.txt\"
if grep -q \"$digest\" rocforge.lock; then
  note=\"rocforge.lock records this digest\"
else
  note=\"rocforge.lock does not record this digest yet: run \\`rocforge lock\\` and commit rocforge.lock\"
  echo \"::warning::$IMAGE is $digest; $note\"
fi
echo \"- builder image $IMAGE@$digest ($note)\" >> \"$GITHUB_STEP_SUMMARY\"
";
    y.run(8, s);
    y.line(6, &format!("- uses: {UPLOAD}"));
    y.line(8, "with:");
    y.line(10, "name: builder-${{ matrix.release }}");
    y.line(10, "path: out/builder-${{ matrix.release }}.txt");
    y.line(0, "");
}

/// One job per level and part. Trusted events push to the cache; pull requests only read it.
/// Returns the job IDs.
fn build_jobs(
    y: &mut Y,
    runners: &Runners,
    slots: &[(usize, usize)],
    trusted: bool,
) -> Vec<String> {
    let prefix = if trusted { "" } else { "pr-" };
    let mut ids: Vec<String> = Vec::new();
    let hosted = &runners.hosted;
    let longest = runners
        .build
        .iter()
        .map(|b| b.hours)
        .fold(6.0_f64, f64::max);
    for &(level, part) in slots {
        let id = build_job_id(prefix, level, part);
        let out = output_name(level, part);
        y.line(2, &format!("{id}:"));
        y.line(
            4,
            &format!(
                "name: {}level {level}{} ${{{{ matrix.component }}}}",
                if trusted { "" } else { "pull request, " },
                if part > 0 {
                    format!(" part {part}")
                } else {
                    String::new()
                }
            ),
        );
        let mut needs = vec!["plan".to_string()];
        if trusted {
            needs.push("images".into());
        }
        needs.extend(
            ids.iter()
                .filter(|i| !i.is_empty())
                .cloned()
                .collect::<Vec<_>>(),
        );
        y.line(4, &format!("needs: [{}]", needs.join(", ")));
        y.line(
            4,
            &format!(
                "if: always() && {} && needs.plan.result == 'success' && needs.plan.outputs.{out} != '' && {NEEDS_OK}",
                if trusted { TRUSTED } else { UNTRUSTED }
            ),
        );
        if trusted {
            y.line(4, "runs-on: ${{ matrix.runner }}");
            y.line(
                4,
                &format!(
                    "timeout-minutes: ${{{{ matrix.runner == '{}' && 360 || {} }}}}",
                    hosted.label,
                    (longest * 60.0).round() as u64
                ),
            );
        } else {
            // Never a self-hosted label, whatever the matrix says: the plan job has already
            // left out what needs one (PR_FILTER), and this is the guard if it had not.
            y.line(4, &format!("runs-on: {}", hosted.label));
            y.line(4, "timeout-minutes: 360");
        }
        if trusted {
            y.permissions(&[("contents", "read"), ("packages", "write")]);
        } else {
            y.permissions(&[("contents", "read"), ("packages", "read")]);
        }
        y.line(4, "strategy:");
        y.line(6, "fail-fast: false");
        y.line(
            6,
            &format!("matrix: ${{{{ fromJSON(needs.plan.outputs.{out}) }}}}"),
        );
        y.line(4, "steps:");
        y.checkout();
        y.rocforge();
        y.trust(&runners.cache.trusted_keys, trusted);
        y.line(
            6,
            &format!(
                "- name: Build ${{{{ matrix.component }}}} ({})",
                if trusted {
                    "cache hits pulled, new entries pushed"
                } else {
                    "cache hits pulled, nothing pushed"
                }
            ),
        );
        let mut env = vec![
            ("COMPONENT", "${{ matrix.component }}"),
            ("TARGETS", "${{ matrix.targets }}"),
            ("RELEASE", "${{ needs.plan.outputs.release }}"),
            REGISTRY_USER,
            REGISTRY_PASSWORD,
        ];
        if trusted {
            env.push(("CACHE_KEY", "${{ secrets.ROCFORGE_CACHE_KEY }}"));
            env.push((
                "ROCFORGE_KEY_PASSWORD",
                "${{ secrets.ROCFORGE_CACHE_KEY_PASSWORD }}",
            ));
        }
        y.env(8, &env);
        let build = "rocforge --release \"$RELEASE\" --arch \"$TARGETS\" --locked build \"$COMPONENT\" --cache \"$CACHE\"";
        if trusted {
            y.run(
                8,
                &format!(
                    "\
set -euo pipefail
keys=\"$RUNNER_TEMP/cache-keys\"
trap 'rm -rf \"$keys\"' EXIT
mkdir -p \"$keys\" cache-pub
if [ -n \"$CACHE_KEY\" ]; then
  (umask 077 && printf '%s\\n' \"$CACHE_KEY\" > \"$keys/cache.key\")
else
  # No ROCFORGE_CACHE_KEY: this job signs what it pushes with a key of its own, whose public
  # half the later jobs of this run trust (cache-pub-* artifacts). Other runs do not.
  echo \"::notice::no ROCFORGE_CACHE_KEY secret: pushes are signed with a key for this run only\"
  ROCFORGE_KEY_PASSWORD='' rocforge key generate --out \"$keys\" > \"cache-pub/$COMPONENT.pub\"
  mv \"$keys/rocforge.key\" \"$keys/cache.key\"
  export ROCFORGE_KEY_PASSWORD=''
fi
{build} --cache-key \"$keys/cache.key\""
                ),
            );
            y.line(6, &format!("- uses: {UPLOAD}"));
            y.line(8, "with:");
            y.line(10, "name: cache-pub-${{ matrix.component }}");
            y.line(10, "path: cache-pub/");
            y.line(10, "if-no-files-found: ignore");
            y.line(10, "retention-days: 1");
        } else {
            // No cache signing key: rocforge pulls hits and pushes nothing.
            y.run(8, build);
        }
        y.line(0, "");
        ids.push(id);
    }
    ids
}

/// One job per GPU label of runners.toml; each runs only when the plan found a runner for it
/// (runners.toml's `registered`, or the GitHub API). Returns the job IDs.
fn test_jobs(
    y: &mut Y,
    lines: &[Line],
    runners: &Runners,
    newest: &str,
    builds: &[String],
) -> Vec<String> {
    let tested: Vec<&str> = lines
        .iter()
        .find(|l| l.name == newest)
        .map(|l| l.tested.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let mut ids = Vec::new();
    for gpu in &runners.gpu {
        let t = &gpu.target;
        let id = format!("test-{t}");
        y.line(2, &format!("{id}:"));
        y.line(
            4,
            &format!("name: test on {t} (${{{{ matrix.component }}}})"),
        );
        let mut needs = vec!["plan".to_string()];
        needs.extend(builds.iter().cloned());
        y.line(4, &format!("needs: [{}]", needs.join(", ")));
        y.line(
            4,
            &format!(
                "if: always() && {TRUSTED} && needs.plan.result == 'success' && {NEEDS_OK} && contains(format(',{{0}},', needs.plan.outputs.gpu_ready), ',{t},')"
            ),
        );
        y.line(4, &format!("runs-on: [self-hosted, linux, {t}]"));
        y.line(
            4,
            &format!("timeout-minutes: {}", (gpu.hours * 60.0).round() as u64),
        );
        // A GPU machine is someone's computer: it reads the cache and never holds a key.
        y.permissions(&[("contents", "read"), ("packages", "read")]);
        y.line(4, "concurrency:");
        y.line(6, &format!("group: rocforge-gpu-{t}"));
        y.line(6, "cancel-in-progress: false");
        y.line(4, "strategy:");
        y.line(6, "fail-fast: false");
        y.line(6, "max-parallel: 1");
        y.line(6, "matrix:");
        y.line(8, &format!("component: [{}]", tested.join(", ")));
        y.line(4, "steps:");
        y.checkout();
        y.rocforge();
        y.trust(&runners.cache.trusted_keys, true);
        y.line(
            6,
            &format!("- name: Build or pull ${{{{ matrix.component }}}} for {t}"),
        );
        y.env(
            8,
            &[
                ("COMPONENT", "${{ matrix.component }}"),
                ("RELEASE", "${{ needs.plan.outputs.release }}"),
                REGISTRY_USER,
                REGISTRY_PASSWORD,
            ],
        );
        y.run(
            8,
            &format!(
                "rocforge --release \"$RELEASE\" --arch {t} --locked build \"$COMPONENT\" --cache \"$CACHE\""
            ),
        );
        y.line(6, "- name: Test");
        y.env(
            8,
            &[
                ("COMPONENT", "${{ matrix.component }}"),
                ("RELEASE", "${{ needs.plan.outputs.release }}"),
            ],
        );
        y.run(
            8,
            &format!(
                "rocforge --release \"$RELEASE\" --arch {t} test \"$COMPONENT\" --machine \"$RUNNER_NAME\" --out \"results/$COMPONENT-{t}\""
            ),
        );
        y.line(6, &format!("- uses: {UPLOAD}"));
        y.line(8, "if: always()");
        y.line(8, "with:");
        y.line(
            10,
            &format!("name: results-{t}-${{{{ matrix.component }}}}"),
        );
        y.line(10, "path: results/");
        y.line(10, "if-no-files-found: warn");
        y.line(0, "");
        ids.push(id);
    }
    ids
}

fn report_job(y: &mut Y, tests: &[String]) {
    y.line(2, "report:");
    let mut needs = vec!["plan".to_string()];
    needs.extend(tests.iter().cloned());
    y.line(4, &format!("needs: [{}]", needs.join(", ")));
    y.line(4, "if: always() && needs.plan.result == 'success'");
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 20");
    y.permissions(&[("contents", "read")]);
    y.line(4, "steps:");
    y.rocforge();
    y.line(6, &format!("- uses: {DOWNLOAD}"));
    y.line(8, "with:");
    y.line(10, "pattern: results-*");
    y.line(10, "path: results");
    y.line(6, "- name: Report");
    y.env(
        8,
        &[
            ("TARGETS", "${{ needs.plan.outputs.targets }}"),
            ("TRUSTED", &format!("${{{{ {TRUSTED} }}}}")),
            ("GPU_READY", "${{ needs.plan.outputs.gpu_ready }}"),
            ("GPU_SOURCE", "${{ needs.plan.outputs.gpu_source }}"),
        ],
    );
    let mut s = String::new();
    s += "set -euo pipefail\n";
    s += "mkdir -p report\n";
    s += "mapfile -t bundles < <(find results -name results.json 2>/dev/null | sort)\n";
    s += "if [ ${#bundles[@]} -gt 0 ]; then\n";
    s += "  rocforge report \"${bundles[@]}\" --out report\n";
    s += "else\n";
    s += "  echo '# Hardware test report' > report/report.md\n";
    s += "  echo >> report/report.md\n";
    s += "  echo 'No hardware results: no test job ran.' >> report/report.md\n";
    s += "fi\n";
    s += "{\n";
    s += "  echo\n";
    s += "  echo '## Targets without results'\n";
    s += "  echo\n";
    s += "  for t in ${TARGETS//,/ }; do\n";
    s += "    arch=${t%%:*}\n";
    s += "    if [ \"$TRUSTED\" != true ]; then\n";
    s += "      echo \"- $t: untested (pull requests never run on hardware runners)\"\n";
    s += "    elif [[ \",$GPU_READY,\" != *\",$arch,\"* ]]; then\n";
    s += "      echo \"- $t: untested (no runner for $arch according to $GPU_SOURCE)\"\n";
    s += "    fi\n";
    s += "  done\n";
    s += "} >> report/report.md\n";
    s += "cat report/report.md >> \"$GITHUB_STEP_SUMMARY\"\n";
    y.run(8, &s);
    y.line(6, &format!("- uses: {UPLOAD}"));
    y.line(8, "with:");
    y.line(10, "name: report");
    y.line(10, "path: report/");
    y.line(0, "");
}

fn publish_jobs(y: &mut Y, runners: &Runners, builds: &[String]) {
    y.line(2, "publish:");
    let mut needs = vec!["plan".to_string(), "report".to_string()];
    needs.extend(builds.iter().cloned());
    y.line(4, &format!("needs: [{}]", needs.join(", ")));
    y.line(
        4,
        &format!(
            "if: always() && {TRUSTED} && startsWith(github.ref, 'refs/tags/v') && needs.plan.result == 'success' && needs.report.result == 'success' && {NEEDS_OK}"
        ),
    );
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 180");
    y.line(4, "environment: release");
    y.permissions(&[("contents", "write"), ("packages", "write")]);
    y.line(4, "concurrency:");
    y.line(6, "group: rocforge-publish");
    y.line(6, "cancel-in-progress: false");
    y.line(4, "steps:");
    y.checkout();
    y.rocforge();
    y.line(6, &format!("- uses: {DOWNLOAD}"));
    y.line(8, "with:");
    y.line(10, "name: report");
    y.line(10, "path: report");
    y.trust(&runners.cache.trusted_keys, true);
    y.line(
        6,
        "- name: Every component of the release, pulled from the cache",
    );
    y.env(
        8,
        &[
            ("RELEASE", "${{ needs.plan.outputs.release }}"),
            ("TARGETS", "${{ needs.plan.outputs.targets }}"),
            REGISTRY_USER,
            REGISTRY_PASSWORD,
        ],
    );
    y.run(
        8,
        "rocforge --release \"$RELEASE\" --arch \"$TARGETS\" --locked build --cache \"$CACHE\"",
    );
    y.line(6, "- name: Package and sign");
    y.env(
        8,
        &[
            ("RELEASE", "${{ needs.plan.outputs.release }}"),
            ("TARGETS", "${{ needs.plan.outputs.targets }}"),
            ("SIGNING_KEY", "${{ secrets.ROCFORGE_SIGNING_KEY }}"),
            (
                "ROCFORGE_KEY_PASSWORD",
                "${{ secrets.ROCFORGE_KEY_PASSWORD }}",
            ),
        ],
    );
    let s = SIGNING_KEY_FILE.to_string()
        + "\
mapfile -t components < <(rocforge --release \"$RELEASE\" --format json list | jq -r '.components[].name')
rocforge --release \"$RELEASE\" --arch \"$TARGETS\" --locked package \"${components[@]}\" --out dist --key \"$key\"
cp report/report.md dist/report.md
if [ -f report/report.html ]; then cp report/report.html dist/report.html; fi
";
    y.run(8, &s);
    y.line(6, "- name: GitHub release, artifacts on GHCR, wheel index");
    y.env(
        8,
        &[
            ("GITHUB_TOKEN", "${{ github.token }}"),
            ("REPO", "${{ github.repository }}"),
            ("OWNER", "${{ github.repository_owner }}"),
            ("TAG", "${{ github.ref_name }}"),
            REGISTRY_USER,
            REGISTRY_PASSWORD,
        ],
    );
    let s = "\
set -euo pipefail
rocforge publish dist --to \"github://$REPO@$TAG\"
rocforge publish dist --to \"oci://ghcr.io/${OWNER,,}/rocforge\"
";
    y.run(8, s);
    y.login("runtime images push");
    y.line(6, "- name: Runtime images to GHCR, one per target");
    y.env(
        8,
        &[
            ("OWNER", "${{ github.repository_owner }}"),
            ("RELEASE", "${{ needs.plan.outputs.release }}"),
            ("TARGETS", "${{ needs.plan.outputs.targets }}"),
            ("TAG", "${{ github.ref_name }}"),
            REGISTRY_USER,
            REGISTRY_PASSWORD,
        ],
    );
    // The OS part comes from the template; the stack is the reproducible layer `image create`
    // adds from the same store entries the tarballs were packaged from.
    let s = "\
set -euo pipefail
repo_owner=\"${OWNER,,}\"
base=\"ghcr.io/$repo_owner/rocforge-runtime-base:$RELEASE-$TAG\"
podman build --timestamp 0 -f containers/Containerfile.runtime -t \"$base\" containers
podman push \"$base\"
mapfile -t components < <(rocforge --release \"$RELEASE\" --format json list | jq -r '.components[].name')
for t in ${TARGETS//,/ }; do
  arch=${t%%:*}
  image=\"ghcr.io/$repo_owner/rocforge:$RELEASE-$arch-$TAG\"
  rocforge --release \"$RELEASE\" --arch \"$t\" --locked image create \"${components[@]}\" \\
    --base \"$base\" --tag \"$image\" --push
  echo \"- runtime image $image\" >> \"$GITHUB_STEP_SUMMARY\"
done
";
    y.run(8, s);
    // The signed index stays with its tarballs on the GitHub release: Pages holds what pip reads.
    y.line(6, "- name: Pages site (wheel index and wheels, report)");
    let s = "\
set -euo pipefail
mkdir -p site
cp dist/report.* site/
# The wheel index: one directory per target (rocforge publish writes DIR/<target>/<project>/),
# linking each wheel as ../../<file>: the wheels go beside the directories, as in dist.
find dist -mindepth 1 -maxdepth 1 -type d -exec cp -r {} site/ \\;
find dist -maxdepth 1 -type f -name '*.whl' -exec cp {} site/ \\;
";
    y.run(8, s);
    y.line(6, &format!("- uses: {UPLOAD_PAGES}"));
    y.line(8, "with:");
    y.line(10, "path: site");
    y.line(0, "");
    y.line(2, "pages:");
    y.line(4, "needs: publish");
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 15");
    y.permissions(&[("pages", "write"), ("id-token", "write")]);
    y.line(4, "environment:");
    y.line(6, "name: github-pages");
    y.line(6, "url: ${{ steps.deploy.outputs.page_url }}");
    y.line(4, "steps:");
    y.line(6, "- id: deploy");
    y.line(8, &format!("uses: {DEPLOY_PAGES}"));
}

/// The scheduled run: every published release's index.json, checked against the trusted keys,
/// issued anew and signed with the release key, so a release stays installable after the 30
/// days its index was signed for.
fn resign_job(y: &mut Y) {
    y.line(0, "");
    y.line(2, "resign:");
    y.line(4, "if: github.event_name == 'schedule'");
    y.line(4, "runs-on: ubuntu-24.04");
    y.line(4, "timeout-minutes: 30");
    y.line(4, "environment: release");
    y.permissions(&[("contents", "write")]);
    // Never beside a publish: both write index.json of a release.
    y.line(4, "concurrency:");
    y.line(6, "group: rocforge-publish");
    y.line(6, "cancel-in-progress: false");
    y.line(4, "steps:");
    y.checkout();
    y.rocforge_build();
    y.line(6, "- name: Re-sign every release's index before it expires");
    y.env(
        8,
        &[
            ("GH_TOKEN", "${{ github.token }}"),
            ("REPO", "${{ github.repository }}"),
            ("SIGNING_KEY", "${{ secrets.ROCFORGE_SIGNING_KEY }}"),
            (
                "ROCFORGE_KEY_PASSWORD",
                "${{ secrets.ROCFORGE_KEY_PASSWORD }}",
            ),
        ],
    );
    let s = SIGNING_KEY_FILE.to_string()
        + "\
export PATH=\"$PWD/target/release:$PATH\"
# A failed listing stops the job rather than re-signing nothing.
list=$(gh release list --repo \"$REPO\" --exclude-drafts --limit 1000 --json tagName --jq '.[].tagName')
mapfile -t tags <<<\"$list\"
for tag in \"${tags[@]}\"; do
  [ -n \"$tag\" ] || continue
  dir=\"$RUNNER_TEMP/resign/$tag\"
  mkdir -p \"$dir\"
  gh release download \"$tag\" --repo \"$REPO\" --dir \"$dir\" --pattern 'index.json*' --pattern 'keys*.json*' || true
  if [ ! -f \"$dir/index.json\" ]; then
    echo \"- $tag: no index.json, nothing to re-sign\" >> \"$GITHUB_STEP_SUMMARY\"
    continue
  fi
  # --renew first checks the old signature (with the key lists beside it): only what the
  # project signed is signed again.
  rocforge index \"$dir\" --renew --key \"$key\"
  gh release upload \"$tag\" --repo \"$REPO\" --clobber \"$dir/index.json\" \"$dir/index.json.minisig\"
  echo \"- $tag: index.json re-signed, expires $(jq -r .expires \"$dir/index.json\")\" >> \"$GITHUB_STEP_SUMMARY\"
done
";
    y.run(8, &s);
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
        }
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
    fn later_levels_run_after_skipped_ones() {
        let l = line("l-1", &[("a", 0), ("b", 1), ("c", 2)]);
        let wf = workflow(&[l], &Runners::embedded());
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
        assert_eq!(wf.matches("secrets.ROCFORGE_SIGNING_KEY").count(), 2);
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
        let wf = workflow(std::slice::from_ref(&l), &r);
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
        let wf = workflow(&[l], &r);
        assert!(wf.contains(&format!("registered=\" {target} \"")));
        assert!(wf.contains(&format!("needs: [plan, test-{target}")));
        // The runner-listing token reaches only trusted runs.
        let plan = job_text(&wf, "plan");
        assert!(plan.contains(&format!(
            "RUNNERS_TOKEN: ${{{{ {TRUSTED} && secrets.ROCFORGE_RUNNERS_TOKEN || '' }}}}"
        )));
    }
}
