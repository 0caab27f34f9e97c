#!/usr/bin/env python3
"""summarize.py OUTDIR ARCH CU > summary.json

Reads the MIOpenDriver logs of one replay (OUTDIR/logs/*.log, OUTDIR/runs.tsv) and writes a JSON
summary: applicable (problem, solver) pairs, the programs (kernel file + build options) MIOpen
compiled and whether each built, failures grouped by message, per-solver verdicts.
Program outcome is read from MIOpen's own log (MIOPEN_LOG_LEVEL=6):
  binary_cache.cpp "Unable to load binary for: F; args: A"  -> a build of (F, A) starts
  binary_cache.cpp "Saving binary for: F; args: A"          -> it built (code object cached)
  binary_cache.cpp "Successfully loaded binary for: F ..."  -> built earlier in this replay
  hipoc_program.cpp "Code object build failed. Source: F"   -> it failed
plus fakedevice's "module: code object for <arch> accepted" (the ELF's processor checked).
"""
import collections
import json
import os
import re
import sys

out, arch, cu = sys.argv[1], sys.argv[2], int(sys.argv[3])
logs = os.path.join(out, "logs")

RE_TRY = re.compile(r'\[LoadBinary\] Unable to load binary for: "([^"]+)"; args: (.*)$')
RE_HIT = re.compile(r'\[LoadBinary\] Successfully loaded binary for: "([^"]+)"; args: (.*)$')
RE_SAVE = re.compile(r'\[SaveBinary\] Saving binary for: "([^"]+)"; args: (.*)$')
RE_FAIL = re.compile(r'Code object build failed\. Source: (\S+)')
RE_APPL = re.compile(r'\[SearchForAllSolutions\] (\S+): Success\.')
RE_APPL_BAD = re.compile(r'\[SearchForAllSolutions\] (\S+): Applicable Solver not succeeded')
RE_MOD = re.compile(r'fakedevice\[\d+\]: module: code object for (\S+) accepted')
RE_MOD_BAD = re.compile(r'fakedevice\[\d+\]: hipModuleLoadData: code object for (\S+)')


def strip_obj(f):
    return f[:-2] if f.endswith(".o") else f


def norm_msg(text):
    """First compiler error lines of a failed build, with temp paths and line numbers removed."""
    errs = []
    for line in text.splitlines():
        if "error:" in line or "Error:" in line:
            line = re.sub(r"/tmp/comgr-[0-9a-f]+/\S*?/", "", line)
            line = re.sub(r":\d+:\d+:", ":", line)
            line = re.sub(r"\s+", " ", line).strip()
            if line not in errs:
                errs.append(line)
        if len(errs) >= 2:
            break
    return " | ".join(errs) if errs else text.strip().splitlines()[0][:200] if text.strip() else "?"


runs = []
with open(os.path.join(out, "runs.tsv")) as f:
    for line in f:
        p = line.rstrip("\n").split("\t")
        runs.append({"label": p[0], "rc": int(p[1]), "seconds": float(p[2]), "env": p[3], "args": p[4]})

programs = {}  # (file, args) -> {"ok": bool|None, "fail_msg": str, "runs": set}
pairs = collections.OrderedDict()  # (problem, solver) -> verdict
problem_info = collections.OrderedDict()
failures = collections.defaultdict(lambda: {"count": 0, "programs": set(), "files": set()})
modules = collections.Counter()
modules_bad = collections.Counter()
driver_errors = collections.Counter()


def parse(label):
    path = os.path.join(logs, label + ".log")
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    res = {"applicable": [], "applicable_failed": [], "tried": [], "saved": [], "hit": [],
           "failed": [], "modules": [], "modules_bad": [], "errors": [], "precompiled": False}
    current = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = RE_TRY.search(line)
        if m:
            current = (strip_obj(m.group(1)), m.group(2).strip())
            res["tried"].append(current)
        m = RE_HIT.search(line)
        if m:
            res["hit"].append((strip_obj(m.group(1)), m.group(2).strip()))
        m = RE_SAVE.search(line)
        if m:
            res["saved"].append((strip_obj(m.group(1)), m.group(2).strip()))
        m = RE_APPL.search(line)
        if m:
            res["applicable"].append(m.group(1))
        m = RE_APPL_BAD.search(line)
        if m:
            res["applicable_failed"].append(m.group(1))
        m = RE_MOD.search(line)
        if m:
            res["modules"].append(m.group(1))
        m = RE_MOD_BAD.search(line)
        if m:
            res["modules_bad"].append(m.group(1))
        if re.search(r"Warning \[Build(Asm|Hip|Ocl)\]", line) or "Error [Build" in line:
            # collect the compiler's message that follows
            text = [line.split("] ", 1)[-1]]
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("MIOpen(", "MIOpen Error", "fakedevice[")):
                text.append(lines[j])
                j += 1
            if current is not None and "Warning [" in line:
                res.setdefault("msgs", {}).setdefault(current, []).append("\n".join(text))
        # Thrown right after PrecompileSolutions returns (solver_finders.cpp, compile-only):
        # the find got past every applicable solution's kernels.
        if "MIOPEN_DEBUG_COMPILE_ONLY is enabled" in line:
            res["precompiled"] = True
        m = RE_FAIL.search(line)
        if m:
            res["failed"].append((m.group(1), current))
        if line.startswith("MIOpen Error:") or "FAILED" in line:
            res["errors"].append(re.sub(r"0x[0-9a-f]+", "0x..", line.split(": ", 1)[-1])[:200])
        i += 1
    return res


parsed = {r["label"]: parse(r["label"]) for r in runs}

for r in runs:
    label, res = r["label"], parsed[r["label"]]
    if res is None:
        continue
    base, _, only = label.partition("@")
    info = problem_info.setdefault(base, {"args": r["args"], "seconds": 0.0, "solvers": [],
                                          "runs": 0})
    info["seconds"] += r["seconds"]
    info["runs"] += 1
    for m in res["modules"]:
        modules[m] += 1
    for m in res["modules_bad"]:
        modules_bad[m] += 1
    for e in res["errors"]:
        if "escaping" not in e and "Search skipped" not in e and "Code object build failed" not in e:
            driver_errors[e] += 1
    for key in res["tried"]:
        programs.setdefault(key, {"ok": None, "fail_msg": None, "runs": set()})["runs"].add(label)
    for key in res["saved"] + res["hit"]:
        programs.setdefault(key, {"ok": None, "fail_msg": None, "runs": set()})
        programs[key]["ok"] = True
        programs[key]["runs"].add(label)
    for src, key in res["failed"]:
        if key is None or strip_obj(key[0]) != src:
            key = (src, "?")
        p = programs.setdefault(key, {"ok": None, "fail_msg": None, "runs": set()})
        if p["ok"] is not True:
            p["ok"] = False
        msgs = res.get("msgs", {}).get(key, [])
        msg = norm_msg("\n".join(msgs)) if msgs else "?"
        p["fail_msg"] = msg
    if not only:
        info["solvers"] = sorted(set(res["applicable"]))
        info["solvers_not_succeeded"] = sorted(set(res["applicable_failed"]))
        info["full_run_build_failures"] = len(res["failed"])
        info["find_completed"] = res["precompiled"]
        if not res["failed"]:
            for s in info["solvers"]:
                pairs[(base, s)] = {"verdict": "ok", "programs": None}
    else:
        verdict = "failed" if res["failed"] else "ok"
        pairs[(base, only)] = {"verdict": verdict,
                               "failed_sources": sorted({s for s, _ in res["failed"]})}

# programs never seen to finish (aborted before the outcome was logged) stay "unknown"
prog_ok = sorted(k for k, v in programs.items() if v["ok"] is True)
prog_fail = sorted(k for k, v in programs.items() if v["ok"] is False)
prog_unknown = sorted(k for k, v in programs.items() if v["ok"] is None)
for k in prog_fail:
    g = failures[programs[k]["fail_msg"] or "?"]
    g["count"] += 1
    g["files"].add(k[0])

files = collections.defaultdict(lambda: {"ok": 0, "failed": 0})
for k, v in programs.items():
    if v["ok"] is True:
        files[k[0]]["ok"] += 1
    elif v["ok"] is False:
        files[k[0]]["failed"] += 1

solver_verdicts = collections.defaultdict(collections.Counter)
for (prob, s), v in pairs.items():
    solver_verdicts[s][v["verdict"]] += 1

total = {}
try:
    for line in open(os.path.join(out, "total.txt")):
        k, v = line.split()
        total[k] = total.get(k, 0) + int(v)  # resumed runs add up
except OSError:
    pass

summary = {
    "target": arch,
    "cu": cu,
    "note": "compile-only replay through MIOpen's own find/compile path on a fake HIP device "
            "(fakedevice.so); no GPU present, no kernel was run",
    "runs": len(runs),
    "seconds_in_runs": round(sum(r["seconds"] for r in runs), 1),
    "total": total,
    "problems": len(problem_info),
    "applicable_pairs": len(pairs),
    "pairs_ok": sum(1 for v in pairs.values() if v["verdict"] == "ok"),
    "pairs_failed": sum(1 for v in pairs.values() if v["verdict"] == "failed"),
    "programs_distinct": len(programs),
    "programs_compiled": len(prog_ok),
    "programs_failed": len(prog_fail),
    "programs_unknown": len(prog_unknown),
    # Complete: the find got past precompiling every applicable solution (a kernel that did not
    # build leaves its solution out with patch 0004; without it, the first one ends the find).
    "conv_finds_incomplete": sorted(
        p for p, i in problem_info.items() if p.startswith("conv") and not i.get("find_completed")),
    "conv_finds_complete": sorted(
        p for p, i in problem_info.items() if p.startswith("conv") and i.get("find_completed")),
    "conv_finds_with_a_kernel_that_did_not_build": sorted(
        p for p, i in problem_info.items() if p.startswith("conv") and i.get("full_run_build_failures")),
    "kernel_files": {f: files[f] for f in sorted(files)},
    "kernel_files_distinct": len(files),
    "kernel_files_all_ok": sorted(f for f in files if files[f]["failed"] == 0 and files[f]["ok"] > 0),
    "kernel_files_with_failures": sorted(f for f in files if files[f]["failed"] > 0),
    "code_objects_loaded_by_processor": dict(modules),
    "code_objects_for_other_processors": dict(modules_bad),
    "failures_grouped": sorted(
        ({"message": m, "programs": g["count"], "files": sorted(g["files"])} for m, g in failures.items()),
        key=lambda x: -x["programs"]),
    "solvers": {s: dict(c) for s, c in sorted(solver_verdicts.items())},
    "solvers_ok_somewhere": sorted(s for s, c in solver_verdicts.items() if c.get("ok")),
    "solvers_failed_everywhere": sorted(s for s, c in solver_verdicts.items() if not c.get("ok")),
    "problems_detail": {p: {"args": i["args"], "seconds": round(i["seconds"], 1),
                            "applicable_solvers": i["solvers"],
                            "solvers_not_succeeded": i.get("solvers_not_succeeded", []),
                            "pairs": {s: v["verdict"] for (pp, s), v in pairs.items() if pp == p}}
                        for p, i in problem_info.items()},
    "driver_errors_other_than_compile_only_stop": dict(driver_errors.most_common(30)),
}
json.dump(summary, sys.stdout, indent=1, sort_keys=False)
print()
