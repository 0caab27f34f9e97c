//! `inspect`: the GPU code in built files, and `--against` coverage tables.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{Format, Global, Result};
use rocforge::diag::Diagnostic;
use rocforge::inspect::codeobject::Feature;
use rocforge::inspect::{self, CodeObject, CoverageReport, Image, Inventory, Status};

#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// Files or directories to read
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Target IDs every library must carry code for, e.g. gfx90c or gfx90c:xnack-,gfx902
    #[arg(long, value_name = "LIST")]
    pub against: Option<String>,
    /// With --against: accept the nearest target's code for these targets (it runs only
    /// under HSA_OVERRIDE_GFX_VERSION)
    #[arg(long, value_name = "LIST", requires = "against")]
    pub allow_spoof: Option<String>,
    /// With --against: judge the files as this component of the release line, by the GPU
    /// code its recipe declares ([coverage]: host-only, runtime-compiled, declined)
    #[arg(long, value_name = "NAME", requires = "against")]
    pub component: Option<String>,
}

pub fn inspect_cmd(g: &Global, a: &InspectArgs) -> Result<ExitCode> {
    use rocforge::app::inspect::{self as check, Checked};
    let paths = &a.paths;
    if let Some(against) = a.against.as_deref() {
        let checked = check::against(
            &super::options(g),
            &check::Request {
                paths,
                against,
                allow_spoof: a.allow_spoof.as_deref(),
                component: a.component.as_deref(),
            },
        )?;
        let holds = checked.holds();
        match checked {
            Checked::Declared {
                component,
                file,
                gpu_code,
                verdict: v,
                requested,
            } => {
                if g.format == Format::Json {
                    super::print_json(&inspect::verdict::Judged::new(&component, &gpu_code, &v));
                } else {
                    println!("{component}: {} (declared in {file})", v.kind);
                    for l in &v.lines {
                        println!("  {l}");
                    }
                    for (_, gap) in &v.gaps {
                        println!("  FAILS: {gap}");
                    }
                    println!(
                        "ahead-of-time coverage: none counted ({component} is not compiled ahead of time for {})",
                        requested
                            .iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
            }
            Checked::CodeObjects {
                report,
                spoof_ok,
                table,
                declined,
            } => {
                if g.format == Format::Json {
                    super::print_json(&inspect::coverage::Covered::new(
                        report, &spoof_ok, declined,
                    ));
                } else {
                    print_coverage(&report, &table, &spoof_ok);
                    print_declined(&declined);
                }
            }
        }
        return Ok(if holds {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let mut inventories = Vec::new();
    for p in paths {
        inventories.push(inspect::inspect(p).map_err(rocforge::app::inspect::unreadable)?);
    }
    let ok = inventories.iter().all(|i| i.errors.is_empty());
    if g.format == Format::Json {
        // Streamed: a library of tens of thousands of bundles gives tens of MB of JSON, which
        // neither a serde_json::Value tree nor a String of it should hold in memory.
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut out, &inspect::Inspected::new(&inventories))
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
            .and_then(|()| out.flush())
            .map_err(|e| Diagnostic::new(format!("cannot write the JSON report: {e}")))?;
    } else {
        for inv in &inventories {
            print_inventory(inv);
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The rows an install prefix's receipts say their builds declined: apart from the table, not
/// counted either way.
fn print_declined(declined: &[inspect::coverage::DeclinedRows]) {
    for d in declined {
        println!(
            "declined by its build, not counted: {} ({}; its consumers fall back to {} there)",
            d.component, d.reason, d.fallback
        );
        for r in &d.rows {
            println!("  {}", r.library);
        }
    }
}

fn feature(f: Feature) -> &'static str {
    match f {
        Feature::Unsupported => "unsupported",
        Feature::Any => "any",
        Feature::Off => "off",
        Feature::On => "on",
    }
}

fn describe_code_object(c: &CodeObject) -> String {
    let version = c.version.map_or("code object (not HSA)".to_string(), |v| {
        format!("code object v{v}")
    });
    let generic = c
        .generic_version
        .map_or(String::new(), |g| format!(", generic version {g}"));
    format!(
        "{version} {} (e_flags mach {:#04x}), xnack {}, sramecc {}{generic}",
        c.processor,
        c.mach,
        feature(c.xnack),
        feature(c.sramecc)
    )
}

fn describe_image(image: &Image, size: u64) -> String {
    match image {
        Image::Empty => "empty".into(),
        Image::CodeObject(c) => describe_code_object(c),
        Image::Bitcode => format!("LLVM bitcode, {size} bytes"),
        Image::Other => format!("other data, {size} bytes"),
        Image::Invalid { reason } => format!("invalid: {reason}"),
    }
}

fn print_inventory(inv: &Inventory) {
    for f in &inv.files {
        println!("{}: {}", f.path, f.kind.replace('-', " "));
        if let Some(c) = &f.code_object {
            println!("  {}", describe_code_object(c));
        }
        for c in &f.containers {
            for b in &c.bundles {
                let what = match (&b.compression, b.format) {
                    (Some(z), _) => format!(
                        "compressed offload bundle (CCOB v{}, {}, {} -> {} bytes, hash {})",
                        z.version,
                        z.method,
                        z.compressed_size,
                        z.uncompressed_size,
                        if z.hash_ok { "ok" } else { "MISMATCH" }
                    ),
                    (None, "offload-binary") => "OffloadBinary".into(),
                    (None, _) => "offload bundle".into(),
                };
                println!(
                    "  {} at {:#x}: {what}, {} entries",
                    c.place,
                    b.offset,
                    b.entries.len()
                );
                let w = b.entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
                for e in &b.entries {
                    println!("    {:w$}  {}", e.id, describe_image(&e.image, e.size));
                }
            }
        }
        for p in &f.problems {
            println!("  problem: {p}");
        }
    }
    for t in &inv.tensile {
        let dir = if t.dir.is_empty() { "." } else { &t.dir };
        println!("Tensile library files in {dir}:");
        let w = t
            .targets
            .iter()
            .map(|x| x.target.to_string().len())
            .max()
            .unwrap_or(0);
        for x in &t.targets {
            println!(
                "  {:w$}  {} index, {} code object file(s)",
                x.target.to_string(),
                x.index,
                x.code_objects
            );
        }
        for c in &t.catalogs {
            let codes: usize = c
                .native
                .iter()
                .chain(&c.fallback)
                .map(|p| p.code_objects.len())
                .sum();
            println!(
                "  {}: selects {}; {} solution catalog(s), {} solutions, {} kernels; {} fallback catalog(s); {codes} code object(s)",
                c.file,
                if c.processors.is_empty() {
                    "no processor".to_string()
                } else {
                    c.processors.join(", ")
                },
                c.native.len(),
                c.solutions(),
                c.kernels(),
                c.fallback.len()
            );
            for p in &c.problems {
                println!("    problem: {p}");
            }
        }
    }
    for (component, logic) in &inv.logic {
        use rocforge::catalog::logic::LogicSource;
        let parts: Vec<String> = logic
            .iter()
            .map(|(arch, source)| match source {
                LogicSource::Upstream => format!("{arch} upstream"),
                LogicSource::Derived { from, .. } => format!("{arch} derived from {from}"),
                LogicSource::Overlay { to, sha256 } => {
                    format!(
                        "{arch} overlay {} (at {to})",
                        &sha256[..sha256.len().min(12)]
                    )
                }
            })
            .collect();
        println!("Tensile logic of {component}: {}", parts.join("; "));
    }
    for e in &inv.errors {
        println!("error: {e}");
    }
}

fn print_coverage(
    r: &CoverageReport,
    table: &rocforge::arch::ArchTable,
    spoof_ok: &[rocforge::arch::TargetId],
) {
    let cell = |s: &Status| match s {
        Status::Present { .. } => "present".to_string(),
        Status::OnlyCompatible { nearest, .. } => format!("{nearest} ONLY (spoof)"),
        Status::Missing => "MISSING".to_string(),
        Status::Incomplete { .. } => "INCOMPLETE".to_string(),
    };
    let mut header = vec!["library".to_string()];
    header.extend(r.requested.iter().map(|t| t.to_string()));
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let mut v = vec![row.library.clone()];
            v.extend(row.targets.iter().map(|c| cell(&c.status)));
            v
        })
        .collect();
    let mut w: Vec<usize> = header.iter().map(String::len).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:w$}", w = w[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    println!("{}", line(&header));
    for row in &rows {
        println!("{}", line(row));
    }
    let missing = r.missing().count();
    let spoofed: Vec<_> = r.spoofed().collect();
    println!(
        "{} librar{} with GPU code, {missing} missing, {} with another target's code only",
        r.rows.len(),
        if r.rows.len() == 1 { "y" } else { "ies" },
        spoofed.len()
    );
    // One line per (target, nearest): the advice is the same for every library.
    let mut notes: Vec<String> = spoofed
        .iter()
        .map(|(_, t, n)| {
            let accepted = if rocforge::inspect::coverage::allows(spoof_ok, t) {
                " (accepted by --allow-spoof)"
            } else {
                ""
            };
            format!(
                "{t}: {}{accepted}",
                rocforge::inspect::coverage::spoof_note(table, t, n)
            )
        })
        .collect();
    notes.dedup();
    notes.sort();
    notes.dedup();
    for n in notes {
        println!("{n}");
    }
    for row in &r.rows {
        for c in &row.targets {
            if let Status::Incomplete { why } = &c.status {
                println!("{}: {}: {why}", c.target, row.library);
            }
        }
    }
    for e in &r.errors {
        println!("error: {e}");
    }
}
