//! Turns a recipe's `[build]` into the commands run in the build environment.
//!
//! Inside the container: the patched source at /src (read-only), dependencies' install trees
//! merged at the release prefix (read-only), a scratch build directory at /build, extra inputs
//! at /inputs/<name> (read-only), a ccache directory at /ccache, and the output collected
//! through DESTDIR=/out. Every recipe value reaches the shell quoted: no recipe string can
//! inject a command.

use std::collections::BTreeMap;

use crate::plan::GpuFlags;
use crate::process::shell_quote;
use crate::recipe::{BuildSystem, Recipe, Source};

pub const SRC: &str = "/src";
pub const BUILD: &str = "/build";
pub const OUT: &str = "/out";
pub const CCACHE: &str = "/ccache";
pub const INPUTS: &str = "/inputs";

/// Where a build finds its directories. Scripts refer to them only through these environment
/// variables, so the same script runs in a container (fixed paths) and on the host.
#[derive(Debug, Clone)]
pub struct Paths {
    pub src: String,
    pub build: String,
    pub out: String,
    /// The dependencies' merged install trees.
    pub deps: String,
    pub ccache: String,
    pub inputs: String,
}

impl Paths {
    /// The paths inside the build container; dependencies are mounted at the prefix itself.
    pub fn container(prefix: &str) -> Paths {
        Paths {
            src: SRC.into(),
            build: BUILD.into(),
            out: OUT.into(),
            deps: prefix.into(),
            ccache: CCACHE.into(),
            inputs: INPUTS.into(),
        }
    }
}

/// The shell script for a cmake or script build; None for `copy`, which needs no runtime.
pub fn script(recipe: &Recipe, flags: &GpuFlags, prefix: &str, jobs: usize) -> Option<String> {
    let root = match &recipe.source {
        Source::Git {
            subdir: Some(s), ..
        } => format!("\"$SRC\"/{}", shell_quote(s)),
        _ => "\"$SRC\"".to_string(),
    };
    match &recipe.build.system {
        BuildSystem::Cmake {
            pre_configure,
            post_install,
        } => {
            let mut args: Vec<String> = vec![
                format!("-DCMAKE_INSTALL_PREFIX={prefix}"),
                // The network is off: FetchContent must use what [[inputs]] provided.
                "-DFETCHCONTENT_FULLY_DISCONNECTED=ON".to_string(),
            ];
            args.extend(recipe.build.args.iter().cloned());
            args.extend(flags.cmake.iter().cloned());
            // Tensile ignores -j; it reads its own thread count.
            if recipe
                .build
                .args
                .iter()
                .any(|a| a.starts_with("-DTensile_"))
            {
                args.push(format!("-DTensile_CPU_THREADS={jobs}"));
            }
            let quoted = args
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" ");
            let pre = pre_configure
                .as_deref()
                .map(|p| format!("echo '==> pre-configure'\n{p}\n"))
                .unwrap_or_default();
            let post = post_install
                .as_deref()
                .map(|p| format!("echo '==> post-install'\n{p}\n"))
                .unwrap_or_default();
            // The drain's gate goes before ccache (build::drain); a build directory configured
            // without it keeps its launcher, as a new one would make ninja redo every compile.
            let gate = format!("$BUILD/{}", super::drain::GATE);
            let gate_text = shell_quote(&super::drain::gate_script());
            Some(format!(
                "set -eu\n\
                 printf '%s' {gate_text} > \"{gate}\"\n\
                 chmod 0755 \"{gate}\"\n\
                 launch=\"\"\n\
                 if command -v ccache >/dev/null 2>&1; then launch=ccache; fi\n\
                 if [ ! -f \"$BUILD/CMakeCache.txt\" ] || grep -q '{gate_name}' \"$BUILD/CMakeCache.txt\"; then launch=\"{gate}${{launch:+;$launch}}\"; fi\n\
                 launcher=\"\"\n\
                 if [ -n \"$launch\" ]; then launcher=\"-DCMAKE_C_COMPILER_LAUNCHER=$launch -DCMAKE_CXX_COMPILER_LAUNCHER=$launch -DCMAKE_HIP_COMPILER_LAUNCHER=$launch\"; fi\n\
                 generator=\"\"\n\
                 if command -v ninja >/dev/null 2>&1; then generator=\"-G Ninja\"; fi\n\
                 {pre}\
                 echo '==> configure'\n\
                 cmake -S {root} -B \"$BUILD\" $generator $launcher \"-DCMAKE_PREFIX_PATH=$ROCFORGE_DEPS\" {quoted}\n\
                 echo '==> build'\n\
                 cmake --build \"$BUILD\" --parallel {jobs}\n\
                 echo '==> install'\n\
                 cmake --install \"$BUILD\"\n\
                 {post}",
                gate_name = super::drain::GATE,
            ))
        }
        // A script's own CMake or setup.py build joins the drain by naming
        // $ROCFORGE_COMPILER_LAUNCHER as its compiler launcher (the gate, then ccache).
        BuildSystem::Script { script } => {
            let gate = format!("$BUILD/{}", super::drain::GATE);
            let gate_text = shell_quote(&super::drain::gate_script());
            Some(format!(
                "set -eu\n\
                 printf '%s' {gate_text} > \"{gate}\"\n\
                 chmod 0755 \"{gate}\"\n\
                 ROCFORGE_COMPILER_LAUNCHER=\"{gate}\"\n\
                 if command -v ccache >/dev/null 2>&1; then ROCFORGE_COMPILER_LAUNCHER=\"{gate};ccache\"; fi\n\
                 export ROCFORGE_COMPILER_LAUNCHER\n\
                 cd {root}\n\
                 echo '==> build'\n\
                 {script}\n"
            ))
        }
        BuildSystem::Copy { .. } => None,
    }
}

/// The fixed environment of a build: nothing from the host.
pub fn environment(
    recipe: &Recipe,
    flags: &GpuFlags,
    prefix: &str,
    paths: &Paths,
    jobs: usize,
    source_date_epoch: i64,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert("SOURCE_DATE_EPOCH".into(), source_date_epoch.to_string());
    env.insert("LC_ALL".into(), "C".into());
    env.insert("TZ".into(), "UTC".into());
    env.insert("HOME".into(), format!("{}/.home", paths.build));
    env.insert("CCACHE_DIR".into(), paths.ccache.clone());
    env.insert("CCACHE_BASEDIR".into(), paths.src.clone());
    env.insert("SRC".into(), paths.src.clone());
    env.insert("BUILD".into(), paths.build.clone());
    // `cmake --install` and `make install` both honour DESTDIR.
    env.insert("DESTDIR".into(), paths.out.clone());
    env.insert("PREFIX".into(), prefix.into());
    env.insert("ROCFORGE_DEPS".into(), paths.deps.clone());
    env.insert("INPUTS".into(), paths.inputs.clone());
    env.insert("JOBS".into(), jobs.to_string());
    // Tools that ignore -j: PyTorch reads MAX_JOBS, CMake's default build reads this.
    env.insert("MAX_JOBS".into(), jobs.to_string());
    env.insert("CMAKE_BUILD_PARALLEL_LEVEL".into(), jobs.to_string());
    env.extend(recipe.build.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(flags.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_strings_are_quoted() {
        assert_eq!(shell_quote("-DX=a;b"), "'-DX=a;b'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
