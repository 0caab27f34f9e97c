//! Runs a dependency graph of jobs in parallel: independent jobs side by side within a number
//! of slots, the longest remaining path first, failures stopping only what depends on them
//! when asked to keep going.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

#[derive(Debug, Clone)]
pub struct Node {
    pub deps: Vec<usize>,
    /// Expected duration (seconds, or any consistent unit): for priorities only.
    pub weight: f64,
    /// Known to take no build (already in the store): it runs as soon as it is ready, without
    /// a slot, so it never waits behind long builds and what depends on it is not held back.
    pub slotless: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done,
    Failed,
    /// Not run: a dependency failed (its index), or the run was stopped (None).
    Skipped(Option<usize>),
}

/// Priority of each node: its weight plus the longest chain of dependents after it.
pub fn priorities(nodes: &[Node]) -> Vec<f64> {
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            dependents[d].push(i);
        }
    }
    let mut prio = vec![f64::NAN; nodes.len()];
    // Nodes come in dependency order (deps first), so walk backwards.
    for i in (0..nodes.len()).rev() {
        let tail = dependents[i].iter().map(|&j| prio[j]).fold(0.0, f64::max);
        prio[i] = nodes[i].weight + tail;
    }
    prio
}

/// Runs `work(i)` for every node once its dependencies are done, at most `slots` at a time.
/// Nodes must be in dependency order. `work` returns true on success.
pub fn run<F>(
    nodes: &[Node],
    slots: usize,
    keep_going: bool,
    stop: &AtomicBool,
    work: F,
) -> Vec<Outcome>
where
    F: Fn(usize) -> bool + Sync,
{
    let slots = slots.max(1);
    let prio = priorities(nodes);
    let mut outcome: Vec<Option<Outcome>> = vec![None; nodes.len()];
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            dependents[d].push(i);
        }
    }
    // Ready set ordered by priority (highest first), then index for determinism.
    let key = |i: usize| (std::cmp::Reverse(ordered(prio[i])), i);
    let mut ready: BTreeSet<(std::cmp::Reverse<u64>, usize)> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(key)
        .collect();
    // Slots taken by builds; slotless nodes in flight are counted apart.
    let mut running = 0usize;
    let mut in_flight = 0usize;
    let mut failed = false;
    let (tx, rx) = mpsc::channel::<(usize, bool)>();
    std::thread::scope(|scope| {
        loop {
            let halted = stop.load(Ordering::SeqCst) || (failed && !keep_going);
            while let Some(next) = ready
                .iter()
                .find(|(_, i)| !halted && (nodes[*i].slotless || running < slots))
                .copied()
            {
                ready.remove(&next);
                let i = next.1;
                if !nodes[i].slotless {
                    running += 1;
                }
                in_flight += 1;
                let tx = tx.clone();
                let work = &work;
                scope.spawn(move || {
                    // A job that panics counts as failed: its result must still arrive, or
                    // this loop would wait for it for ever.
                    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(i)))
                        .unwrap_or(false);
                    let _ = tx.send((i, ok));
                });
            }
            if in_flight == 0 {
                break;
            }
            let Ok((i, ok)) = rx.recv() else { break };
            in_flight -= 1;
            if !nodes[i].slotless {
                running -= 1;
            }
            outcome[i] = Some(if ok { Outcome::Done } else { Outcome::Failed });
            if ok {
                for &j in &dependents[i] {
                    waiting[j] -= 1;
                    if waiting[j] == 0 && outcome[j].is_none() {
                        ready.insert(key(j));
                    }
                }
            } else {
                failed = true;
                // Everything downstream of a failure is skipped, naming the failure.
                let mut todo = dependents[i].clone();
                while let Some(j) = todo.pop() {
                    if outcome[j].is_none() {
                        outcome[j] = Some(Outcome::Skipped(Some(i)));
                        ready.remove(&key(j));
                        todo.extend(dependents[j].iter().copied());
                    }
                }
            }
        }
    });
    outcome
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Skipped(None)))
        .collect()
}

/// f64 priorities as an order-preserving integer (all are finite and non-negative).
fn ordered(x: f64) -> u64 {
    (x.max(0.0) * 1e6) as u64
}

/// The lower bound on any schedule's makespan: the critical path, or the total work spread
/// over every slot, whichever is larger.
pub fn lower_bound(nodes: &[Node], slots: usize) -> f64 {
    let mut finish = vec![0.0f64; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        finish[i] = n.weight + n.deps.iter().map(|&d| finish[d]).fold(0.0, f64::max);
    }
    let critical = finish.iter().copied().fold(0.0, f64::max);
    let total: f64 = nodes.iter().map(|n| n.weight).sum();
    critical.max(total / slots.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A job that panics fails like one that returns false: what depends on it is skipped,
    /// the rest runs, and the run ends (it used to wait for the panicked job's answer).
    #[test]
    fn a_job_that_panics_fails_and_the_run_ends() {
        let ran = Mutex::new(Vec::new());
        let out = run(&chain_and_leaves(), 2, true, &AtomicBool::new(false), |i| {
            if i == 0 {
                panic!("a bug in job 0");
            }
            ran.lock().unwrap().push(i);
            true
        });
        assert_eq!(out[0], Outcome::Failed);
        assert_eq!(out[1], Outcome::Skipped(Some(0)));
        assert_eq!(out[2], Outcome::Skipped(Some(0)));
        let mut ran = ran.into_inner().unwrap();
        ran.sort();
        assert_eq!(ran, [3, 4, 5]);
    }

    fn chain_and_leaves() -> Vec<Node> {
        // 0 -> 1 -> 2 is the long chain; 3, 4, 5 are independent leaves.
        vec![
            Node {
                deps: vec![],
                weight: 3.0,
                slotless: false,
            },
            Node {
                deps: vec![0],
                weight: 3.0,
                slotless: false,
            },
            Node {
                deps: vec![1],
                weight: 3.0,
                slotless: false,
            },
            Node {
                deps: vec![],
                weight: 1.0,
                slotless: false,
            },
            Node {
                deps: vec![],
                weight: 1.0,
                slotless: false,
            },
            Node {
                deps: vec![],
                weight: 1.0,
                slotless: false,
            },
        ]
    }

    #[test]
    fn longest_path_starts_first() {
        let order = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let out = run(&chain_and_leaves(), 1, false, &stop, |i| {
            order.lock().unwrap().push(i);
            true
        });
        assert!(out.iter().all(|o| *o == Outcome::Done));
        assert_eq!(
            order.into_inner().unwrap()[0],
            0,
            "the head of the longest chain goes first"
        );
    }

    #[test]
    fn keep_going_runs_what_does_not_depend_on_a_failure() {
        let stop = AtomicBool::new(false);
        let out = run(&chain_and_leaves(), 2, true, &stop, |i| i != 0);
        assert_eq!(out[0], Outcome::Failed);
        assert_eq!(out[1], Outcome::Skipped(Some(0)));
        assert_eq!(out[2], Outcome::Skipped(Some(0)));
        assert_eq!(&out[3..], &[Outcome::Done, Outcome::Done, Outcome::Done]);
    }

    #[test]
    fn without_keep_going_nothing_new_starts_after_a_failure() {
        let stop = AtomicBool::new(false);
        let out = run(&chain_and_leaves(), 1, false, &stop, |i| i != 0);
        assert_eq!(out[0], Outcome::Failed);
        assert!(
            out[3..].iter().all(|o| *o == Outcome::Skipped(None)),
            "{out:?}"
        );
    }

    #[test]
    fn a_store_hit_takes_no_slot_and_does_not_wait_behind_builds() {
        // One slot, held by the long chain's head until a store hit and the hit's dependent
        // (itself a hit) have run. Were hits given slots, the head would give up waiting.
        let mut nodes = chain_and_leaves();
        nodes[3].slotless = true;
        nodes[4].slotless = true;
        nodes[4].deps = vec![3];
        let (leaf_done, wait) = mpsc::channel();
        let wait = Mutex::new(wait);
        let order = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let out = run(&nodes, 1, false, &stop, |i| {
            order.lock().unwrap().push(i);
            match i {
                0 => wait
                    .lock()
                    .unwrap()
                    .recv_timeout(std::time::Duration::from_secs(20))
                    .is_ok(),
                4 => leaf_done.send(()).is_ok(),
                _ => true,
            }
        });
        assert!(out.iter().all(|o| *o == Outcome::Done), "{out:?}");
        let order = order.into_inner().unwrap();
        let pos = |n| order.iter().position(|&i| i == n).unwrap();
        assert!(pos(3) < pos(1) && pos(4) < pos(1), "{order:?}");
    }

    #[test]
    fn a_stop_leaves_slotless_nodes_not_started_as_skipped() {
        let mut nodes = chain_and_leaves();
        for n in &mut nodes {
            n.slotless = true;
        }
        let stop = AtomicBool::new(true);
        let out = run(&nodes, 1, false, &stop, |_| true);
        assert!(out.iter().all(|o| *o == Outcome::Skipped(None)), "{out:?}");
    }

    #[test]
    fn lower_bound_is_critical_path_or_work_over_slots() {
        assert_eq!(lower_bound(&chain_and_leaves(), 1), 12.0);
        assert_eq!(lower_bound(&chain_and_leaves(), 4), 9.0);
    }
}
