//! `depends` and `build-depends`: the checks one file's dependency lists must pass.

use std::sync::Arc;

use crate::diag::reader::Sp;
use crate::diag::{Diagnostic, Diagnostics, SourceFile};

use super::is_component_name;

/// The key of a recipe's build-only dependencies.
pub const BUILD_DEPENDS: &str = "build-depends";

/// One file's `depends` and `build-depends`: no self-dependency, no name twice in a list or
/// in both, only component names. Names the line lacks are the catalog's to report.
pub(super) fn check_depends(
    file: &Arc<SourceFile>,
    name: Option<&str>,
    depends: &[Sp<String>],
    build_depends: &[Sp<String>],
    d: &mut Diagnostics,
) {
    check_dependency_list(file, name, "depends", depends, d);
    check_dependency_list(file, name, BUILD_DEPENDS, build_depends, d);
    for (i, b) in build_depends.iter().enumerate() {
        // A name listed twice in build-depends was reported above; its first listing speaks.
        if build_depends[..i].iter().any(|p| p.value == b.value) {
            continue;
        }
        if let Some(r) = depends.iter().find(|r| r.value == b.value) {
            d.push(listed_in_both(file, r, b));
        }
    }
}

fn check_dependency_list(
    file: &Arc<SourceFile>,
    name: Option<&str>,
    key: &str,
    list: &[Sp<String>],
    d: &mut Diagnostics,
) {
    for (i, dep) in list.iter().enumerate() {
        if Some(dep.as_str()) == name {
            let message = if key == BUILD_DEPENDS {
                format!("component \"{}\" lists itself in {key}", dep.value)
            } else {
                format!("component \"{}\" depends on itself", dep.value)
            };
            d.push(
                Diagnostic::new(message)
                    .at(file, dep.span.clone(), "self-dependency")
                    .hint(format!("remove it from {key}")),
            );
        } else if let Some(first) = list[..i].iter().find(|p| p.value == dep.value) {
            d.push(
                Diagnostic::new(format!("dependency \"{}\" is listed twice", dep.value))
                    .at(file, dep.span.clone(), "listed again here")
                    .related(file, first.span.clone(), "first listed here")
                    .hint("list each dependency once"),
            );
        } else if !is_component_name(dep) {
            let example = if key == BUILD_DEPENDS {
                "tensile"
            } else {
                "rocprim"
            };
            d.push(
                Diagnostic::new(format!("invalid dependency name \"{}\"", dep.value))
                    .at(file, dep.span.clone(), "not a component name")
                    .hint(format!(
                        "{key} lists component names of this release line, e.g. [\"{example}\"]"
                    )),
            );
        }
    }
}

/// A dependency in both lists: whether it is installed with the component would be unclear.
fn listed_in_both(file: &Arc<SourceFile>, run: &Sp<String>, build: &Sp<String>) -> Diagnostic {
    Diagnostic::new(format!(
        "dependency \"{}\" is in both depends and {BUILD_DEPENDS}",
        build.value
    ))
    .at(file, build.span.clone(), "needed only to build, says build-depends")
    .related(file, run.span.clone(), "needed at run time, says depends")
    .hint(format!(
        "keep it only in depends when the installed component uses it (depends are built first and mounted in the build too), else only in {BUILD_DEPENDS}"
    ))
}
