//! Shell completion that knows the catalog: component and bundle names, GPU targets and
//! release lines come from the same catalog the command would read, so a completion never
//! offers a name the command refuses. The shell asks the binary each time (clap's
//! `COMPLETE=<shell> rocforge` protocol), which is what lets the names follow the line.

use std::ffi::OsStr;

use clap::{Command, CommandFactory};
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};

use rocforge::catalog::{Catalog, CatalogRoot};
use rocforge::diag::Diagnostics;

use super::Args;

/// The name the shell registration runs and the variable that switches the binary into
/// answering completions.
const BIN: &str = "rocforge";
const VAR: &str = "COMPLETE";

/// The command tree with a completer on every argument that takes a catalog name.
pub fn command() -> Command {
    with_completers(Args::command())
}

fn with_completers(cmd: Command) -> Command {
    cmd.mut_args(|a| match a.get_id().as_str() {
        // Component lists, single components and `store rm`'s KEY|COMPONENT all take names of
        // the line; `uninstall` takes installed ones, which are the line's too.
        "components" | "component" | "names" | "entries" => {
            a.add(ArgValueCompleter::new(components))
        }
        "arch" | "against" => a.add(ArgValueCompleter::new(targets)),
        "release" => a.add(ArgValueCompleter::new(releases)),
        _ => a,
    })
    .mut_subcommands(with_completers)
}

/// Answers a completion request when the shell made one (the variable is set) and exits;
/// otherwise returns and the command runs.
pub fn answer_if_asked() {
    clap_complete::CompleteEnv::with_factory(command)
        .var(VAR)
        .bin(BIN)
        .complete();
}

/// The script a shell sources to ask the binary for completions.
pub fn registration(shell: clap_complete::Shell) -> std::io::Result<Vec<u8>> {
    use clap_complete::env::EnvCompleter;
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let completer: &dyn EnvCompleter = shells.completer(&name).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("no completion registration for {name}"),
        )
    })?;
    let mut script = Vec::new();
    completer.write_registration(VAR, BIN, BIN, BIN, &mut script)?;
    Ok(script)
}

/// The catalog the command line would read: --recipes and --release reach a completion only
/// through their environment variables, since the shell hands over the word being completed.
fn catalog_root() -> CatalogRoot {
    match std::env::var_os("ROCFORGE_RECIPES") {
        Some(dir) => CatalogRoot::Dir(dir.into()),
        None => CatalogRoot::Embedded,
    }
}

fn components(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(current) = current.to_str() else {
        return Vec::new();
    };
    let root = catalog_root();
    let release = std::env::var("ROCFORGE_RELEASE").ok();
    // A catalog that does not load completes nothing: the command itself explains why.
    let Ok(catalog) = Catalog::load(root, release.as_deref()) else {
        return Vec::new();
    };
    let recipes = catalog.recipes.values().map(|r| {
        CompletionCandidate::new(r.name.value.clone()).help(Some(r.summary.clone().into()))
    });
    let bundles = catalog.release.bundles.iter().map(|(name, members)| {
        CompletionCandidate::new(name.clone()).help(Some(
            format!(
                "bundle: {}",
                members
                    .iter()
                    .map(|m| m.value.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
            .into(),
        ))
    });
    recipes
        .chain(bundles)
        .filter(|c| c.get_value().to_string_lossy().starts_with(current))
        .collect()
}

/// Completes the last entry of a comma list of target IDs, keeping the entries before it.
fn targets(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(current) = current.to_str() else {
        return Vec::new();
    };
    let (done, last) = match current.rsplit_once(',') {
        Some((done, last)) => (format!("{done},"), last),
        None => (String::new(), current),
    };
    let mut diags = Diagnostics::default();
    let Ok(table) = rocforge::catalog::load_arches(&catalog_root(), &mut diags) else {
        return Vec::new();
    };
    let listed: Vec<&str> = done.split(',').collect();
    table
        .iter()
        .filter(|a| a.llvm.starts_with(last) && !listed.contains(&a.llvm.as_str()))
        .map(|a| {
            CompletionCandidate::new(format!("{done}{}", a.llvm)).help(Some(a.name.clone().into()))
        })
        .collect()
}

fn releases(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(current) = current.to_str() else {
        return Vec::new();
    };
    let Ok(names) = rocforge::app::release_names(&catalog_root(), None) else {
        return Vec::new();
    };
    names
        .into_iter()
        .filter(|n| n.starts_with(current))
        .map(CompletionCandidate::new)
        .collect()
}
