//! Whether a component and a dependency it asks for by version pair: rocBLAS's CMakeLists.txt
//! says `find_package(Tensile ${TENSILE_VERSION} EXACT …)`, and a tensile pinned from another
//! release fails that call only after the venv is made, hours into the build for some pairs
//! (or, worse, a wrong pair with no version check in between builds a library that mismatches
//! at run time). Both sides are read from the trees, without CMake:
//!
//! - what the component asks for: each `find_package(<Name> <version> […EXACT…])` of its top
//!   CMakeLists.txt whose `<Name>` is the name of one of its `depends` or `build-depends`
//!   (case aside; rocBLAS needs Tensile only to build), with
//!   variables expanded from the file's `set()` calls and the recipe's `-DVAR=value` arguments
//!   (a cache variable given on the command line wins over the file's default);
//! - what the dependency is: the `PACKAGE_VERSION` of its `<Name>ConfigVersion.cmake` or
//!   `<name>-config-version.cmake` (what find_package itself reads: Tensile ships one in its
//!   source, installed CMake packages have one in lib/cmake), else the `__version__` of a
//!   Python package directory `<Name>/__init__.py` at its top, else the version its top
//!   CMakeLists.txt declares.
//!
//! Anything that cannot be told (a version computed at configure time, two calls or files that
//! disagree) is not checked: a wrong error would block a good build.

use std::path::Path;

use super::version::{self, Declared, Vars};
use crate::recipe::{BuildSystem, Recipe, Source};

/// A versioned `find_package` call of a component's top CMakeLists.txt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    /// The package name as written in the call.
    pub package: String,
    /// The component of `depends` or `build-depends` it names.
    pub dependency: String,
    pub version: String,
    pub exact: bool,
    /// Where the call is: `CMakeLists.txt:198` (under `subdir` for monorepos).
    pub at: String,
}

/// The version a dependency's tree says it is, and the file (relative to the tree) and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub version: String,
    pub at: String,
}

/// A pair that CMake's find_package would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub component: String,
    pub component_version: String,
    pub want: Want,
    pub found: Found,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} wants {} {}{} ({}), {}'s source is {} ({})",
            self.component,
            self.component_version,
            self.want.package,
            self.want.version,
            if self.want.exact {
                " EXACT"
            } else {
                " or newer"
            },
            self.want.at,
            self.want.dependency,
            self.found.version,
            self.found.at
        )
    }
}

impl crate::diag::Hint for Mismatch {
    fn hint(&self) -> String {
        format!(
            "pin {dep} and {comp} from the same release: a {dep} tag or rev whose source is {want}, or a {comp} whose find_package asks for {found}",
            dep = self.want.dependency,
            comp = self.component,
            want = self.want.version,
            found = self.found.version,
        )
    }
}

/// The versioned find_package calls of `recipe`'s tree that name one of its dependencies. Only
/// cmake builds are read: a script or copy build's CMakeLists.txt may not be what runs.
pub fn wants(recipe: &Recipe, tree: &Path) -> Vec<Want> {
    if !matches!(recipe.build.system, BuildSystem::Cmake { .. })
        || recipe.all_depends().next().is_none()
    {
        return Vec::new();
    }
    let top = match &recipe.source {
        Source::Git {
            subdir: Some(s), ..
        } => format!("{s}/"),
        _ => String::new(),
    };
    let Ok(text) = std::fs::read(tree.join(&top).join("CMakeLists.txt")) else {
        return Vec::new();
    };
    let deps: Vec<&str> = recipe.all_depends().map(|d| d.value.as_str()).collect();
    wants_in(
        &String::from_utf8_lossy(&text),
        &recipe.build.args,
        &deps,
        &format!("{top}CMakeLists.txt"),
    )
}

pub fn wants_in(text: &str, args: &[String], deps: &[&str], file: &str) -> Vec<Want> {
    let commands = version::parse(text);
    let mut vars: Vars = version::variables(&commands);
    for a in args {
        let Some((name, value)) = a.strip_prefix("-D").and_then(|d| d.split_once('=')) else {
            continue;
        };
        let name = name.split(':').next().unwrap_or(name);
        // Line 0: the value comes from the recipe, not the file; the call's line is reported.
        vars.insert(name.to_string(), Some((value.to_string(), 0)));
    }
    let mut out: Vec<Want> = Vec::new();
    let mut ambiguous: Vec<String> = Vec::new();
    for c in commands.iter().filter(|c| c.name == "find_package") {
        let (Some((package, line)), Some((raw, _))) = (c.args.first(), c.args.get(1)) else {
            continue;
        };
        let Some(dependency) = deps.iter().find(|d| d.eq_ignore_ascii_case(package)) else {
            continue;
        };
        let Some(Declared { version, .. }) = version::expand(raw, *line, &vars) else {
            continue;
        };
        if !version::is_version(&version) {
            continue;
        }
        let want = Want {
            package: package.clone(),
            dependency: dependency.to_string(),
            version,
            exact: c.args.iter().any(|(a, _)| a == "EXACT"),
            at: format!("{file}:{line}"),
        };
        match out.iter().find(|w| w.dependency == want.dependency) {
            Some(w) if w.version != want.version || w.exact != want.exact => {
                ambiguous.push(want.dependency)
            }
            Some(_) => {}
            None => out.push(want),
        }
    }
    out.retain(|w| !ambiguous.contains(&w.dependency));
    out
}

/// The version `tree` (a dependency's source, or the merged install trees of a build's
/// dependencies) says `package` is.
pub fn found(tree: &Path, package: &str) -> Option<Found> {
    let mut configs = Vec::new();
    config_version_files(tree, tree, package, 0, &mut configs);
    if !configs.is_empty() {
        let mut found: Option<Found> = None;
        for (rel, text) in &configs {
            let Some(f) = package_version_in(text, rel) else {
                continue;
            };
            match &found {
                Some(prev) if prev.version != f.version => return None,
                Some(_) => {}
                None => found = Some(f),
            }
        }
        if found.is_some() {
            return found;
        }
    }
    let init = std::fs::read_dir(tree).ok()?.flatten().find_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path().join("__init__.py");
        (name.eq_ignore_ascii_case(package) && path.is_file()).then_some((name, path))
    });
    if let Some((dir, path)) = init
        && let Some(text) = read_text(&path)
        && let Some((version, line)) = python_version(&text)
    {
        return Some(Found {
            version,
            at: format!("{dir}/__init__.py:{line}"),
        });
    }
    // A CMakeLists.txt that cannot be read (a special file, too large) tells no version.
    version::declared(tree).ok().flatten().map(|d| Found {
        version: d.version,
        at: format!("CMakeLists.txt:{}", d.line),
    })
}

/// A version file of a source or an install tree: regular, small and text, else nothing (a
/// FIFO or a device planted by the source must not block or fill memory).
fn read_text(path: &Path) -> Option<String> {
    let bytes = crate::fsutil::read_regular(path, 1 << 20).ok()?;
    String::from_utf8(bytes).ok()
}

/// Whether `found` satisfies `want` as find_package would: EXACT is equality of the numeric
/// components (4.43 is 4.43.0), otherwise a version no older than asked for.
pub fn satisfies(want: &Want, found: &Found) -> bool {
    let parse = |v: &str| -> Option<Vec<u64>> {
        let v = v.split(['-', '+', '~', '_']).next().unwrap_or(v);
        v.split('.').map(|p| p.parse().ok()).collect()
    };
    let (Some(mut w), Some(mut f)) = (parse(&want.version), parse(&found.version)) else {
        return true;
    };
    let n = w.len().max(f.len());
    w.resize(n, 0);
    f.resize(n, 0);
    if want.exact { w == f } else { f >= w }
}

/// Every pair of `recipe`'s tree with its dependencies that does not match; `found_for` gives
/// a dependency's version (None: cannot be told, not checked).
pub fn mismatches(
    recipe: &Recipe,
    tree: &Path,
    mut found_for: impl FnMut(&Want) -> Option<Found>,
) -> Vec<Mismatch> {
    wants(recipe, tree)
        .into_iter()
        .filter_map(|want| {
            let found = found_for(&want)?;
            (!satisfies(&want, &found)).then(|| Mismatch {
                component: recipe.name.value.clone(),
                component_version: recipe.version.clone(),
                want,
                found,
            })
        })
        .collect()
}

fn config_version_files(
    root: &Path,
    dir: &Path,
    package: &str,
    depth: usize,
    out: &mut Vec<(String, String)>,
) {
    // Deep enough for lib/cmake/<name>/ and share/rocforge/tensile/Tensile/cmake/.
    if depth > 8 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let names = [
        format!("{package}ConfigVersion.cmake"),
        format!("{}-config-version.cmake", package.to_lowercase()),
    ];
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            if name != ".git" {
                config_version_files(root, &e.path(), package, depth + 1, out);
            }
        } else if names.iter().any(|n| n.eq_ignore_ascii_case(&name))
            && let Some(text) = read_text(&e.path())
        {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap_or(&e.path())
                .to_path_buf();
            out.push((rel.display().to_string(), text));
        }
    }
}

/// `set(PACKAGE_VERSION …)` of a package version file, expanded (Tensile composes it from
/// `TENSILE_VERSION_MAJOR` and friends; CMake's generated files write it literally).
fn package_version_in(text: &str, file: &str) -> Option<Found> {
    let commands = version::parse(text);
    let vars = version::variables(&commands);
    let (raw, line) = vars.get("PACKAGE_VERSION")?.clone()?;
    let d = version::expand(&raw, line, &vars)?;
    version::is_version(&d.version).then(|| Found {
        version: d.version,
        at: format!("{file}:{line}"),
    })
}

/// `__version__ = "x.y.z"` at the start of a line, once.
fn python_version(text: &str) -> Option<(String, usize)> {
    let mut found = None;
    for (i, l) in text.lines().enumerate() {
        let Some(rest) = l.strip_prefix("__version__") else {
            continue;
        };
        let v = rest
            .trim_start()
            .strip_prefix('=')?
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        if !version::is_version(v) || found.is_some() {
            return None;
        }
        found = Some((v.to_string(), i + 1));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROCBLAS: &str = "cmake_minimum_required( VERSION 3.16.8 )\nset ( VERSION_STRING \"4.4.0\" )\nproject(rocblas LANGUAGES CXX)\nif( BUILD_WITH_TENSILE )\n    set( TENSILE_VERSION 4.42.0 CACHE STRING \"The version of Tensile to be used\")\n    find_package(Tensile ${TENSILE_VERSION} EXACT REQUIRED HIP LLVM)\nendif()\nfind_package( hip REQUIRED CONFIG PATHS ${HIP_DIR} )\n";

    #[test]
    fn find_package_through_a_cache_variable() {
        let w = wants_in(ROCBLAS, &[], &["tensile"], "CMakeLists.txt");
        assert_eq!(
            w,
            [Want {
                package: "Tensile".into(),
                dependency: "tensile".into(),
                version: "4.42.0".into(),
                exact: true,
                at: "CMakeLists.txt:6".into(),
            }]
        );
        // A -D on the command line wins over the file's cache default.
        let w = wants_in(
            ROCBLAS,
            &["-DTENSILE_VERSION:STRING=4.43.0".into()],
            &["tensile"],
            "CMakeLists.txt",
        );
        assert_eq!(w[0].version, "4.43.0");
        // Not a dependency, or no version asked: nothing to check.
        assert!(wants_in(ROCBLAS, &[], &["hip"], "CMakeLists.txt").is_empty());
        assert!(wants_in(ROCBLAS, &[], &[], "CMakeLists.txt").is_empty());
        let two = "find_package(Tensile 4.42.0 EXACT)\nfind_package(Tensile 4.43.0 EXACT)\n";
        assert!(wants_in(two, &[], &["tensile"], "CMakeLists.txt").is_empty());
    }

    #[test]
    fn tensile_config_version_and_python_version() {
        let text = "# hardcoded tensile version; also in Tensile/__init__.py\nset(TENSILE_VERSION_MAJOR  4)\nset(TENSILE_VERSION_MINOR 43)\nset(TENSILE_VERSION_PATCH  0)\n\nset(PACKAGE_VERSION \"${TENSILE_VERSION_MAJOR}.${TENSILE_VERSION_MINOR}.${TENSILE_VERSION_PATCH}\")\n";
        assert_eq!(
            package_version_in(text, "Tensile/cmake/TensileConfigVersion.cmake"),
            Some(Found {
                version: "4.43.0".into(),
                at: "Tensile/cmake/TensileConfigVersion.cmake:6".into()
            })
        );
        assert_eq!(
            python_version("from x import y\n\n__version__ = \"4.43.0\"\n"),
            Some(("4.43.0".into(), 3))
        );
        assert_eq!(python_version("__version__ = compute()\n"), None);
    }

    #[test]
    fn exact_means_equal_and_otherwise_no_older() {
        let want = |v: &str, exact| Want {
            package: "Tensile".into(),
            dependency: "tensile".into(),
            version: v.into(),
            exact,
            at: String::new(),
        };
        let found = |v: &str| Found {
            version: v.into(),
            at: String::new(),
        };
        assert!(satisfies(&want("4.43.0", true), &found("4.43.0")));
        assert!(satisfies(&want("4.43", true), &found("4.43.0")));
        assert!(!satisfies(&want("4.42.0", true), &found("4.43.0")));
        assert!(satisfies(&want("4.42.0", false), &found("4.43.0")));
        assert!(!satisfies(&want("4.43.0", false), &found("4.42.0")));
    }
}
