//! Which tests one start of a gtest client runs: gtest's own sharding at first; after a
//! restart, the tests left, named in a filter (read from `--gtest_list_tests`) or, when the
//! client cannot list, the ones done excluded.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{RunSpec, command, kill_group};
use crate::testrun::gtest;

/// Which tests one start of the client runs.
pub(super) enum Selection {
    /// gtest's sharding variables; no filter.
    Shard,
    /// Everything but these (with the sharding variables kept: the client could not list).
    Exclude(Vec<String>),
    /// Exactly these, unsharded.
    Only(Vec<String>),
    /// All but these, unsharded.
    AllBut(Vec<String>),
}

impl Selection {
    /// The shorter of "only the remaining" and "all but the others"; a list longer than one
    /// argument may be is run in chunks.
    pub fn filter(all: &[String], remaining: &[&String]) -> Selection {
        let keep: BTreeSet<&str> = remaining.iter().map(|s| s.as_str()).collect();
        let others: Vec<String> = all
            .iter()
            .filter(|t| !keep.contains(t.as_str()))
            .cloned()
            .collect();
        let len = |v: &mut dyn Iterator<Item = &String>| v.map(|s| s.len() + 1).sum::<usize>();
        let pos = len(&mut remaining.iter().copied());
        let neg = len(&mut others.iter());
        if neg < pos && neg < gtest::MAX_FILTER {
            return Selection::AllBut(others);
        }
        let mut chunk = Vec::new();
        let mut size = 0;
        for t in remaining {
            if size + t.len() + 1 > gtest::MAX_FILTER && !chunk.is_empty() {
                break;
            }
            size += t.len() + 1;
            chunk.push((*t).clone());
        }
        Selection::Only(chunk)
    }

    fn filter_arg(&self) -> Option<String> {
        match self {
            Selection::Shard => None,
            Selection::Exclude(v) | Selection::AllBut(v) => Some(format!("-{}", v.join(":"))),
            Selection::Only(v) => Some(v.join(":")),
        }
    }
}

/// Merges our filter into the recipe's arguments (a recipe's own positive filter is kept).
pub(super) fn client_args(spec: &RunSpec, sel: &Selection) -> Vec<String> {
    let Some(ours) = sel.filter_arg() else {
        return spec.args.clone();
    };
    let mut args = Vec::new();
    let mut merged = false;
    for a in &spec.args {
        if let Some(theirs) = a.strip_prefix("--gtest_filter=")
            && !merged
            && ours.starts_with('-')
        {
            let sep = if theirs.contains('-') { ":" } else { "-" };
            args.push(format!("--gtest_filter={theirs}{sep}{}", &ours[1..]));
            merged = true;
        } else if a.starts_with("--gtest_filter=") && !ours.starts_with('-') {
            // Our positive list already is a subset of the recipe's filter.
        } else {
            args.push(a.clone());
        }
    }
    if !merged {
        args.push(format!("--gtest_filter={ours}"));
    }
    args
}

/// `--gtest_list_tests`, or None when the client cannot list (then restarts exclude by name).
pub(super) fn list_tests(spec: &RunSpec) -> Option<Vec<String>> {
    let mut args: Vec<String> = spec.args.clone();
    args.push("--gtest_list_tests".into());
    let mut cmd = command(spec, &args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = reader.join().unwrap_or_default();
                let list = gtest::parse_list(&text);
                return (status.success() && !list.is_empty()).then_some(list);
            }
            Ok(None) if start.elapsed() < spec.timeout => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                kill_group(child.id());
                let _ = child.wait();
                return None;
            }
        }
    }
}
