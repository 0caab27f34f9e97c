//! `[test]`: how a component's installed tests are run (a gtest client, every binary of a
//! directory, or a CTest tree).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::diag::reader::{Sp, TableReader};
use crate::diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
use crate::units::parse_duration;

use super::checks::path_problem;

#[derive(Debug, Clone, Serialize)]
pub struct Test {
    pub kind: TestKind,
    /// gtest: the client, relative to the prefix. each-binary: the corpus `dir` (a directory
    /// or a glob), relative to the prefix.
    pub client: String,
    pub args: Vec<String>,
    pub shards: u32,
    /// gtest: per shard, without progress. each-binary: per binary.
    pub timeout_secs: u64,
    pub env: BTreeMap<String, String>,
    /// each-binary: the exit code a binary reports "skipped" with (e.g. 77, CTest's convention).
    pub skip_exit_code: Option<i32>,
}

/// How a `[test]` corpus is run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TestKind {
    /// One gtest client, sharded with gtest's variables.
    #[default]
    Gtest,
    /// Every executable in a directory, each one test with its own timeout.
    EachBinary,
    /// The tests an installed CTestTestfile.cmake (and its subdirs) declares, each one test.
    Ctest,
}

/// Options of ctest itself: a gtest client or a CTest tree's programs do not take them, and a
/// recipe that passes them most likely names a CTest directory as its client.
const CTEST_OPTIONS: &[&str] = &[
    "--output-on-failure",
    "--test-dir",
    "--tests-regex",
    "--exclude-regex",
    "--label-regex",
    "--label-exclude",
    "--repeat",
    "--repeat-until-fail",
    "--schedule-random",
    "--stop-on-failure",
    "--rerun-failed",
    "--no-tests",
    "--timeout",
    "--parallel",
    "--extra-verbose",
    "--build-config",
    "-R",
    "-E",
    "-L",
    "-LE",
    "-C",
    "-VV",
    "-j",
];

fn ctest_option(arg: &str) -> bool {
    let head = arg.split('=').next().unwrap_or(arg);
    CTEST_OPTIONS.contains(&head)
        || arg
            .strip_prefix("-j")
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

fn kind_name(kind: TestKind) -> &'static str {
    match kind {
        TestKind::Gtest => "gtest",
        TestKind::EachBinary => "each-binary",
        TestKind::Ctest => "ctest",
    }
}

const KINDS_HINT: &str = "kind = \"gtest\" (the default) runs one client; kind = \"each-binary\" runs every executable in dir; kind = \"ctest\" runs the tests of the CTestTestfile.cmake in dir";

/// The keys of a `[test]` table besides `kind`, as written.
struct Keys {
    client: Option<Sp<String>>,
    dir: Option<Sp<String>>,
    args: Vec<Sp<String>>,
    shards: Option<Sp<i64>>,
    timeout: Option<Sp<String>>,
    env: BTreeMap<String, Sp<String>>,
    skip: Option<Sp<i64>>,
}

impl Keys {
    fn read(t: &mut TableReader<'_, '_>, kind: Option<TestKind>, d: &mut Diagnostics) -> Self {
        // The key the kind needs is required; the other kind's key is refused later.
        let (client, dir) = match kind {
            Some(TestKind::EachBinary) => (
                t.opt_str("client", d),
                t.str(
                    "dir",
                    d,
                    "dir = \"bin/examples\" (or a glob, \"bin/example_*\"), relative to the install prefix",
                ),
            ),
            Some(TestKind::Ctest) => (
                t.opt_str("client", d),
                t.str(
                    "dir",
                    d,
                    "dir = \"bin/rocRAND\", the directory holding the installed CTestTestfile.cmake, relative to the install prefix",
                ),
            ),
            Some(TestKind::Gtest) => (
                t.str(
                    "client",
                    d,
                    "client = \"bin/<name>-test\", relative to the install prefix",
                ),
                t.opt_str("dir", d),
            ),
            None => (t.opt_str("client", d), t.opt_str("dir", d)),
        };
        Self {
            client,
            dir,
            args: t.opt_str_list("args", d).unwrap_or_default(),
            shards: t.opt_int("shards", d),
            timeout: t.opt_str("timeout", d),
            env: t.opt_str_map("env", d).unwrap_or_default(),
            skip: t.opt_int("skip-exit-code", d),
        }
    }
}

pub(super) fn read_test(mut t: TableReader<'_, '_>, d: &mut Diagnostics) -> Option<Test> {
    let file = t.file().clone();
    let before = d.len();
    let kind = read_kind(&mut t, d);
    let keys = Keys::read(&mut t, kind, d);
    t.finish(d);
    if let Some(kind) = kind {
        check_misplaced(&file, kind, &keys, d);
        check_skip_kind(&file, kind, &keys, d);
    }
    match kind {
        Some(TestKind::Gtest) => check_gtest_client(&file, &keys, d),
        Some(TestKind::Ctest) => check_ctest_tree(&file, &keys, d),
        _ => {}
    }
    let skip_exit_code = skip_exit_code(&file, keys.skip, d);
    let client = match kind {
        Some(TestKind::EachBinary | TestKind::Ctest) => keys.dir,
        _ => keys.client,
    };
    let shards = shards(&file, keys.shards, d);
    let timeout_secs = timeout_secs(&file, keys.timeout, d);
    if let Some(c) = &client {
        check_client_path(&file, kind, c, d);
    }
    if d.len() > before {
        return None;
    }
    Some(Test {
        kind: kind?,
        client: client?.value,
        args: keys.args.into_iter().map(|s| s.value).collect(),
        shards,
        timeout_secs,
        env: keys.env.into_iter().map(|(k, v)| (k, v.value)).collect(),
        skip_exit_code,
    })
}

/// `kind`, gtest when not given; None (reported) for a kind rocforge does not run.
fn read_kind(t: &mut TableReader<'_, '_>, d: &mut Diagnostics) -> Option<TestKind> {
    let kind_str = t.opt_str("kind", d);
    match kind_str.as_ref().map(|k| k.value.as_str()) {
        None | Some("gtest") => Some(TestKind::Gtest),
        Some("each-binary") => Some(TestKind::EachBinary),
        Some("ctest") => Some(TestKind::Ctest),
        Some(other) => {
            let k = kind_str.as_ref().expect("matched Some");
            d.push(
                Diagnostic::new(format!("unknown test kind \"{other}\""))
                    .at(t.file(), k.span.clone(), "expected \"gtest\", \"each-binary\" or \"ctest\"")
                    .hint(did_you_mean(other, ["gtest", "each-binary", "ctest"]).unwrap_or_else(|| {
                        "use \"gtest\" (one sharded gtest client, the default), \"each-binary\" (every executable in dir, one test each) or \"ctest\" (the tests of an installed CTestTestfile.cmake)".to_string()
                    })),
            );
            None
        }
    }
}

/// `client` in a test that runs a directory, or `dir` in one that runs a client.
fn check_misplaced(file: &Arc<SourceFile>, kind: TestKind, keys: &Keys, d: &mut Diagnostics) {
    let misplaced = match kind {
        TestKind::EachBinary | TestKind::Ctest => {
            keys.client.as_ref().map(|c| (c, "client", "dir"))
        }
        TestKind::Gtest => keys.dir.as_ref().map(|c| (c, "dir", "client")),
    };
    if let Some((v, key, other)) = misplaced {
        d.push(
            Diagnostic::new(format!(
                "\"{key}\" does not belong to a kind = \"{}\" test",
                kind_name(kind)
            ))
            .at(file, v.span.clone(), format!("use \"{other}\" here"))
            .hint(KINDS_HINT),
        );
    }
}

/// skip-exit-code where the runner learns of skipped tests another way.
fn check_skip_kind(file: &Arc<SourceFile>, kind: TestKind, keys: &Keys, d: &mut Diagnostics) {
    if let (Some(s), TestKind::Gtest | TestKind::Ctest) = (&keys.skip, kind) {
        d.push(
            Diagnostic::new("skip-exit-code applies to kind = \"each-binary\" only")
                .at(
                    file,
                    s.span.clone(),
                    if kind == TestKind::Gtest {
                        "not used by a gtest client"
                    } else {
                        "not used by a CTest tree"
                    },
                )
                .hint(if kind == TestKind::Gtest {
                    "a gtest client reports skipped tests itself ([  SKIPPED ])"
                } else {
                    "a CTest tree sets SKIP_RETURN_CODE per test in its CTestTestfile.cmake, and rocforge honours it"
                }),
        );
    }
}

/// A CTest directory named as a gtest client: the shape the shipped recipes once had.
fn check_gtest_client(file: &Arc<SourceFile>, keys: &Keys, d: &mut Diagnostics) {
    let Some(c) = &keys.client else {
        return;
    };
    let ctest_arg = keys.args.iter().find(|a| ctest_option(a));
    if c.ends_with("CTestTestfile.cmake") {
        let dir = c.trim_end_matches('/');
        let dir = dir.strip_suffix("/CTestTestfile.cmake").unwrap_or(dir);
        d.push(
            Diagnostic::new(format!("test client \"{}\" is not a program", c.value))
                .at(
                    file,
                    c.span.clone(),
                    "a directory or a CTest file, not a gtest client",
                )
                .hint(format!(
                    "for an installed CTest tree write kind = \"ctest\" and dir = \"{dir}\""
                )),
        );
    } else if let Some(a) = ctest_arg {
        d.push(
            Diagnostic::new(format!(
                "\"{}\" is an option of ctest, not of a gtest client",
                a.value
            ))
            .at(file, a.span.clone(), "ctest option")
            .related(file, c.span.clone(), "so this is probably a CTest directory")
            .hint(format!(
                "for an installed CTest tree write kind = \"ctest\" and dir = \"{}\", and drop the ctest options: rocforge runs each test itself and keeps every log",
                c.value
            )),
        );
    }
}

/// A CTest tree is one directory, and rocforge runs its tests without ctest.
fn check_ctest_tree(file: &Arc<SourceFile>, keys: &Keys, d: &mut Diagnostics) {
    if let Some(dv) = &keys.dir {
        if dv.contains(['*', '?']) {
            d.push(
                Diagnostic::new(format!("ctest dir \"{}\" is a glob", dv.value))
                    .at(file, dv.span.clone(), "a CTest tree is one directory")
                    .hint("name the directory that holds CTestTestfile.cmake, e.g. dir = \"bin/rocRAND\""),
            );
        } else if let Some(parent) = dv.strip_suffix("CTestTestfile.cmake") {
            d.push(
                Diagnostic::new(format!("ctest dir \"{}\" names the file", dv.value))
                    .at(file, dv.span.clone(), "the directory, not the file")
                    .hint(format!("write dir = \"{}\"", parent.trim_end_matches('/'))),
            );
        }
    }
    for a in keys.args.iter().filter(|a| ctest_option(a)) {
        d.push(
            Diagnostic::new(format!(
                "\"{}\" is an option of ctest; rocforge runs the tests without ctest",
                a.value
            ))
            .at(file, a.span.clone(), "ctest option")
            .hint("drop it: every test's log is kept, shards and timeout are [test] keys, and args are appended to each test's own command"),
        );
    }
}

fn skip_exit_code(
    file: &Arc<SourceFile>,
    skip: Option<Sp<i64>>,
    d: &mut Diagnostics,
) -> Option<i32> {
    match skip {
        Some(s) if (1..=255).contains(&s.value) => Some(s.value as i32),
        Some(s) => {
            d.push(
                Diagnostic::new(format!("skip-exit-code = {} is out of range", s.value))
                    .at(file, s.span.clone(), "expected 1 to 255")
                    .hint("CTest's convention is 77"),
            );
            None
        }
        None => None,
    }
}

fn shards(file: &Arc<SourceFile>, shards: Option<Sp<i64>>, d: &mut Diagnostics) -> u32 {
    match shards {
        None => 1,
        Some(s) if (1..=256).contains(&s.value) => s.value as u32,
        Some(s) => {
            d.push(
                Diagnostic::new(format!("shards = {} is out of range", s.value))
                    .at(file, s.span.clone(), "expected 1 to 256")
                    .hint("shards splits the test client's cases into that many runs"),
            );
            1
        }
    }
}

fn timeout_secs(file: &Arc<SourceFile>, timeout: Option<Sp<String>>, d: &mut Diagnostics) -> u64 {
    match timeout {
        None => 3600,
        Some(t) => match parse_duration(&t) {
            Some(secs) if secs > 0 => secs,
            _ => {
                d.push(
                    Diagnostic::new(format!("malformed duration \"{}\"", t.value))
                        .at(file, t.span.clone(), "expected e.g. 45m, 1h30m or 90s")
                        .hint("durations are numbers with units s, m, h, d and no spaces"),
                );
                0
            }
        },
    }
}

/// The client (or dir) is found under the install prefix, so it must stay inside it.
fn check_client_path(
    file: &Arc<SourceFile>,
    kind: Option<TestKind>,
    c: &Sp<String>,
    d: &mut Diagnostics,
) {
    let Some(problem) = path_problem(c) else {
        return;
    };
    let (key, example) = match kind {
        Some(TestKind::EachBinary) => ("dir", "e.g. dir = \"bin/examples\""),
        Some(TestKind::Ctest) => ("dir", "e.g. dir = \"bin/rocRAND\""),
        _ => ("client", "e.g. client = \"bin/rocsparse-test\""),
    };
    d.push(
        Diagnostic::new(format!(
            "test {key} \"{}\" must be relative to the install prefix",
            c.value
        ))
        .at(file, c.span.clone(), problem)
        .hint(example),
    );
}
