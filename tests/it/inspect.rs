//! `rocforge inspect` against code compiled here: Debian's hipcc (clang 15) for objects,
//! shared libraries and executables; clang-19 for compressed bundles and gfx9-generic; and
//! synthetic CCOB v1/v3/zlib bundles built from those real code objects. Hostile inputs
//! (every truncation, byte flips, absurd sizes) must give errors, never panics.
//!
//! The compilers are required when CI=true; elsewhere a test without them is skipped.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{World, manifest, require, which};

use md5::{Digest, Md5};
use object::{Object, ObjectSection};
use rocforge::arch::{ArchTable, TargetId};
use rocforge::catalog::{CatalogRoot, load_arches};
use rocforge::diag::Diagnostics;
use rocforge::inspect::{self, Image, Status, inspect_bytes};

fn fixtures() -> PathBuf {
    manifest().join("tests/fixtures/inspect")
}

/// Whether `tool` is on PATH; when it is missing, the test is skipped (in CI it fails).
fn tool(name: &str) -> bool {
    require(name, which(name))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("spawn compiler");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What hipcc compiles, once per test process, in a world of its own.
fn hipcc_built() -> Option<&'static World> {
    static BUILT: OnceLock<Option<World>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !tool("hipcc") {
                return None;
            }
            let w = World::new().shared("inspect-hipcc").build();
            let d = w.root();
            let f = fixtures();
            std::fs::create_dir_all(d.join("prefix/lib/rocblas/library")).unwrap();
            std::fs::create_dir_all(d.join("prefix/bin")).unwrap();
            let hip = |args: &[&str]| {
                run(Command::new("hipcc").current_dir(d).args(args));
            };
            let (a, b, main) = (f.join("a.hip"), f.join("b.hip"), f.join("main.hip"));
            let (a, b, main) = (
                a.to_str().unwrap(),
                b.to_str().unwrap(),
                main.to_str().unwrap(),
            );
            let two = ["--offload-arch=gfx90c", "--offload-arch=gfx902"];
            // Object for two targets; one for a single target.
            hip(&[&two[..], &["-c", a, "-o", "a.o"]].concat());
            hip(&["--offload-arch=gfx90c", "-c", a, "-o", "single.o"]);
            // Shared library of two source files: two bundles in .hip_fatbin.
            hip(&[
                &two[..],
                &["-fPIC", "-shared", a, b, "-o", "prefix/lib/libab.so"],
            ]
            .concat());
            // Library built only for gfx900: gfx90c and gfx902 need a spoof.
            hip(&[
                "--offload-arch=gfx900",
                "-fPIC",
                "-shared",
                a,
                "-o",
                "prefix/lib/libold.so",
            ]);
            // Executable with xnack-specific target IDs.
            hip(&[
                "--offload-arch=gfx90c:xnack-",
                "--offload-arch=gfx902:xnack+",
                a,
                main,
                "-o",
                "prefix/bin/app",
            ]);
            // A static archive of the two-target object.
            run(Command::new("ar")
                .current_dir(d)
                .args(["rcs", "liba.a", "a.o"]));
            // Tensile files for gfx90c only: a lazy-loading master catalog that selects gfx90c,
            // one catalog of two solutions, and its kernels.
            let single = std::fs::read(d.join("single.o")).unwrap();
            let lib = d.join("prefix/lib/rocblas/library");
            tensile_catalog(&lib, "gfx90c", Some("gfx90c"), &["Cijk_A", "Cijk_B"]);
            std::fs::write(
                lib.join("TensileLibrary_Type_SS_gfx90c.co"),
                fatbin(&single),
            )
            .unwrap();
            Some(w)
        })
        .as_ref()
}

/// What clang-19 compiles, once per test process, in a world of its own.
fn clang19_built() -> Option<&'static World> {
    static BUILT: OnceLock<Option<World>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !tool("clang++-19") {
                return None;
            }
            let w = World::new().shared("inspect-clang19").build();
            let bare = fixtures().join("bare.hip");
            let cc = |args: &[&str], out: &str| {
                run(Command::new("clang++-19")
                    .current_dir(w.root())
                    .args(["-x", "hip", "-nogpuinc", "-nogpulib", "-c"])
                    .args(args)
                    .arg(&bare)
                    .args(["-o", out]));
            };
            cc(
                &[
                    "--offload-arch=gfx90c",
                    "--offload-arch=gfx902",
                    "--offload-compress",
                ],
                "compressed.o",
            );
            cc(
                &["--offload-arch=gfx9-generic", "-mcode-object-version=6"],
                "generic.o",
            );
            cc(
                &["--offload-arch=gfx90c", "--offload-new-driver", "-fgpu-rdc"],
                "newdriver.o",
            );
            Some(w)
        })
        .as_ref()
}

/// Writes Tensile's lazy-loading layout for `arch`, as TensileCreateLibrary does (msgpack):
/// `TensileLibrary_lazy_<arch>.dat`, whose hardware row selects `selects` (None: only the
/// `TruePred` fallback row) and names one catalog, `TensileLibrary_Type_SS_<arch>` (or
/// `TensileLibrary_Type_SS_fallback`), holding one solution per kernel name.
fn tensile_catalog(dir: &Path, arch: &str, selects: Option<&str>, kernels: &[&str]) {
    use rmpv::Value;
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        )
    };
    let write = |name: &str, v: &Value| {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, v).unwrap();
        std::fs::write(dir.join(name), buf).unwrap();
    };
    let part = match selects {
        Some(_) => format!("TensileLibrary_Type_SS_{arch}"),
        None => "TensileLibrary_Type_SS_fallback".to_string(),
    };
    let predicate = match selects {
        Some(p) => map(vec![
            ("type", "AMDGPU".into()),
            (
                "value",
                map(vec![("type", "Processor".into()), ("value", p.into())]),
            ),
        ]),
        None => map(vec![("type", "TruePred".into())]),
    };
    let leaf = map(vec![
        ("type", "Placeholder".into()),
        ("value", part.as_str().into()),
    ]);
    let master = map(vec![
        ("solutions", Value::Array(Vec::new())),
        (
            "library",
            map(vec![
                ("type", "Hardware".into()),
                (
                    "rows",
                    Value::Array(vec![map(vec![("predicate", predicate), ("library", leaf)])]),
                ),
            ]),
        ),
    ]);
    write(&format!("TensileLibrary_lazy_{arch}.dat"), &master);
    let solutions = kernels
        .iter()
        .enumerate()
        .map(|(i, k)| map(vec![("name", (*k).into()), ("index", (i as u64).into())]))
        .collect();
    write(
        &format!("{part}.dat"),
        &map(vec![
            ("solutions", Value::Array(solutions)),
            ("library", map(vec![("type", "Problem".into())])),
        ]),
    );
}

fn fatbin(elf: &[u8]) -> Vec<u8> {
    let file = object::File::parse(elf).unwrap();
    file.section_by_name(".hip_fatbin")
        .unwrap()
        .data()
        .unwrap()
        .to_vec()
}

fn table() -> ArchTable {
    let mut d = Diagnostics::default();
    let t = load_arches(&CatalogRoot::Embedded, &mut d).unwrap();
    assert!(d.is_empty());
    t
}

fn tid(s: &str) -> TargetId {
    rocforge::inspect::bundle::parse_target_id(s).unwrap()
}

fn targets_of(path: &Path) -> Vec<String> {
    let inv = inspect::inspect(path).unwrap();
    assert!(inv.errors.is_empty(), "{:?}", inv.errors);
    inv.files[0]
        .targets()
        .iter()
        .map(|t| t.to_string())
        .collect()
}

#[test]
fn hipcc_objects_libraries_and_executables() {
    let Some(b) = hipcc_built() else { return };
    assert_eq!(targets_of(&b.path("a.o")), ["gfx902", "gfx90c"]);
    assert_eq!(targets_of(&b.path("single.o")), ["gfx90c"]);
    assert_eq!(
        targets_of(&b.path("prefix/bin/app")),
        ["gfx902:xnack+", "gfx90c:xnack-"]
    );
    // Two source files: two bundles laid end to end, both walked.
    let inv = inspect::inspect(&b.path("prefix/lib/libab.so")).unwrap();
    let f = &inv.files[0];
    assert_eq!(f.kind, "shared-object");
    assert_eq!(f.containers[0].bundles.len(), 2);
    for bundle in &f.containers[0].bundles {
        let co: Vec<_> = bundle
            .entries
            .iter()
            .filter_map(|e| e.image.code_object())
            .collect();
        assert_eq!(co.len(), 2);
        assert!(co.iter().all(|c| c.version == Some(4)));
    }
    assert!(f.problems.is_empty(), "{:?}", f.problems);
    let inv = inspect::inspect(&b.path("prefix/bin/app")).unwrap();
    assert_eq!(inv.files[0].kind, "executable");
    let inv = inspect::inspect(&b.path("liba.a")).unwrap();
    assert_eq!(inv.files[0].kind, "archive");
    assert_eq!(inv.files[0].containers[0].place, "a.o(.hip_fatbin)");
    assert_eq!(inv.files[0].targets().len(), 2);
}

#[test]
fn clang19_compressed_generic_and_offload_binary() {
    let Some(b) = clang19_built() else { return };
    let inv = inspect::inspect(&b.path("compressed.o")).unwrap();
    assert!(inv.errors.is_empty(), "{:?}", inv.errors);
    let bundle = &inv.files[0].containers[0].bundles[0];
    let z = bundle.compression.as_ref().expect("CCOB");
    assert_eq!((z.version, z.method, z.hash_ok), (2, "zstd", true));
    assert_eq!(inv.files[0].targets(), [tid("gfx902"), tid("gfx90c")]);

    let inv = inspect::inspect(&b.path("generic.o")).unwrap();
    let co = inv.files[0]
        .entries()
        .find_map(|e| e.image.code_object())
        .unwrap()
        .clone();
    assert_eq!(
        (co.processor.as_str(), co.mach, co.version),
        ("gfx9-generic", 0x51, Some(6))
    );
    assert_eq!(co.generic_version, Some(1));
    let report = inspect::coverage_of(
        &inv,
        &[tid("gfx90c"), tid("gfx902"), tid("gfx1030")],
        &table(),
    );
    let s: Vec<_> = report.rows[0].targets.iter().map(|c| &c.status).collect();
    assert!(matches!(s[0], Status::Present { .. }));
    assert!(matches!(s[1], Status::Present { .. }));
    assert_eq!(*s[2], Status::Missing);

    let inv = inspect::inspect(&b.path("newdriver.o")).unwrap();
    let c = &inv.files[0].containers[0];
    assert_eq!(c.place, ".llvm.offloading");
    assert_eq!(c.bundles[0].format, "offload-binary");
    assert!(matches!(c.bundles[0].entries[0].image, Image::Bitcode));
    assert_eq!(inv.files[0].targets(), [tid("gfx90c")]);
}

fn ccob(version: u16, method: u16, payload: &[u8]) -> Vec<u8> {
    let compressed = match method {
        1 => zstd::encode_all(payload, 3).unwrap(),
        _ => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(payload).unwrap();
            e.finish().unwrap()
        }
    };
    let digest = Md5::digest(payload);
    let hash = &digest[..8];
    let mut out = b"CCOB".to_vec();
    out.extend(version.to_le_bytes());
    out.extend(method.to_le_bytes());
    match version {
        1 => out.extend((payload.len() as u32).to_le_bytes()),
        2 => {
            out.extend(((24 + compressed.len()) as u32).to_le_bytes());
            out.extend((payload.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend(((32 + compressed.len()) as u64).to_le_bytes());
            out.extend((payload.len() as u64).to_le_bytes());
        }
    }
    out.extend(hash);
    out.extend(compressed);
    out
}

/// A real two-target plain bundle (from hipcc), else a synthetic one around a fake header.
fn real_bundle() -> Option<Vec<u8>> {
    let b = hipcc_built()?;
    Some(fatbin(&std::fs::read(b.path("a.o")).unwrap()))
}

#[test]
fn synthetic_ccob_v1_v3_and_zlib_from_real_code_objects() {
    let Some(plain) = real_bundle() else { return };
    for (version, method) in [(1, 1), (1, 0), (2, 0), (3, 1), (3, 0)] {
        let data = ccob(version, method, &plain);
        // Two laid end to end with padding, as in a linked .hip_fatbin.
        let mut two = data.clone();
        two.resize(two.len().next_multiple_of(4096), 0);
        two.extend(&data);
        let (report, errors) = inspect_bytes(Path::new("synthetic"), "synthetic", &two);
        assert!(errors.is_empty(), "v{version} m{method}: {errors:?}");
        let report = report.unwrap();
        let bundles = &report.containers[0].bundles;
        assert_eq!(bundles.len(), 2, "v{version} m{method}");
        let z = bundles[1].compression.as_ref().unwrap();
        assert_eq!(z.version, version);
        assert_eq!(z.method, if method == 1 { "zstd" } else { "zlib" });
        assert!(z.hash_ok);
        assert_eq!(report.targets(), [tid("gfx902"), tid("gfx90c")]);
    }
    // A wrong stored hash is reported, not fatal.
    let mut bad = ccob(2, 1, &plain);
    bad[16] ^= 0xff;
    let (report, errors) = inspect_bytes(Path::new("bad"), "bad", &bad);
    assert!(errors.is_empty());
    let report = report.unwrap();
    assert!(
        !report.containers[0].bundles[0]
            .compression
            .as_ref()
            .unwrap()
            .hash_ok
    );
    assert!(
        report.problems[0].contains("does not match the MD5"),
        "{:?}",
        report.problems
    );
}

fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

#[test]
fn hostile_inputs_give_errors_not_panics() {
    let Some(plain) = real_bundle() else { return };
    let b = hipcc_built().unwrap();
    let object = std::fs::read(b.path("a.o")).unwrap();
    let compressed = ccob(2, 1, &plain);
    let p = Path::new("hostile");
    // Every truncation.
    for input in [&plain, &compressed, &object] {
        for len in 0..input.len() {
            let (_, errors) = inspect_bytes(p, "hostile", &input[..len]);
            for e in &errors {
                assert!(e.offset.is_some() && e.file == p, "{e}");
            }
        }
    }
    // Random byte flips.
    let mut seed = 0x5eed;
    for input in [&plain, &compressed, &object] {
        for _ in 0..1500 {
            let mut m = input.clone();
            for _ in 0..1 + lcg(&mut seed) % 4 {
                let i = (lcg(&mut seed) as usize) % m.len();
                m[i] ^= 1 << (lcg(&mut seed) % 8);
            }
            let _ = inspect_bytes(p, "hostile", &m);
        }
    }
    // A bundle claiming 2^63 entries, and an entry claiming 2^63 bytes.
    let mut huge = plain.clone();
    huge[24..32].copy_from_slice(&(1u64 << 63).to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &huge);
    assert!(errors[0].message.contains("entries"), "{}", errors[0]);
    let mut huge = plain.clone();
    huge[40..48].copy_from_slice(&(1u64 << 63).to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &huge);
    assert!(errors[0].message.contains("outside"), "{}", errors[0]);
    let mut wrap = plain.clone();
    wrap[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &wrap);
    assert_eq!(errors.len(), 1);
    // CCOB v2 claiming a 4 GiB payload, v3 claiming 2^63 bytes and a total past the end.
    let mut big = compressed.clone();
    big[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &big);
    assert!(errors[0].message.contains("declares"), "{}", errors[0]);
    let mut v3 = ccob(3, 1, &plain);
    v3[16..24].copy_from_slice(&(1u64 << 63).to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &v3);
    assert!(errors[0].message.contains("limit"), "{}", errors[0]);
    let mut v3 = ccob(3, 1, &plain);
    v3[8..16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let (_, errors) = inspect_bytes(p, "hostile", &v3);
    assert!(
        errors[0].to_string().contains("hostile: at offset 0x0"),
        "{}",
        errors[0]
    );
}

#[test]
fn coverage_rules_on_real_builds() {
    let Some(b) = hipcc_built() else { return };
    let t = table();
    let app = [b.path("prefix/bin/app")];
    let r = inspect::coverage(&app, &[tid("gfx90c:xnack-"), tid("gfx902:xnack+")], &t).unwrap();
    assert!(r.complete());
    // Plain gfx90c means "either xnack mode": xnack- code alone does not serve it.
    let r = inspect::coverage(&app, &[tid("gfx90c")], &t).unwrap();
    assert_eq!(r.missing().count(), 1);
    let old = [b.path("prefix/lib/libold.so")];
    let r = inspect::coverage(&old, &[tid("gfx90c")], &t).unwrap();
    assert!(
        matches!(&r.rows[0].targets[0].status, Status::OnlyCompatible { nearest, .. } if nearest == "gfx900")
    );
    // Another processor's code is never coverage: only --allow-spoof accepts it.
    assert_eq!(r.missing().count(), 0);
    assert_eq!(r.spoofed().count(), 1);
    assert!(!r.complete());
    assert!(r.complete_allowing(&[tid("gfx90c")]));
    assert!(!r.complete_allowing(&[tid("gfx902")]));
}

#[test]
fn gfx900_code_does_not_pass_against_gfx90c() {
    let Some(b) = hipcc_built() else { return };
    let o = b.run(&[
        "inspect",
        "--against",
        "gfx90c,gfx902",
        "prefix/lib/libold.so",
    ]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "gfx90c: gfx900 code only: runs on gfx90c only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(
            "gfx902: gfx900 code only: runs on gfx902 only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("0 missing, 2 with another target's code only"),
        "{}",
        o.stdout
    );
    // Accepted for one target only: still a failure for the other.
    let o = b.run(&[
        "inspect",
        "--against",
        "gfx90c,gfx902",
        "--allow-spoof",
        "gfx90c",
        "prefix/lib/libold.so",
    ]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout.contains("(accepted by --allow-spoof)"),
        "{}",
        o.stdout
    );
    let o = b.run(&[
        "inspect",
        "--against",
        "gfx90c,gfx902",
        "--allow-spoof",
        "gfx90c,gfx902",
        "--format",
        "json",
        "prefix/lib/libold.so",
    ]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["complete"], true);
    assert_eq!(v["native"], false);
}

#[test]
fn cli_output_snapshots() {
    let Some(b) = hipcc_built() else { return };
    let o = b.run(&["inspect", "prefix"]);
    assert_eq!(o.code, 0);
    insta::assert_snapshot!("inspect_prefix_text", o.stdout);
    let o = b.run(&["inspect", "--format", "json", "prefix/lib/libab.so"]);
    assert_eq!(o.code, 0);
    insta::assert_snapshot!("inspect_library_json", o.stdout);
    let o = b.run(&["inspect", "--against", "gfx90c,gfx902", "prefix"]);
    assert_eq!(o.code, 1, "gfx902 Tensile files are missing");
    insta::assert_snapshot!("against_text", o.stdout);
    let o = b.run(&[
        "inspect",
        "--against",
        "gfx90c",
        "--format",
        "json",
        "prefix",
    ]);
    insta::assert_snapshot!("against_json", o.stdout);
    let o = b.run(&["inspect", "--against", "gfx90c:xnack-", "prefix/bin/app"]);
    assert_eq!(o.code, 0, "{}", o.stdout);
}

/// A PyTorch build installs its GPU libraries only inside its wheel: inspect and `--against`
/// read them through the zip (deflated and stored members alike), by themselves and inside a
/// tree, and a damaged wheel is an error naming it, never a pass.
#[test]
fn libraries_inside_a_wheel() {
    let Some(b) = hipcc_built() else { return };
    use std::io::Write;
    let w = World::new().build();
    let d = w.root();
    std::fs::create_dir_all(d.join("tree/share/rocforge/wheels")).unwrap();
    let name = "demo-1.0-cp311-cp311-linux_x86_64.whl";
    let wheel = d.join("tree/share/rocforge/wheels").join(name);
    let mut z = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
    let opts = |m| zip::write::SimpleFileOptions::default().compression_method(m);
    for (member, from, method) in [
        (
            "demo/lib/libab.so",
            "prefix/lib/libab.so",
            zip::CompressionMethod::Deflated,
        ),
        (
            "demo/lib/libold.so",
            "prefix/lib/libold.so",
            zip::CompressionMethod::Stored,
        ),
    ] {
        z.start_file(member, opts(method)).unwrap();
        z.write_all(&std::fs::read(b.path(from)).unwrap()).unwrap();
    }
    z.start_file("demo/__init__.py", opts(zip::CompressionMethod::Deflated))
        .unwrap();
    z.write_all(b"from .lib import *\n").unwrap();
    z.finish().unwrap();

    let o = w.run(&["inspect", "--against", "gfx90c,gfx902", "tree"]);
    assert_eq!(o.code, 1, "libold.so has gfx900 code only: {}", o.stdout);
    insta::assert_snapshot!("against_a_tree_with_a_wheel", o.stdout);
    let whl = format!("tree/share/rocforge/wheels/{name}");
    let o = w.run(&["inspect", "--format", "json", &whl]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let files = v["inventories"][0]["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            format!("{whl}!/demo/lib/libab.so"),
            format!("{whl}!/demo/lib/libold.so")
        ]
    );
    assert_eq!(files[0]["kind"], "shared-object");
    // The same bytes as the library outside the wheel: the same code objects.
    let outside = inspect::inspect(&b.path("prefix/lib/libab.so")).unwrap();
    let inside = inspect::inspect(&wheel).unwrap();
    assert_eq!(inside.files[0].targets(), outside.files[0].targets());

    // Cut short: an error naming the wheel, exit 1, whatever the table would say.
    let bytes = std::fs::read(&wheel).unwrap();
    std::fs::write(&wheel, &bytes[..bytes.len() - 200]).unwrap();
    let o = w.run(&["inspect", "--against", "gfx90c", &whl]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(
        format!("{}{}", o.stdout, o.stderr).contains(name),
        "{}\n{}",
        o.stdout,
        o.stderr
    );
}

/// Debian's own targets (gfx90a, gfx1100, ...) were unknown to the table: `--against` refused
/// them before looking at a single code object.
#[test]
fn against_datacenter_and_rdna3_targets() {
    if !tool("clang++-19") {
        return;
    }
    let w = World::new().build();
    let d = w.root();
    std::fs::create_dir_all(d.join("prefix/lib")).unwrap();
    let bare = fixtures().join("bare.hip");
    let lib = |arches: &[&str], out: &str| {
        run(Command::new("clang++-19")
            .current_dir(d)
            .args(["-x", "hip", "-nogpuinc", "-nogpulib", "-fPIC", "-shared"])
            .args(arches.iter().map(|a| format!("--offload-arch={a}")))
            .arg(&bare)
            .args(["-o", out]));
    };
    lib(&["gfx90a", "gfx1100"], "prefix/lib/libdeb.so");
    lib(&["gfx90a:xnack+"], "prefix/lib/libunified.so");
    assert_eq!(
        targets_of(&d.join("prefix/lib/libdeb.so")),
        ["gfx1100", "gfx90a"]
    );
    let o = w.run(&[
        "inspect",
        "--against",
        "gfx90a:xnack+,gfx1100",
        "prefix/lib/libdeb.so",
    ]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    // libunified.so has only xnack+ code: plain gfx90a (either mode) and gfx1100 are missing.
    let o = w.run(&["inspect", "--against", "gfx90a,gfx1100", "prefix"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    insta::assert_snapshot!("against_gfx90a_gfx1100", o.stdout);
    // gfx1102 (Navi 33) is known; gfx1100 is its nearest, so its code is named as the stand-in.
    let t = table();
    let r = inspect::coverage(&[d.join("prefix/lib/libdeb.so")], &[tid("gfx1102")], &t).unwrap();
    assert!(
        matches!(&r.rows[0].targets[0].status, Status::OnlyCompatible { nearest, .. } if nearest == "gfx1100"),
        "{:?}",
        r.rows[0].targets[0].status
    );
}

/// What a Tensile directory serves is read from its catalogs: a master catalog that selects
/// another processor, kernels compiled for another processor, and a target left with only the
/// fallback kernels each fail `--against`, and say why; code objects alone prove nothing.
#[test]
fn tensile_catalogs_decide_what_a_target_gets() {
    let Some(b) = hipcc_built() else { return };
    let single = fatbin(&std::fs::read(b.path("single.o")).unwrap());
    let old = std::fs::read(b.path("prefix/lib/libold.so")).unwrap();
    let w = World::new().build();
    let lib = w.path("library");
    std::fs::create_dir_all(&lib).unwrap();
    let against = |arch: &str| w.run(&["inspect", "--against", arch, "library"]);

    // Right catalog, right code: present, with the counts inspect prints.
    tensile_catalog(
        &lib,
        "gfx90c",
        Some("gfx90c"),
        &["Cijk_A", "Cijk_B", "Cijk_A"],
    );
    std::fs::write(lib.join("TensileLibrary_Type_SS_gfx90c.co"), &single).unwrap();
    let o = against("gfx90c");
    assert_eq!(o.code, 0, "{}", o.stdout);
    let o = w.run(&["inspect", "library"]);
    assert!(
        o.stdout.contains("TensileLibrary_lazy_gfx90c.dat: selects gfx90c; 1 solution catalog(s), 3 solutions, 2 kernels; 0 fallback catalog(s); 1 code object(s)"),
        "{}",
        o.stdout
    );

    // The kernels are gfx900's: the file name says gfx90c, the code object does not.
    std::fs::write(lib.join("TensileLibrary_Type_SS_gfx90c.co"), &old).unwrap();
    let o = against("gfx90c");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout
            .contains("TensileLibrary_Type_SS_gfx90c.co: code for gfx900, not gfx90c"),
        "{}",
        o.stdout
    );

    // A master catalog for gfx90c that selects gfx900's solutions (a copy under a new name).
    std::fs::write(lib.join("TensileLibrary_Type_SS_gfx90c.co"), &single).unwrap();
    tensile_catalog(&lib, "gfx90c", Some("gfx900"), &["Cijk_A"]);
    let o = against("gfx90c");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout
            .contains("TensileLibrary_lazy_gfx90c.dat is named for gfx90c but selects gfx900"),
        "{}",
        o.stdout
    );

    // Only the fallback row: kernels exist, tuned solutions do not.
    std::fs::remove_file(lib.join("TensileLibrary_Type_SS_gfx90c.co")).unwrap();
    std::fs::remove_file(lib.join("TensileLibrary_Type_SS_gfx90c.dat")).unwrap();
    tensile_catalog(&lib, "gfx90c", None, &["Cijk_generic"]);
    std::fs::write(
        lib.join("TensileLibrary_Type_SS_fallback_gfx90c.hsaco"),
        &single,
    )
    .unwrap();
    let o = against("gfx90c");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout
            .contains("only Tensile's fallback kernels (1 catalog(s)), no solutions for gfx90c"),
        "{}",
        o.stdout
    );
    // --allow-missing accepts the gap, as it does absent code.
    let o = w.run(&[
        "inspect",
        "--against",
        "gfx90c",
        "--format",
        "json",
        "library",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        v["rows"][0]["targets"][0]["status"], "incomplete",
        "{}",
        o.stdout
    );
}

/// The verdicts of the non-ahead-of-time kinds, on files compiled here: a host-only library
/// with GPU code fails; a runtime-compiled proof covers only the targets it records; a declined
/// library's code objects are never counted as coverage.
#[test]
fn coverage_kinds_on_real_builds() {
    use rocforge::inspect::verdict::verdict;
    use rocforge::recipe::gpu_code::{GpuCode, ProofCount};
    let Some(b) = hipcc_built() else { return };
    if !tool("cc") {
        return;
    }
    let t = table();
    let both = [tid("gfx90c"), tid("gfx902")];
    let host = World::new().build();
    let c = host.path("h.c");
    std::fs::write(&c, "int host_only(int x) { return x + 1; }\n").unwrap();
    std::fs::create_dir(host.path("lib")).unwrap();
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(host.path("lib/libh.so"))
        .arg(&c));
    let host_only = GpuCode::HostOnly {
        reason: "links rocRAND".into(),
    };

    let plain = inspect::coverage(&[host.path("lib")], &both, &t).unwrap();
    let v = verdict(&host_only, &plain, &both).unwrap();
    assert!(v.holds(), "{v:?}");
    assert!(v.lines[0].starts_with("host-only: no GPU code"), "{v:?}");

    let gpu = inspect::coverage(&[b.path("prefix/lib/libab.so")], &both, &t).unwrap();
    assert!(gpu.complete());
    let v = verdict(&host_only, &gpu, &both).unwrap();
    assert!(!v.holds());
    assert!(
        v.gaps[0]
            .1
            .contains("carries GPU code, yet the recipe declares host-only"),
        "{v:?}"
    );

    let proof = [(
        "gfx90c".to_string(),
        ProofCount {
            compiled: 131,
            failed: 0,
            left_out: 0,
        },
    )]
    .into();
    let rt = GpuCode::RuntimeCompiled {
        reason: "kernels built by comgr".into(),
        method: "clang -x hip".into(),
        proof,
    };
    let v = verdict(&rt, &gpu, &both).unwrap();
    assert_eq!(v.gaps.len(), 1, "{v:?}");
    assert_eq!(v.gaps[0].0, Some(tid("gfx902")));
    assert!(
        v.lines
            .iter()
            .any(|l| l
                == "gfx90c: runtime-compiled, 131 of 131 kernel sources compile (clang -x hip)"),
        "{v:?}"
    );
    assert!(
        v.lines
            .iter()
            .any(|l| l.contains("are not counted as coverage")),
        "{v:?}"
    );
    let failing = [
        (
            "gfx90c".to_string(),
            ProofCount {
                compiled: 130,
                failed: 1,
                left_out: 0,
            },
        ),
        (
            "gfx902".to_string(),
            ProofCount {
                compiled: 113,
                failed: 0,
                left_out: 18,
            },
        ),
    ]
    .into();
    let rt = GpuCode::RuntimeCompiled {
        reason: "r".into(),
        method: "m".into(),
        proof: failing,
    };
    let v = verdict(&rt, &plain, &both).unwrap();
    assert_eq!(v.gaps.len(), 1);
    assert!(
        v.gaps[0].1.contains("1 of 131 kernel sources failed"),
        "{v:?}"
    );
    // Kernels the library leaves out are said, and are not a gap of the target.
    assert_eq!(v.gaps[0].0, Some(tid("gfx90c")), "{v:?}");
    assert!(
        v.lines.iter().any(|l| l
            == "gfx902: runtime-compiled, 113 of 131 kernels compile, 18 left out by the library (their solutions skipped) (m)"),
        "{v:?}"
    );

    let declined = GpuCode::Declined {
        reason: "kernels only for matrix-core GPUs".into(),
        fallback: "hipBLAS".into(),
    };
    // Another processor's code only (gfx900): the library does not run on ours, as declared.
    let old = inspect::coverage(&[b.path("prefix/lib/libold.so")], &both, &t).unwrap();
    let v = verdict(&declined, &old, &both).unwrap();
    assert!(v.holds(), "{v:?}");
    assert!(
        v.lines[0].contains("falls back to hipBLAS") || v.lines[0].contains("fall back to hipBLAS"),
        "{v:?}"
    );
    assert_eq!(v.code_object_libraries, 1);
    // Code for our targets is not declined: declaring it so is refused, target by target.
    let v = verdict(&declined, &gpu, &both).unwrap();
    assert!(!v.holds());
    assert_eq!(v.gaps.len(), 2, "{v:?}");
    assert!(
        v.gaps[0]
            .1
            .ends_with("carries code for gfx90c, yet the recipe declares declined"),
        "{v:?}"
    );
    assert!(verdict(&GpuCode::AheadOfTime, &gpu, &both).is_none());
}
