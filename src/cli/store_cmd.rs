//! `store list`, `store show`, `store path`, `store rm` and `store gc`.

use rocforge::arch::{TargetId, comma_list};
use rocforge::diag::Hint;
use rocforge::ids::{ComponentName, ContentKey};
use std::process::ExitCode;

use super::{CliError, Format, Global, Result};
use rocforge::diag::Diagnostic;
use rocforge::store::output;

fn store(g: &Global) -> rocforge::store::Store {
    super::options(g).store()
}

pub fn store_list(g: &Global) -> Result<ExitCode> {
    let store = store(g);
    let listing = output::Listing::of(&store, store.entries());
    if g.format == Format::Json {
        super::print_json(&listing);
        return Ok(ExitCode::SUCCESS);
    }
    if listing.entries.is_empty() {
        note!(g, "{} is empty", store.root().display());
        return Ok(ExitCode::SUCCESS);
    }
    for e in &listing.entries {
        println!(
            "{}  {:<16} {:<10} {:<14} {:<7} {:>10}",
            &e.key[..12],
            e.component,
            e.version,
            comma_list(&e.targets),
            e.runtime,
            e.tree_bytes
                .map_or_else(|| "?".into(), rocforge::units::format_size)
        );
    }
    note!(
        g,
        "{} {}, {} in {} (`rocforge store gc` removes those a newer build replaced)",
        listing.entries.len(),
        if listing.entries.len() == 1 {
            "entry"
        } else {
            "entries"
        },
        rocforge::units::format_size(listing.disk_bytes()),
        store.root().display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Where each component's build for these targets is in the store, by the plan's content key;
/// nothing is built. A component not built yet is an error naming the build command, so
/// `"$(rocforge store path C)"` never starts a build silently.
pub fn store_path(
    g: &Global,
    components: &[String],
    runtime: &super::RuntimeArg,
) -> Result<ExitCode> {
    let session = super::session_with(
        g,
        std::sync::Arc::new(super::progress::TermReporter::new(g)),
    )?;
    let req = rocforge::app::build::Request {
        components,
        runtime: runtime.runtime.choice(),
        ..Default::default()
    };
    let planned = rocforge::app::build::plan(&session, &req)?;
    let plan = &planned.plan;
    let steps: Vec<_> = plan.requested.iter().filter_map(|n| plan.step(n)).collect();
    let missing: Vec<ComponentName> = steps
        .iter()
        .filter(|s| s.needs_build())
        .map(|s| s.component.clone())
        .collect();
    if missing.is_empty() {
        for step in steps {
            println!("{}", session.store.tree(&step.key).display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    Err(Diagnostic::new(format!(
        "not built yet for {}: {}",
        comma_list(&plan.targets),
        missing.join(", ")
    ))
    .hint(format!(
        "build it first: `rocforge{} build {} --arch {}`",
        g.release
            .as_ref()
            .map(|r| format!(" --release {r}"))
            .unwrap_or_default(),
        missing.join(" "),
        comma_list(&plan.targets)
    ))
    .into())
}

pub fn store_show(g: &Global, key: &str) -> Result<ExitCode> {
    let store = store(g);
    let e = store
        .find(key)
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    if g.format == Format::Json {
        super::print_json(&output::Shown::new(e));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} {} ({})", e.component, e.version, e.release);
    println!("  key        {}", e.key);
    println!("  targets    {}", comma_list(&e.targets));
    println!(
        "  runtime    {}{}",
        e.runtime,
        if e.reproducible {
            ""
        } else {
            " (not reproducible)"
        }
    );
    if let Some(i) = &e.image {
        println!(
            "  image      {}{}",
            i.reference,
            i.digest
                .as_ref()
                .map(|d| format!(" @ {d}{}", if i.local { " (local)" } else { "" }))
                .unwrap_or_default()
        );
    }
    if let Some(c) = &e.source_commit {
        println!("  source     {c}");
    }
    println!(
        "  built in   {}",
        rocforge::units::format_duration(e.duration_secs as u64)
    );
    println!("  tree       {}", store.tree(&e.key).display());
    println!(
        "  log        {}",
        store.entry_dir(&e.key).join("build.log").display()
    );
    println!(
        "  hash input {}",
        store.entry_dir(&e.key).join("hash-input.json").display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn store_gc(g: &Global, dry_run: bool) -> Result<ExitCode> {
    let store = store(g);
    // Keep the newest entry of each component for each target set; older ones are superseded.
    type Slot = (String, ComponentName, Vec<TargetId>);
    let mut newest: std::collections::BTreeMap<Slot, ContentKey> = Default::default();
    let entries = store.entries();
    for e in &entries {
        newest.insert(
            (e.release.clone(), e.component.clone(), e.targets.clone()),
            e.key.clone(),
        );
    }
    let mut removed = 0;
    for e in &entries {
        if newest.get(&(e.release.clone(), e.component.clone(), e.targets.clone())) == Some(&e.key)
        {
            continue;
        }
        println!(
            "{} {} {}",
            if dry_run { "would remove" } else { "removed" },
            &e.key[..12],
            e.component
        );
        if !dry_run {
            store
                .remove(&e.key)
                .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
        }
        removed += 1;
    }
    if !dry_run {
        for d in store.clean_staging() {
            println!("removed unfinished entry {}", d.display());
        }
    }
    note!(
        g,
        "{removed} superseded entr{} {}",
        if removed == 1 { "y" } else { "ies" },
        if dry_run { "to remove" } else { "removed" }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn store_rm(g: &Global, specs: &[String], dry_run: bool) -> Result<ExitCode> {
    let store = store(g);
    // Targets only narrow component names, and only when asked: resolved by the catalog.
    let targets = match &g.arch {
        Some(list) => Some(
            super::session(g)?
                .catalog
                .arches
                .resolve_list(list)
                .map_err(|e| Diagnostic::new(format!("--arch {list}: {e}")).hint(e.hint()))?,
        ),
        None => None,
    };
    let chosen = rocforge::app::store_rm::select(&store, specs, targets.as_deref())?;
    for e in &chosen {
        if !dry_run {
            rocforge::app::store_rm::remove(&store, e)?;
        }
        println!(
            "{} {}  {} {} {}",
            if dry_run { "would remove" } else { "removed" },
            &e.key[..12],
            e.component,
            e.version,
            comma_list(&e.targets)
        );
    }
    Ok(ExitCode::SUCCESS)
}
