//! Command definitions and their output. Only this module (and main) prints.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::json;

use rocforge::arch::{Arch, ArchTable, MatrixCores, TargetId};
use rocforge::catalog::{Catalog, CatalogError, CatalogRoot, export_embedded, load_arches};
use rocforge::diag::{Diagnostic, Diagnostics};
use rocforge::plan::{self, key::RuntimeKind, render};
use rocforge::store::Store;

const AFTER_HELP: &str = "\
Examples:
  rocforge list                                  components of the newest release line
  rocforge plan rocsparse --arch gfx90c          what a build of rocSPARSE for gfx90c would do
  rocforge plan rocsolver --arch gfx90c,gfx902 --format json
  rocforge arch show gfx90c                      what rocforge knows about a GPU target
  rocforge check --recipes ./recipes             validate an edited catalog

The shipped catalog is built in; `rocforge catalog export DIR` writes it out for editing and
`--recipes DIR/recipes` (or ROCFORGE_RECIPES) uses the edited copy.";

#[derive(Parser, Debug)]
#[command(name = "rocforge", version, about = "Build ROCm for the GPUs AMD leaves out (gfx90c, gfx902, ...), reproducibly",
    long_about = "rocforge turns TOML recipes of ROCm components into reproducible builds for GPU targets that \
AMD's packages leave out, such as the Vega iGPUs gfx90c (Renoir/Cezanne/Barcelo) and gfx902 (Raven Ridge), \
and checks that every library carries code for the GPUs you asked for.",
    after_help = AFTER_HELP)]
pub struct Args {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Debug)]
pub struct Global {
    /// A recipes/ directory to use instead of the built-in catalog (patches come from its sibling patches/)
    #[arg(long, global = true, env = "ROCFORGE_RECIPES", value_name = "DIR")]
    pub recipes: Option<PathBuf>,
    /// Release line, e.g. rocm-6.4.4 [default: the newest in the catalog]
    #[arg(long, global = true, env = "ROCFORGE_RELEASE", value_name = "NAME")]
    pub release: Option<String>,
    /// The store of built install trees [default: $XDG_DATA_HOME/rocforge/store]
    #[arg(long, global = true, env = "ROCFORGE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// GPU targets as a comma list of target IDs, e.g. gfx90c or gfx90c,gfx902:xnack- [default: the release's]
    #[arg(long, global = true, value_name = "LIST")]
    pub arch: Option<String>,
    /// Output format; github-matrix is for `plan` only
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    GithubMatrix,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the catalog's components: name, version, release line, summary
    List,
    /// Validate the whole catalog (every release line, the target table, patches); exit 1 listing every problem
    Check,
    /// Show what would be built, in order, with content keys, GPU flags and a resource estimate
    #[command(after_help = "\
Status is `build (new)` for a component the store never held, `build (X changed)` naming the inputs
that differ from the newest stored build, or `cached`.

Examples:
  rocforge plan rocsparse --arch gfx90c
  rocforge plan --format github-matrix --arch gfx90c,gfx902   one include list per dependency level
  rocforge plan rocblas --explain tensile                     the hash input behind tensile's key")]
    Plan {
        /// Components to build (with their dependencies) [default: the whole release line]
        components: Vec<String>,
        /// Print the hash input of one component instead of the plan
        #[arg(long, value_name = "COMPONENT")]
        explain: Option<String>,
        /// Where builds run: a container (podman or docker) or the host. Keys differ between the two.
        #[arg(long, value_enum, default_value_t = RuntimeKind::Container)]
        runtime: RuntimeKind,
    },
    /// The GPU target table
    #[command(subcommand)]
    Arch(ArchCommand),
    /// The built-in catalog
    #[command(subcommand)]
    Catalog(CatalogCommand),
}

#[derive(Subcommand, Debug)]
pub enum ArchCommand {
    /// Every known GPU target
    List,
    /// One target in full, e.g. `rocforge arch show gfx90c`
    Show {
        /// A target ID (gfx90c, gfx90c:xnack-) or a KFD gfx_target_version number (90012)
        target: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Write the built-in recipes/ and patches/ to DIR for editing; use them with --recipes DIR/recipes
    Export {
        /// Destination directory (must not exist, or be empty)
        dir: PathBuf,
    },
}

/// What a command failed with, rendered by main.
pub enum CliError {
    Diagnostics(Diagnostics),
    One(Diagnostic),
}

impl CliError {
    pub fn render(&self, color: bool) -> String {
        match self {
            CliError::Diagnostics(d) => {
                let mut out = String::new();
                for diag in d.iter() {
                    out += &diag.render(color);
                    out += "\n\n";
                }
                out += &format!("error: {} problem(s) found\n", d.len());
                out
            }
            CliError::One(d) => d.render(color) + "\n",
        }
    }
}

impl From<Diagnostic> for CliError {
    fn from(d: Diagnostic) -> Self {
        CliError::One(d)
    }
}

impl From<CatalogError> for CliError {
    fn from(e: CatalogError) -> Self {
        let hint = e.hint();
        match e {
            CatalogError::Invalid(d) => CliError::Diagnostics(d),
            other => CliError::One(Diagnostic::new(other.to_string()).maybe_hint(hint)),
        }
    }
}

type Result<T> = std::result::Result<T, CliError>;

fn root(g: &Global) -> CatalogRoot {
    match &g.recipes {
        Some(dir) => CatalogRoot::Dir(dir.clone()),
        None => CatalogRoot::Embedded,
    }
}

fn only_text_or_json(g: &Global, command: &str) -> Result<()> {
    if g.format == Format::GithubMatrix {
        return Err(Diagnostic::new(format!("--format github-matrix is not available for `{command}`"))
            .hint("github-matrix is a format of `rocforge plan`; use text or json here")
            .into());
    }
    Ok(())
}

pub fn run(args: Args) -> Result<ExitCode> {
    let g = &args.global;
    match &args.command {
        Command::List => list(g),
        Command::Check => check(g),
        Command::Plan {
            components,
            explain,
            runtime,
        } => plan_cmd(g, components, explain.as_deref(), *runtime),
        Command::Arch(ArchCommand::List) => arch_list(g),
        Command::Arch(ArchCommand::Show { target }) => arch_show(g, target),
        Command::Catalog(CatalogCommand::Export { dir }) => {
            let written = export_embedded(dir).map_err(|e| {
                Diagnostic::new(e.to_string()).hint("choose a new directory; nothing was written")
            })?;
            println!(
                "wrote {} files to {}\nuse it with: rocforge --recipes {} check",
                written.len(),
                dir.display(),
                dir.join("recipes").display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(g: &Global) -> Result<ExitCode> {
    only_text_or_json(g, "list")?;
    let root = root(g);
    let releases = match &g.release {
        Some(r) => vec![r.clone()],
        None => root.releases().map_err(|source| CatalogError::Io {
            path: root.describe(),
            source,
        })?,
    };
    if releases.is_empty() {
        return Err(CatalogError::NoReleases { root: root.describe() }.into());
    }
    let mut rows = Vec::new();
    for r in &releases {
        let c = Catalog::load(root.clone(), Some(r))?;
        for recipe in c.recipes.values() {
            rows.push((recipe.name.value.clone(), recipe.version.clone(), r.clone(), recipe.summary.clone()));
        }
    }
    if g.format == Format::Json {
        let items: Vec<_> = rows
            .iter()
            .map(|(n, v, r, s)| json!({"name": n, "version": v, "release": r, "summary": s}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({"schema": "rocforge.list/1", "components": items})).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let header = ("component", "version", "release", "summary");
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(header.0.len());
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(header.1.len());
    let w2 = rows.iter().map(|r| r.2.len()).max().unwrap_or(0).max(header.2.len());
    println!("{:w0$}  {:w1$}  {:w2$}  {}", header.0, header.1, header.2, header.3);
    for (n, v, r, s) in &rows {
        println!("{n:w0$}  {v:w1$}  {r:w2$}  {s}");
    }
    Ok(ExitCode::SUCCESS)
}

fn check(g: &Global) -> Result<ExitCode> {
    only_text_or_json(g, "check")?;
    let root = root(g);
    let (releases, diags) = match &g.release {
        Some(r) => match Catalog::load(root.clone(), Some(r)) {
            Ok(_) => (vec![r.clone()], Diagnostics::default()),
            Err(CatalogError::Invalid(d)) => (vec![r.clone()], d),
            Err(e) => return Err(e.into()),
        },
        None => Catalog::check_all(&root)?,
    };
    if g.format == Format::Json {
        let problems: Vec<_> = diags
            .iter()
            .map(|d| json!({"message": d.message, "location": d.position(), "hint": d.hint}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "schema": "rocforge.check/1",
                "catalog": root.describe(),
                "releases": releases,
                "ok": diags.is_empty(),
                "problems": problems,
            }))
            .unwrap_or_default()
        );
        return Ok(if diags.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    if !diags.is_empty() {
        return Err(CliError::Diagnostics(diags));
    }
    let mut components = 0;
    for r in &releases {
        components += Catalog::load(root.clone(), Some(r))?.recipes.len();
    }
    println!(
        "ok: {} ({} component recipe(s) in {} release line(s): {})",
        root.describe(),
        components,
        releases.len(),
        releases.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

fn targets(g: &Global, catalog: &Catalog) -> Result<Vec<TargetId>> {
    match &g.arch {
        None => {
            if catalog.release.arches.is_empty() {
                return Err(Diagnostic::new(format!("no --arch given and release {} names no default targets", catalog.release.name))
                    .hint("pass --arch gfx90c (or a comma list)")
                    .into());
            }
            Ok(catalog.release.arches.clone())
        }
        Some(list) => catalog.arches.resolve_list(list).map_err(|e| {
            CliError::One(Diagnostic::new(format!("--arch {list}: {e}")).hint(e.hint()))
        }),
    }
}

fn plan_cmd(g: &Global, components: &[String], explain: Option<&str>, runtime: RuntimeKind) -> Result<ExitCode> {
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let targets = targets(g, &catalog)?;
    let store = Store::open(g.store.clone().unwrap_or_else(Store::default_root));
    let req = plan::Request {
        components: components.to_vec(),
        targets,
        runtime,
    };
    let plan = plan::plan(&catalog, &req, &store)?;
    if let Some(c) = explain {
        let step = plan.step(c).ok_or_else(|| {
            if catalog.get(c).is_some() {
                Diagnostic::new(format!("{c} is not part of this plan"))
                    .hint(format!("plan it directly: rocforge plan {c} --explain {c}"))
            } else {
                catalog.unknown_component(c)
            }
        })?;
        match g.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&step.hash_input).unwrap_or_default()),
            _ => print!("{}", render::explain(step)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    match g.format {
        Format::Text => print!("{}", render::text(&plan)),
        Format::Json => print!("{}", render::json(&plan)),
        Format::GithubMatrix => print!("{}", render::github_matrix(&plan)),
    }
    Ok(ExitCode::SUCCESS)
}

fn arch_table(g: &Global) -> Result<ArchTable> {
    let mut d = Diagnostics::default();
    let table = load_arches(&root(g), &mut d)?;
    if !d.is_empty() {
        return Err(CliError::Diagnostics(d));
    }
    Ok(table)
}

fn matrix_name(m: MatrixCores) -> &'static str {
    match m {
        MatrixCores::None => "none",
        MatrixCores::Mfma => "MFMA",
        MatrixCores::Wmma => "WMMA",
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn arch_list(g: &Global) -> Result<ExitCode> {
    only_text_or_json(g, "arch list")?;
    let table = arch_table(g)?;
    if g.format == Format::Json {
        let arches: Vec<&Arch> = table.iter().collect();
        println!("{}", serde_json::to_string_pretty(&json!({"schema": "rocforge.arches/1", "arches": arches})).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 8]> = table
        .iter()
        .map(|a| {
            [
                a.llvm.clone(),
                a.family.clone(),
                a.kind.clone(),
                format!("wave{}", a.wavefront),
                [a.xnack.then_some("xnack"), a.sramecc.then_some("sramecc")].into_iter().flatten().collect::<Vec<_>>().join(",")
                    .chars().collect::<String>(),
                matrix_name(a.matrix).into(),
                if a.rocm_supported { "supported".into() } else { a.nearest.as_ref().map_or("unsupported".into(), |n| format!("-> {n}")) },
                a.name.clone(),
            ]
        })
        .collect();
    let header = ["target", "family", "kind", "wave", "features", "matrix", "ROCm", "GPUs"];
    let mut w = header.map(str::len);
    for r in &rows {
        for i in 0..7 {
            w[i] = w[i].max(r[i].chars().count());
        }
    }
    let fmt = |c: [&str; 8]| {
        let mut s = String::new();
        for i in 0..7 {
            s += &format!("{:w$}  ", if c[i].is_empty() { "-" } else { c[i] }, w = w[i]);
        }
        s + c[7]
    };
    println!("{}", fmt(header));
    for r in &rows {
        println!("{}", fmt([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7]]));
    }
    Ok(ExitCode::SUCCESS)
}

fn arch_show(g: &Global, target: &str) -> Result<ExitCode> {
    only_text_or_json(g, "arch show")?;
    let table = arch_table(g)?;
    let by_kfd = target.parse::<u32>().ok().and_then(|v| table.iter().find(|a| a.kfd_version == v));
    let (arch, id) = match by_kfd {
        Some(a) => (a, TargetId::plain(&a.llvm)),
        None => {
            let id = table
                .resolve(target)
                .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
            (table.get(&id.arch).expect("resolved targets are in the table"), id)
        }
    };
    if g.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&json!({"schema": "rocforge.arch/1", "target": id, "arch": arch})).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let (maj, min, step) = arch.kfd_triple();
    println!("{id}: {}", arch.name);
    println!("  family           {} ({})", arch.family, arch.generation);
    println!("  kind             {}", arch.kind);
    println!("  wavefront        {}", arch.wavefront);
    println!("  xnack            {}", if arch.xnack { "supported (target IDs may say :xnack+ or :xnack-)" } else { "not supported" });
    println!("  sramecc          {}", if arch.sramecc { "supported (target IDs may say :sramecc+ or :sramecc-)" } else { "not supported" });
    println!("  matrix cores     {}", matrix_name(arch.matrix));
    println!("  KFD version      {} (gfx_target_version {maj}.{min}.{step})", arch.kfd_version);
    println!("  PCI device IDs   {}", if arch.pci_ids.is_empty() { "-".into() } else { arch.pci_ids.iter().map(|p| format!("1002:{p}")).collect::<Vec<_>>().join(", ") });
    println!("  ROCm support     {}", yes_no(arch.rocm_supported));
    if let Some(n) = &arch.nearest {
        let spoof = table.get(n).map(|a| a.hsa_override()).unwrap_or_default();
        println!("  nearest target   {n} (spoof baseline: HSA_OVERRIDE_GFX_VERSION={spoof}; a native build needs none)");
    }
    if !arch.aliases.is_empty() {
        println!("  also reported as {}", arch.aliases.join(", "));
    }
    if let Some(notes) = &arch.notes {
        println!("  notes            {notes}");
    }
    Ok(ExitCode::SUCCESS)
}
