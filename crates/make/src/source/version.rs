//! The version a CMake project declares in its top CMakeLists.txt, so a recipe's `version` is
//! held to the source it builds: a catalog that says 3.4.1 for a tree that declares 3.3.0
//! publishes packages under a version that is not theirs.
//!
//! ROCm projects declare it in one of these ways (the first found wins):
//! - `rocm_setup_version(VERSION 3.4.0)` (rocSPARSE, rocPRIM, MIOpen), often through a variable:
//!   `set(VERSION_STRING "4.4.1")` then `rocm_setup_version(VERSION ${VERSION_STRING})` (rocBLAS,
//!   hipBLAS, rocFFT);
//! - `project(name VERSION 1.2.3)`;
//! - `set(VERSION_STRING "x.y.z")` alone.
//!
//! Anything else (a version computed by commands, read from a file, set twice to different
//! values) is "cannot tell", and nothing is checked: a wrong error would block a good build.

use std::collections::BTreeMap;
use std::path::Path;

/// A version found in a CMakeLists.txt, with the 1-based line that writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub version: String,
    pub line: usize,
}

/// One command invocation: lower-cased name, arguments without quotes, line of each argument.
pub(crate) struct Command {
    pub name: String,
    pub args: Vec<(String, usize)>,
}

/// The most of a CMakeLists.txt read: the largest ROCm ones are tens of KiB.
const MAX_CMAKELISTS_BYTES: u64 = 4 << 20;

/// The version `dir/CMakeLists.txt` declares, if it can be told without running CMake; None
/// without the file. The file comes from the source, so it is read only if it is a regular
/// file and within a size limit: an error otherwise, naming what it is.
pub fn declared(dir: &Path) -> std::io::Result<Option<Declared>> {
    match crate::fsutil::read_regular(&dir.join("CMakeLists.txt"), MAX_CMAKELISTS_BYTES) {
        Ok(text) => Ok(declared_in(&String::from_utf8_lossy(&text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn declared_in(text: &str) -> Option<Declared> {
    let commands = parse(text);
    let vars = variables(&commands);
    let value_after = |c: &Command, keyword: &str| -> Option<Declared> {
        let i = c.args.iter().position(|(a, _)| a == keyword)?;
        let (raw, line) = c.args.get(i + 1)?;
        expand(raw, *line, &vars)
    };
    let found = commands
        .iter()
        .find(|c| c.name == "rocm_setup_version")
        .map(|c| value_after(c, "VERSION"))
        .or_else(|| {
            commands
                .iter()
                .find(|c| c.name == "project")
                .filter(|c| c.args.iter().any(|(a, _)| a == "VERSION"))
                .map(|c| value_after(c, "VERSION"))
        })
        .or_else(|| {
            vars.get("VERSION_STRING")
                .map(|v| v.clone().and_then(|(raw, line)| expand(&raw, line, &vars)))
        })??;
    is_version(&found.version).then_some(found)
}

/// Whether the recipe's `version` names the declared one: the same, or the same followed by a
/// packaging suffix (`3.4.0-1`, `3.4.0+gfx90c`).
pub fn matches(recipe: &str, declared: &str) -> bool {
    recipe == declared
        || recipe
            .strip_prefix(declared)
            .is_some_and(|rest| rest.starts_with(['-', '+', '~', '_']))
}

pub(crate) fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    (2..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `set(NAME value)` of the file: None for a name set more than once to different values, or
/// to a list, since which one a call sees depends on control flow.
pub(crate) type Vars = BTreeMap<String, Option<(String, usize)>>;

pub(crate) fn variables(commands: &[Command]) -> Vars {
    let mut vars = Vars::new();
    for c in commands.iter().filter(|c| c.name == "set") {
        let Some((name, _)) = c.args.first() else {
            continue;
        };
        let values: Vec<&(String, usize)> = c.args[1..]
            .iter()
            .take_while(|(a, _)| a != "CACHE" && a != "PARENT_SCOPE")
            .collect();
        let value = match values.as_slice() {
            [one] => Some((*one).clone()),
            _ => None,
        };
        vars.entry(name.clone())
            .and_modify(|old| {
                if old.as_ref().map(|o| &o.0) != value.as_ref().map(|v| &v.0) {
                    *old = None;
                }
            })
            .or_insert(value);
    }
    vars
}

/// Substitutes `${NAME}` references from `vars` (a few levels deep); None when one is unknown.
/// The line is the one that writes the literal: the `set` for a plain `${NAME}`.
pub(crate) fn expand(raw: &str, line: usize, vars: &Vars) -> Option<Declared> {
    let mut value = raw.to_string();
    let mut line = line;
    for _ in 0..8 {
        let Some(start) = value.find("${") else {
            return Some(Declared {
                version: value,
                line,
            });
        };
        let end = start + value[start..].find('}')?;
        let name = &value[start + 2..end];
        let (sub, sub_line) = vars.get(name)?.clone()?;
        if start == 0 && end + 1 == value.len() {
            line = sub_line;
        }
        value = format!("{}{}{}", &value[..start], sub, &value[end + 1..]);
    }
    None
}

/// Splits CMake source into command invocations. Enough of the CMake language for the top of a
/// CMakeLists.txt: line and bracket comments, quoted and bracket arguments, nested parentheses.
pub(crate) fn parse(text: &str) -> Vec<Command> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut line = 1;
    let mut out = Vec::new();
    let skip_comment = |i: &mut usize, line: &mut usize| {
        // At '#': a bracket comment `#[==[ … ]==]` or to the end of the line.
        *i += 1;
        if let Some(end) = bracket_end(&chars, *i) {
            *line += chars[*i..end].iter().filter(|c| **c == '\n').count();
            *i = end;
        } else {
            while *i < chars.len() && chars[*i] != '\n' {
                *i += 1;
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '#' {
            skip_comment(&mut i, &mut line);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect::<String>().to_lowercase();
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            if i >= chars.len() || chars[i] != '(' {
                continue;
            }
            i += 1;
            let mut args = Vec::new();
            let mut depth = 0;
            while i < chars.len() {
                let c = chars[i];
                if c == '\n' {
                    line += 1;
                    i += 1;
                } else if c == ' ' || c == '\t' || c == '\r' {
                    i += 1;
                } else if c == '#' {
                    skip_comment(&mut i, &mut line);
                } else if c == '(' {
                    depth += 1;
                    i += 1;
                } else if c == ')' {
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                } else if c == '"' {
                    let arg_line = line;
                    let mut arg = String::new();
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        if chars[i] == '\\' && i + 1 < chars.len() {
                            i += 1;
                        }
                        if chars[i] == '\n' {
                            line += 1;
                        }
                        arg.push(chars[i]);
                        i += 1;
                    }
                    i += 1;
                    args.push((arg, arg_line));
                } else if c == '[' && bracket_end(&chars, i).is_some() {
                    let end = bracket_end(&chars, i).expect("checked");
                    let level = chars[i + 1..].iter().take_while(|c| **c == '=').count();
                    let arg: String = chars[i + level + 2..end - level - 2].iter().collect();
                    args.push((arg, line));
                    line += chars[i..end].iter().filter(|c| **c == '\n').count();
                    i = end;
                } else {
                    let arg_line = line;
                    let mut arg = String::new();
                    while i < chars.len() && !" \t\r\n()#\"".contains(chars[i]) {
                        arg.push(chars[i]);
                        i += 1;
                    }
                    args.push((arg, arg_line));
                }
            }
            out.push(Command { name, args });
        } else {
            i += 1;
        }
    }
    out
}

/// At `chars[i] == '['`: the index just past the matching `]=…=]` of a bracket `[=…=[`.
fn bracket_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let mut j = i + 1;
    while chars.get(j) == Some(&'=') {
        j += 1;
    }
    if chars.get(j) != Some(&'[') {
        return None;
    }
    let level = j - i - 1;
    let mut k = j + 1;
    while k < chars.len() {
        if chars[k] == ']'
            && chars[k + 1..].iter().take(level).all(|c| *c == '=')
            && chars.get(k + 1 + level) == Some(&']')
        {
            return Some(k + level + 2);
        }
        k += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Option<(String, usize)> {
        declared_in(text).map(|d| (d.version, d.line))
    }

    #[test]
    fn rocm_setup_version_literal() {
        let text = "cmake_minimum_required(VERSION 3.16)\nproject(rocsparse LANGUAGES CXX)\n# rocm_setup_version(VERSION 9.9.9)\nrocm_setup_version(VERSION 3.4.0)\n";
        assert_eq!(v(text), Some(("3.4.0".into(), 4)));
    }

    #[test]
    fn rocm_setup_version_through_a_variable() {
        let text = "cmake_minimum_required( VERSION 3.16.8 )\nset ( VERSION_STRING \"4.4.1\" )\nproject(rocblas LANGUAGES CXX)\nrocm_setup_version( VERSION ${VERSION_STRING} )\n";
        assert_eq!(v(text), Some(("4.4.1".into(), 2)));
        let parts = "set(V_MAJOR 1)\nset(V_MINOR 0)\nset(V_PATCH 32)\nrocm_setup_version(VERSION ${V_MAJOR}.${V_MINOR}.${V_PATCH})\n";
        assert_eq!(v(parts), Some(("1.0.32".into(), 4)));
    }

    #[test]
    fn project_version_and_version_string() {
        assert_eq!(
            v(
                "cmake_minimum_required(VERSION 3.16)\nproject(hipcub\n  VERSION 3.3.0\n  LANGUAGES CXX)\n"
            ),
            Some(("3.3.0".into(), 3))
        );
        assert_eq!(
            v("project(hipfft)\nset(VERSION_STRING \"1.0.18\")\n"),
            Some(("1.0.18".into(), 2))
        );
    }

    #[test]
    fn what_cannot_be_told_is_none() {
        assert_eq!(v("project(x)\n"), None);
        assert_eq!(
            v("rocm_setup_version(VERSION ${FROM_GIT})\nproject(x VERSION 1.0)\n"),
            None
        );
        assert_eq!(
            v(
                "if(A)\nset(VERSION_STRING 1.0.0)\nelse()\nset(VERSION_STRING 2.0.0)\nendif()\nrocm_setup_version(VERSION ${VERSION_STRING})\n"
            ),
            None
        );
        assert_eq!(v("project(x VERSION ${CMAKE_PROJECT_VERSION})\n"), None);
        assert_eq!(
            v("#[[\nrocm_setup_version(VERSION 1.0.0)\n]]\nproject(x)\n"),
            None
        );
    }

    #[test]
    fn suffixes_match_but_other_versions_do_not() {
        assert!(matches("3.4.0", "3.4.0"));
        assert!(matches("3.4.0-1", "3.4.0"));
        assert!(!matches("3.4.1", "3.4.0"));
        assert!(!matches("3.4.01", "3.4.0"));
        assert!(!matches("3.4", "3.4.0"));
    }
}
