//! Installed CTest trees (`CTestTestfile.cmake`, as rocPRIM, hipCUB, rocThrust, rocRAND and
//! hipRAND install under `bin/<project>`), read without cmake or ctest: the GPU machine that
//! runs the tests need not have either.
//!
//! Only what CMake writes into such files is understood: `add_test`, `set_tests_properties`,
//! `subdirs`/`add_subdirectory`, comments, and quoted, unquoted and bracket arguments. Anything
//! that needs a CMake interpreter (`if`, variables other than the list directory) is refused
//! with its file and line rather than guessed at.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::diag::{Diagnostic, SourceFile};

pub const TESTFILE: &str = "CTestTestfile.cmake";

/// One `add_test` with the properties that change how it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CtestTest {
    pub name: String,
    /// The program, mapped into the installed prefix.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// WORKING_DIRECTORY, mapped; otherwise the directory of the file that declared the test
    /// (where ctest itself would run it).
    pub workdir: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub disabled: bool,
    pub will_fail: bool,
    pub skip_return_code: Option<i32>,
    /// `file:line` of the add_test, for messages.
    pub origin: String,
}

/// How absolute paths written at build time reach the installed tree: the build saw the
/// release prefix (e.g. /opt/rocm); the runner has the tree somewhere else.
#[derive(Debug, Clone)]
pub struct PrefixMap {
    pub built: String,
    pub installed: PathBuf,
}

impl PrefixMap {
    /// An ENVIRONMENT value: each `:`-separated part under the build's prefix is mapped (a
    /// test setting LD_LIBRARY_PATH=/opt/rocm/lib must find the tree under test); anything
    /// else is kept as written.
    fn map_value(&self, value: &str) -> String {
        let built = self.built.trim_end_matches('/');
        value
            .split(':')
            .map(|part| match part.strip_prefix(built) {
                Some(rest) if !built.is_empty() && (rest.is_empty() || rest.starts_with('/')) => {
                    self.installed
                        .join(rest.trim_start_matches('/'))
                        .display()
                        .to_string()
                }
                _ => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join(":")
    }

    fn map(&self, path: &str, base: &Path) -> PathBuf {
        let built = self.built.trim_end_matches('/');
        if !built.is_empty()
            && let Some(rest) = path.strip_prefix(built)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return self.installed.join(rest.trim_start_matches('/'));
        }
        if path.starts_with('/') {
            PathBuf::from(path)
        } else {
            normalize(&base.join(path))
        }
    }
}

/// `a/b/../c` → `a/c` without touching the filesystem (a relative command such as
/// `../test_x` is resolved against the declaring file's directory).
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Reads `dir/CTestTestfile.cmake` and the files its `subdirs` name, in CTest's order (a
/// file's own tests, then its subdirectories').
pub fn read_tree(dir: &Path, map: &PrefixMap) -> Result<Vec<CtestTest>, Diagnostic> {
    let mut tests = Vec::new();
    let mut seen = Vec::new();
    read_dir(dir, map, &mut tests, &mut seen, 0)?;
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for t in &tests {
        if let Some(first) = names.insert(&t.name, &t.origin) {
            return Err(Diagnostic::new(format!(
                "test \"{}\" is declared twice ({first} and {})",
                t.name, t.origin
            ))
            .hint("test names identify results and --resume; each add_test needs its own name"));
        }
    }
    Ok(tests)
}

fn read_dir(
    dir: &Path,
    map: &PrefixMap,
    tests: &mut Vec<CtestTest>,
    seen: &mut Vec<PathBuf>,
    depth: usize,
) -> Result<(), Diagnostic> {
    let path = dir.join(TESTFILE);
    // A subdirs() cycle through symlinks would otherwise never end.
    if depth > 32 || seen.contains(&path) {
        return Err(Diagnostic::new(format!(
            "{} is included again through subdirs()",
            path.display()
        ))
        .hint("the CTest tree must not include a directory twice"));
    }
    seen.push(path.clone());
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Diagnostic::new(format!("cannot read {}: {e}", path.display())).hint(
            "a kind = \"ctest\" test needs dir to hold the CTestTestfile.cmake the build installed",
        )
    })?;
    let file = SourceFile::new(path.display().to_string(), text);
    let (own, subdirs) = parse(&file, dir, map)?;
    tests.extend(own);
    for sub in subdirs {
        read_dir(&sub, map, tests, seen, depth + 1)?;
    }
    Ok(())
}

/// One CMake command invocation: its name, its arguments with their byte spans.
struct Command {
    name: String,
    span: std::ops::Range<usize>,
    args: Vec<(String, std::ops::Range<usize>)>,
}

fn err(file: &Arc<SourceFile>, span: std::ops::Range<usize>, msg: &str, label: &str) -> Diagnostic {
    Diagnostic::new(msg.to_string()).at(file, span, label.to_string())
}

/// Parses one file: its tests (properties applied) and the directories `subdirs` names.
pub fn parse(
    file: &Arc<SourceFile>,
    dir: &Path,
    map: &PrefixMap,
) -> Result<(Vec<CtestTest>, Vec<PathBuf>), Diagnostic> {
    let commands = lex(file)?;
    let mut tests: Vec<CtestTest> = Vec::new();
    let mut subdirs = Vec::new();
    let origin =
        |span: &std::ops::Range<usize>| format!("{}:{}", file.display, file.line_col(span.start).0);
    for c in commands {
        match c.name.to_ascii_lowercase().as_str() {
            "add_test" => tests.push(add_test(file, dir, map, &c, origin(&c.span))?),
            "set_tests_properties" => set_properties(file, dir, map, &c, &mut tests)?,
            "subdirs" | "add_subdirectory" => {
                for (a, _) in &c.args {
                    subdirs.push(map.map(a, dir));
                }
            }
            // Written by CMake into every CTestTestfile or harmless to a runner.
            "set_directory_properties" | "set" | "include" | "message" => {}
            "if" | "elseif" | "else" | "endif" => {
                return Err(err(
                    file,
                    c.span,
                    "conditional blocks need a CMake interpreter",
                    "if() in a CTestTestfile",
                )
                .hint("CMake writes if() only for multi-configuration generators; build with a single-configuration generator (Ninja or Makefiles)"));
            }
            other => {
                return Err(err(
                    file,
                    c.span,
                    &format!("unsupported command {other}() in a CTestTestfile"),
                    "not add_test, set_tests_properties or subdirs",
                )
                .hint("rocforge reads the files CMake and rocm-cmake install; other commands need ctest"));
            }
        }
    }
    Ok((tests, subdirs))
}

fn add_test(
    file: &Arc<SourceFile>,
    dir: &Path,
    map: &PrefixMap,
    c: &Command,
    origin: String,
) -> Result<CtestTest, Diagnostic> {
    let args: Vec<&str> = c.args.iter().map(|(a, _)| a.as_str()).collect();
    let (name, command, workdir) = if args.first() == Some(&"NAME") {
        // add_test(NAME <name> COMMAND <command> [<arg>...] [WORKING_DIRECTORY <dir>] ...)
        let mut name = None;
        let mut command = Vec::new();
        let mut workdir = None;
        let mut key = "";
        for a in &args {
            match *a {
                "NAME"
                | "COMMAND"
                | "WORKING_DIRECTORY"
                | "CONFIGURATIONS"
                | "COMMAND_EXPAND_LISTS" => key = a,
                v => match key {
                    "NAME" => name = Some(v.to_string()),
                    "COMMAND" => command.push(v.to_string()),
                    "WORKING_DIRECTORY" => workdir = Some(v.to_string()),
                    _ => {}
                },
            }
        }
        (name, command, workdir)
    } else {
        let mut it = args.iter().map(|s| s.to_string());
        (it.next(), it.collect(), None)
    };
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(err(
            file,
            c.span.clone(),
            "add_test without a name",
            "no test name",
        )
        .hint("add_test(<name> <command> [<arg>...]) or add_test(NAME <name> COMMAND <command>)"));
    };
    let Some(program) = command.first().filter(|p| !p.is_empty()) else {
        return Err(err(
            file,
            c.span.clone(),
            &format!("test \"{name}\" has no command"),
            "no command",
        )
        .hint("add_test(<name> <command> [<arg>...])"));
    };
    if program == "NOT_AVAILABLE" {
        return Err(err(
            file,
            c.span.clone(),
            &format!("test \"{name}\" is not available in this configuration"),
            "NOT_AVAILABLE",
        )
        .hint("the test executable was not built for the configuration CMake installed"));
    }
    Ok(CtestTest {
        program: map.map(program, dir),
        args: command[1..].to_vec(),
        workdir: workdir.map_or_else(|| dir.to_path_buf(), |w| map.map(&w, dir)),
        env: Vec::new(),
        timeout: None,
        disabled: false,
        will_fail: false,
        skip_return_code: None,
        name,
        origin,
    })
}

fn truthy(v: &str) -> bool {
    let v = v.to_ascii_uppercase();
    matches!(v.as_str(), "1" | "ON" | "YES" | "TRUE" | "Y")
        || v.parse::<f64>().is_ok_and(|n| n != 0.0)
}

fn set_properties(
    file: &Arc<SourceFile>,
    dir: &Path,
    map: &PrefixMap,
    c: &Command,
    tests: &mut [CtestTest],
) -> Result<(), Diagnostic> {
    let Some(split) = c.args.iter().position(|(a, _)| a == "PROPERTIES") else {
        return Err(err(
            file,
            c.span.clone(),
            "set_tests_properties without PROPERTIES",
            "no PROPERTIES keyword",
        )
        .hint("set_tests_properties(<test>... PROPERTIES <name> <value>...)"));
    };
    let (names, props) = (&c.args[..split], &c.args[split + 1..]);
    if props.len() % 2 != 0 {
        let (_, span) = props.last().expect("odd length is not zero");
        return Err(err(
            file,
            span.clone(),
            "a property without a value",
            "this property has no value",
        )
        .hint("properties come in pairs: PROPERTIES TIMEOUT 300 WILL_FAIL TRUE"));
    }
    for (name, span) in names {
        let Some(t) = tests.iter_mut().find(|t| &t.name == name) else {
            return Err(err(
                file,
                span.clone(),
                &format!("set_tests_properties names an unknown test \"{name}\""),
                "no add_test of this name before this line",
            )
            .hint("CMake writes add_test before the properties of that test"));
        };
        for pair in props.chunks(2) {
            let ((key, _), (value, vspan)) = (&pair[0], &pair[1]);
            match key.as_str() {
                "WORKING_DIRECTORY" => t.workdir = map.map(value, dir),
                "ENVIRONMENT" => {
                    for kv in split_list(value) {
                        match kv.split_once('=') {
                            Some((k, v)) if !k.is_empty() => {
                                t.env.push((k.to_string(), map.map_value(v)))
                            }
                            _ => {
                                return Err(err(
                                    file,
                                    vspan.clone(),
                                    &format!("ENVIRONMENT entry \"{kv}\" of test \"{name}\" is not NAME=VALUE"),
                                    "expected NAME=VALUE;NAME=VALUE",
                                )
                                .hint("e.g. ENVIRONMENT \"HIP_VISIBLE_DEVICES=0;OMP_NUM_THREADS=4\""));
                            }
                        }
                    }
                }
                "TIMEOUT" => {
                    match value.trim().parse::<f64>() {
                        Ok(s) if s > 0.0 && s.is_finite() => {
                            t.timeout = Some(Duration::from_secs_f64(s))
                        }
                        // CTest treats 0 as "no timeout of its own".
                        Ok(0.0) => t.timeout = None,
                        _ => {
                            return Err(err(
                            file,
                            vspan.clone(),
                            &format!("TIMEOUT \"{value}\" of test \"{name}\" is not a number of seconds"),
                            "expected seconds",
                        )
                        .hint("e.g. TIMEOUT 300"));
                        }
                    }
                }
                "DISABLED" => t.disabled = truthy(value),
                "WILL_FAIL" => t.will_fail = truthy(value),
                "SKIP_RETURN_CODE" => match value.trim().parse::<i32>() {
                    Ok(code) if (0..=255).contains(&code) => t.skip_return_code = Some(code),
                    _ => {
                        return Err(err(
                            file,
                            vspan.clone(),
                            &format!("SKIP_RETURN_CODE \"{value}\" of test \"{name}\" is not an exit code"),
                            "expected 0 to 255",
                        )
                        .hint("e.g. SKIP_RETURN_CODE 77"));
                    }
                },
                // Labels, resources, regular expressions over the output and the like: the
                // runner classifies by exit status and output itself.
                _ => {}
            }
        }
    }
    Ok(())
}

/// A CMake list: `;`-separated, `\;` keeps a semicolon.
fn split_list(v: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&';') => {
                out.last_mut().expect("never empty").push(';');
                chars.next();
            }
            ';' => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Splits a file into command invocations (CMake's language grammar, without evaluation).
fn lex(file: &Arc<SourceFile>) -> Result<Vec<Command>, Diagnostic> {
    let s = file.text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < s.len() {
        match s[i] {
            c if c.is_ascii_whitespace() => i += 1,
            b'#' => i = skip_comment(s, i),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
                    i += 1;
                }
                let name = file.text[start..i].to_string();
                while i < s.len() && (s[i] == b' ' || s[i] == b'\t') {
                    i += 1;
                }
                if i >= s.len() || s[i] != b'(' {
                    return Err(err(
                        file,
                        start..i,
                        &format!("{name} is not followed by an argument list"),
                        "expected (",
                    )
                    .hint("every CMake command is written name(arguments)"));
                }
                i += 1;
                let mut args = Vec::new();
                let mut depth = 0;
                loop {
                    while i < s.len() && s[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    if i >= s.len() {
                        return Err(err(
                            file,
                            start..start + name.len(),
                            &format!("{name}( is never closed"),
                            "no matching )",
                        )
                        .hint("the file may be truncated; reinstall the component"));
                    }
                    match s[i] {
                        b')' if depth == 0 => {
                            i += 1;
                            break;
                        }
                        b')' => {
                            depth -= 1;
                            i += 1;
                        }
                        b'(' => {
                            depth += 1;
                            i += 1;
                        }
                        b'#' => i = skip_comment(s, i),
                        b'"' => {
                            let (v, end) = quoted(file, i)?;
                            args.push((expand(file, &v, i..end)?, i..end));
                            i = end;
                        }
                        b'[' if is_bracket_open(s, i).is_some() => {
                            let (v, end) = bracket(file, i)?;
                            args.push((v, i..end));
                            i = end;
                        }
                        _ => {
                            let begin = i;
                            let mut v = String::new();
                            while i < s.len()
                                && !s[i].is_ascii_whitespace()
                                && !matches!(s[i], b'(' | b')' | b'"' | b'#')
                            {
                                if s[i] == b'\\' && i + 1 < s.len() {
                                    v.push(unescape(s[i + 1]));
                                    i += 2;
                                } else {
                                    let ch = file.text[i..].chars().next().expect("in bounds");
                                    v.push(ch);
                                    i += ch.len_utf8();
                                }
                            }
                            let v = expand(file, &v, begin..i)?;
                            // An unquoted argument is a list: `a;b` is two arguments.
                            for part in split_list(&v) {
                                args.push((part, begin..i));
                            }
                        }
                    }
                }
                out.push(Command {
                    name,
                    span: start..i,
                    args,
                });
            }
            _ => {
                let ch = file.text[i..].chars().next().expect("in bounds");
                return Err(err(
                    file,
                    i..i + ch.len_utf8(),
                    "not a CMake command",
                    "unexpected character",
                )
                .hint(
                    "a CTestTestfile.cmake holds add_test(...) and set_tests_properties(...) lines",
                ));
            }
        }
    }
    Ok(out)
}

fn skip_comment(s: &[u8], i: usize) -> usize {
    if is_bracket_open(s, i + 1).is_some() {
        // Bracket comments are rare; treat them like a line comment that may span lines.
        let mut j = i + 1;
        let eq = is_bracket_open(s, j).unwrap_or(0);
        let close = format!("]{}]", "=".repeat(eq));
        j += eq + 2;
        return find(s, j, close.as_bytes()).map_or(s.len(), |k| k + close.len());
    }
    let mut j = i;
    while j < s.len() && s[j] != b'\n' {
        j += 1;
    }
    j
}

fn find(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    (from..s.len().saturating_sub(needle.len() - 1)).find(|&k| s[k..].starts_with(needle))
}

/// `[[`, `[=[`, `[==[`...: the number of `=`.
fn is_bracket_open(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'[') {
        return None;
    }
    let mut j = i + 1;
    while s.get(j) == Some(&b'=') {
        j += 1;
    }
    (s.get(j) == Some(&b'[')).then_some(j - i - 1)
}

fn bracket(file: &Arc<SourceFile>, i: usize) -> Result<(String, usize), Diagnostic> {
    let s = file.text.as_bytes();
    let eq = is_bracket_open(s, i).expect("caller checked");
    let close = format!("]{}]", "=".repeat(eq));
    let mut begin = i + eq + 2;
    // A newline right after the opening bracket is not part of the value.
    if s.get(begin) == Some(&b'\n') {
        begin += 1;
    }
    match find(s, begin, close.as_bytes()) {
        Some(end) => Ok((file.text[begin..end].to_string(), end + close.len())),
        None => Err(err(
            file,
            i..i + eq + 2,
            "bracket argument is never closed",
            &format!("no matching {close}"),
        )
        .hint("the file may be truncated; reinstall the component")),
    }
}

fn unescape(c: u8) -> char {
    match c {
        b'n' => '\n',
        b't' => '\t',
        b'r' => '\r',
        b'0' => '\0',
        // \; stays escaped so that list splitting keeps the semicolon.
        b';' => '\u{1}',
        other => other as char,
    }
}

fn quoted(file: &Arc<SourceFile>, i: usize) -> Result<(String, usize), Diagnostic> {
    let s = file.text.as_bytes();
    let mut j = i + 1;
    let mut v = String::new();
    while j < s.len() {
        match s[j] {
            b'"' => return Ok((v.replace('\u{1}', "\\;"), j + 1)),
            b'\\' if j + 1 < s.len() && s[j + 1] == b'\n' => j += 2,
            b'\\' if j + 1 < s.len() => {
                v.push(unescape(s[j + 1]));
                j += 2;
            }
            _ => {
                let ch = file.text[j..].chars().next().expect("in bounds");
                v.push(ch);
                j += ch.len_utf8();
            }
        }
    }
    Err(err(
        file,
        i..i + 1,
        "quoted argument is never closed",
        "no closing \"",
    )
    .hint("the file may be truncated; reinstall the component"))
}

/// Variable references: `${CMAKE_CURRENT_LIST_DIR}` (what installed test files use to find
/// their neighbours) becomes `.`, resolved against the file's directory later; any other
/// reference needs a CMake interpreter.
fn expand(
    file: &Arc<SourceFile>,
    v: &str,
    span: std::ops::Range<usize>,
) -> Result<String, Diagnostic> {
    let v = v.replace('\u{1}', "\\;");
    let Some(at) = v.find("${") else {
        return Ok(v);
    };
    let rest = &v[at + 2..];
    let name = rest.split('}').next().unwrap_or(rest);
    if name == "CMAKE_CURRENT_LIST_DIR" {
        let replaced = v.replacen("${CMAKE_CURRENT_LIST_DIR}", ".", 1);
        return expand(file, &replaced, span);
    }
    Err(err(
        file,
        span,
        &format!("variable reference ${{{name}}} needs a CMake interpreter"),
        "unexpanded variable",
    )
    .hint("only ${CMAKE_CURRENT_LIST_DIR} is understood; an installed CTestTestfile should name its programs by path"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<CtestTest>, String> {
        let file = SourceFile::new("t/CTestTestfile.cmake", text);
        let map = PrefixMap {
            built: "/opt/rocm".into(),
            installed: PathBuf::from("/p"),
        };
        parse(&file, Path::new("/p/bin/rocRAND"), &map)
            .map(|(t, _)| t)
            .map_err(|d| d.render(false))
    }

    #[test]
    fn both_add_test_forms_and_properties() {
        let t = parse_text(
            "# CMake generated Testfile\n\
             add_test([=[test_basic]=] \"/opt/rocm/bin/rocRAND/test_basic\" \"--gtest_brief=1\")\n\
             set_tests_properties([=[test_basic]=] PROPERTIES  ENVIRONMENT \"A=1;B=x\\;y;P=/opt/rocm/lib:/usr/lib:/opt/rocmx\" TIMEOUT \"90.5\" WILL_FAIL \"ON\" _BACKTRACE_TRIPLES \"a;b;c\")\n\
             add_test(NAME rel COMMAND ../test_rel arg1 WORKING_DIRECTORY /opt/rocm/share)\n\
             set_tests_properties(rel PROPERTIES DISABLED TRUE SKIP_RETURN_CODE 77)\n\
             add_test(list ${CMAKE_CURRENT_LIST_DIR}/test_list a;b)\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].name, "test_basic");
        assert_eq!(t[0].program, PathBuf::from("/p/bin/rocRAND/test_basic"));
        assert_eq!(t[0].args, ["--gtest_brief=1"]);
        assert_eq!(
            t[0].env,
            [
                ("A".into(), "1".into()),
                ("B".into(), "x;y".into()),
                ("P".into(), "/p/lib:/usr/lib:/opt/rocmx".into())
            ]
        );
        assert_eq!(t[0].timeout, Some(Duration::from_secs_f64(90.5)));
        assert!(t[0].will_fail && !t[0].disabled);
        assert_eq!(t[0].workdir, PathBuf::from("/p/bin/rocRAND"));
        assert_eq!(t[1].program, PathBuf::from("/p/bin/test_rel"));
        assert_eq!(t[1].workdir, PathBuf::from("/p/share"));
        assert!(t[1].disabled);
        assert_eq!(t[1].skip_return_code, Some(77));
        assert_eq!(t[1].origin, "t/CTestTestfile.cmake:4");
        assert_eq!(t[2].program, PathBuf::from("/p/bin/rocRAND/test_list"));
        assert_eq!(t[2].args, ["a", "b"]);
    }

    #[test]
    fn what_needs_cmake_is_refused_with_its_line() {
        for (text, want) in [
            ("if(X)\nadd_test(a b)\nendif()\n", ":1:"),
            ("\nadd_test(a \"b)\n", "never closed"),
            ("add_test(a ${FOO}/b)\n", "${FOO}"),
            (
                "add_test(a b)\nset_tests_properties(c PROPERTIES TIMEOUT 1)\n",
                ":2:",
            ),
            (
                "add_test(a b)\nset_tests_properties(a PROPERTIES TIMEOUT soon)\n",
                "seconds",
            ),
            ("add_test(a)\n", "no command"),
            (
                "add_test(a b)\nset_tests_properties(a PROPERTIES ENVIRONMENT X)\n",
                "NAME=VALUE",
            ),
        ] {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
