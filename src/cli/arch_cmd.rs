//! `arch list` and `arch show`.

use rocforge::diag::Hint;
use std::process::ExitCode;

use super::{CliError, Format, Global, Result, root};
use rocforge::arch::{ArchTable, MatrixCores, TargetId, output};
use rocforge::catalog::load_arches;
use rocforge::diag::{Diagnostic, Diagnostics};

pub fn arch_table(g: &Global) -> Result<ArchTable> {
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

pub fn arch_list(g: &Global) -> Result<ExitCode> {
    let table = arch_table(g)?;
    if g.format == Format::Json {
        super::print_json(&output::Arches::of(&table));
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
                [a.xnack.then_some("xnack"), a.sramecc.then_some("sramecc")]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(",")
                    .chars()
                    .collect::<String>(),
                matrix_name(a.matrix).into(),
                if a.is_generic() {
                    String::new()
                } else if a.rocm_supported {
                    "supported".into()
                } else {
                    a.nearest
                        .as_ref()
                        .map_or("unsupported".into(), |n| format!("-> {n}"))
                },
                a.name.clone(),
            ]
        })
        .collect();
    let header = [
        "target", "family", "kind", "wave", "features", "matrix", "ROCm", "GPUs",
    ];
    let mut w = header.map(str::len);
    for r in &rows {
        for i in 0..7 {
            w[i] = w[i].max(r[i].chars().count());
        }
    }
    let fmt = |c: [&str; 8]| {
        let mut s = String::new();
        for i in 0..7 {
            s += &format!(
                "{:w$}  ",
                if c[i].is_empty() { "-" } else { c[i] },
                w = w[i]
            );
        }
        s + c[7]
    };
    println!("{}", fmt(header));
    for r in &rows {
        println!(
            "{}",
            fmt([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7]])
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn arch_show(g: &Global, target: &str) -> Result<ExitCode> {
    let table = arch_table(g)?;
    let by_kfd = target
        .parse::<u32>()
        .ok()
        .and_then(|v| table.by_kfd_version(v));
    let (arch, id) = match by_kfd {
        Some(a) => (a, TargetId::plain(&a.llvm)),
        None => {
            let id = table
                .resolve(target)
                .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
            (
                table
                    .get(&id.arch)
                    .expect("resolved targets are in the table"),
                id,
            )
        }
    };
    if g.format == Format::Json {
        super::print_json(&output::Shown::new(id, arch));
        return Ok(ExitCode::SUCCESS);
    }
    let (maj, min, step) = arch.kfd_triple();
    println!("{id}: {}", arch.name);
    println!("  family           {} ({})", arch.family, arch.generation);
    println!("  kind             {}", arch.kind);
    println!("  wavefront        {}", arch.wavefront);
    println!(
        "  xnack            {}",
        if arch.xnack {
            "supported (target IDs may say :xnack+ or :xnack-)"
        } else {
            "not supported"
        }
    );
    println!(
        "  sramecc          {}",
        if arch.sramecc {
            "supported (target IDs may say :sramecc+ or :sramecc-)"
        } else {
            "not supported"
        }
    );
    println!("  matrix cores     {}", matrix_name(arch.matrix));
    if arch.is_generic() {
        let members = rocforge::inspect::codeobject::generic_members(&arch.llvm)
            .map(|m| m.join(", "))
            .unwrap_or_else(|| "-".into());
        println!("  KFD version      none (a generic target: no device reports it)");
        println!("  runs on          {members}");
    } else {
        println!(
            "  KFD version      {} (gfx_target_version {maj}.{min}.{step})",
            arch.kfd_version
        );
    }
    println!(
        "  PCI device IDs   {}",
        if arch.pci_ids.is_empty() {
            "-".into()
        } else {
            arch.pci_ids
                .iter()
                .map(|p| format!("1002:{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!("  ROCm support     {}", yes_no(arch.rocm_supported));
    if let Some(n) = &arch.nearest {
        let spoof = table.get(n).map(|a| a.hsa_override()).unwrap_or_default();
        println!(
            "  nearest target   {n} (spoof baseline: HSA_OVERRIDE_GFX_VERSION={spoof}; a native build needs none)"
        );
    }
    if !arch.aliases.is_empty() {
        println!("  also reported as {}", arch.aliases.join(", "));
    }
    if let Some(notes) = &arch.notes {
        println!("  notes            {notes}");
    }
    Ok(ExitCode::SUCCESS)
}
