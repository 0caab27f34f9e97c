//! Dependency cycles among a line's recipes, found and reported where each edge is written.

use std::collections::{BTreeMap, BTreeSet};

use crate::diag::{Diagnostic, Diagnostics};
use crate::recipe::Recipe;

/// Every dependency cycle of a line's resolved recipes (a derived line's after its overrides),
/// each edge shown where it is written: an override's `depends` or the base recipe's.
pub(super) fn report_cycles(recipes: &BTreeMap<String, Recipe>, d: &mut Diagnostics) {
    for cycle in find_cycles(recipes) {
        let edge = |from: &str, to: &str| {
            let r = &recipes[from];
            let (file, span) = r
                .dependency_at(to)
                .map(|(f, x)| (f.clone(), x.span.clone()))
                .unwrap_or_else(|| (r.file.clone(), 0..0));
            (file, span, needs(r.is_build_only(to), from, to))
        };
        let (file, span, label) = edge(&cycle[0], &cycle[1]);
        let mut diag = Diagnostic::new(format!("dependency cycle: {}", cycle.join(" -> ")))
            .at(&file, span, label);
        for w in cycle[1..].windows(2) {
            let (f, s, label) = edge(&w[0], &w[1]);
            diag = diag.related(&f, s, label);
        }
        d.push(diag.hint(
            "a component cannot need itself, even indirectly; remove one of these dependencies",
        ));
    }
}

/// "a depends on b", or "a needs b to build" for a build-only dependency.
pub(super) fn needs(build_only: bool, who: &str, what: &str) -> String {
    if build_only {
        format!("{who} needs {what} to build")
    } else {
        format!("{who} depends on {what}")
    }
}

/// Each elementary cycle reported once, starting at its smallest name (deterministic output).
pub fn find_cycles(recipes: &BTreeMap<String, Recipe>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Done,
    }
    let names: Vec<&str> = recipes.keys().map(String::as_str).collect();
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            recipes[*n]
                .all_depends()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    let mut mark = vec![Mark::New; names.len()];
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut out = Vec::new();
    for start in 0..names.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // Iterative DFS: deep graphs must not overflow the stack.
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::Active;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&child) = edges[node].get(*next) {
                *next += 1;
                match mark[child] {
                    Mark::New => {
                        mark[child] = Mark::Active;
                        stack.push((child, 0));
                    }
                    Mark::Active => {
                        let pos = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                        let mut cycle: Vec<String> = stack[pos..]
                            .iter()
                            .map(|(n, _)| names[*n].to_string())
                            .collect();
                        let min = cycle
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, n)| n.as_str())
                            .map_or(0, |(i, _)| i);
                        cycle.rotate_left(min);
                        cycle.push(cycle[0].clone());
                        if seen.insert(cycle.clone()) {
                            out.push(cycle);
                        }
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                stack.pop();
            }
        }
    }
    out
}
