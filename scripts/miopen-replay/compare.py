#!/usr/bin/env python3
"""compare.py OUT/gfx90c OUT/gfx902 OUT/gfx900 ... > comparison.json

Puts the summary.json of several replays side by side: headline figures, the solvers each
target got (applicable in at least one problem), and the solvers the last one (the control)
got that the others did not, with the problems where that happened.
"""
import json
import os
import sys

dirs = sys.argv[1:]
S = {}
for d in dirs:
    with open(os.path.join(d, "summary.json")) as f:
        S[os.path.basename(d.rstrip("/"))] = json.load(f)
names = list(S)
control = names[-1]


def applicable(s):
    out = {}
    for p, i in s["problems_detail"].items():
        for solver in i["applicable_solvers"]:
            out.setdefault(solver, []).append(p)
    return out


res = {"targets": {}, "control": control}
app = {n: applicable(S[n]) for n in names}
for n in names:
    s = S[n]
    res["targets"][n] = {
        k: s[k]
        for k in ("target", "cu", "runs", "seconds_in_runs", "total", "problems", "applicable_pairs",
                  "pairs_ok", "pairs_failed", "programs_distinct", "programs_compiled",
                  "programs_failed", "kernel_files_distinct", "code_objects_loaded_by_processor",
                  "code_objects_for_other_processors")
    }
    res["targets"][n]["failures_grouped"] = [
        {"message": g["message"], "programs": g["programs"], "files": g["files"]}
        for g in s["failures_grouped"]]
    res["targets"][n]["solvers_applicable"] = sorted(app[n])
    res["targets"][n]["solvers_with_all_pairs_ok"] = sorted(
        x for x, c in s["solvers"].items() if c.get("ok") and not c.get("failed"))
    res["targets"][n]["solvers_with_some_pairs_failed"] = sorted(
        x for x, c in s["solvers"].items() if c.get("failed"))
for n in names[:-1]:
    only_control = sorted(set(app[control]) - set(app[n]))
    res["control_only_vs_" + n] = {x: app[control][x] for x in only_control}
    res["only_" + n + "_vs_control"] = {x: app[n][x] for x in sorted(set(app[n]) - set(app[control]))}
    # same problem, different applicability
    diff = {}
    for p in S[control]["problems_detail"]:
        a = set(S[control]["problems_detail"][p]["applicable_solvers"])
        b = set(S[n]["problems_detail"].get(p, {}).get("applicable_solvers", []))
        if a != b:
            diff[p] = {"control_only": sorted(a - b), n + "_only": sorted(b - a)}
    res["per_problem_differences_" + n] = diff
json.dump(res, sys.stdout, indent=1)
print()
