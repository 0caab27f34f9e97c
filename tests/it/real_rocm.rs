//! Real ROCm, from Debian's archive: Debian's own rocRAND binary against the coverage gate, and
//! rocRAND's library built from Debian's upstream tarball in the debian-6.4 builder image for
//! gfx90c and gfx902, as the line ships it. Needs the
//! Debian mirror and the builder image that `.ci/run` builds (scripts/debian-image.sh); in CI a
//! missing one fails the test.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

const BUILDER: &str = "localhost/rocforge/builder:debian-6.4";
/// Debian sid's librocrand1 (rocRAND 6.4.3, built by Debian for its 11 targets), pinned by the
/// sha256 of sid's Packages index.
const LIBROCRAND_DEB: &str =
    "http://deb.debian.org/debian/pool/main/r/rocrand/librocrand1_6.4.3-1_amd64.deb";
const LIBROCRAND_SHA256: &str = "94cd9fe750e99453154384affbe25f97021d0891a459fe665e5c36e9875384e8";

fn mirror_answers() -> bool {
    Command::new("curl")
        .args(["-fsSI", "--max-time", "20", LIBROCRAND_DEB])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Debian's binary package at `url`, downloaded, checked against `sha256` and unpacked into
/// `<dir>/root`; None (the test skipped, or failed in CI) without the mirror or dpkg-deb.
fn debian_package(url: &str, sha256: &str) -> Option<tempfile::TempDir> {
    if !require("the Debian mirror (deb.debian.org)", mirror_answers())
        || !require("dpkg-deb", which("dpkg-deb"))
    {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let deb = dir.path().join("package.deb");
    let ok = Command::new("curl")
        .args(["-fsS", "--max-time", "900", "-o"])
        .arg(&deb)
        .arg(url)
        .status()
        .unwrap();
    assert!(ok.success(), "{url}");
    assert_eq!(sha256_file(&deb), sha256, "{url}");
    assert!(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(dir.path().join("root"))
            .status()
            .unwrap()
            .success()
    );
    std::fs::remove_file(&deb).unwrap();
    Some(dir)
}

#[test]
fn debians_own_rocrand_is_not_coverage_for_gfx90c() {
    let Some(dir) = debian_package(LIBROCRAND_DEB, LIBROCRAND_SHA256) else {
        return;
    };
    let lib = "root/usr/lib/x86_64-linux-gnu/librocrand.so.1";
    // Debian builds gfx900 code, which a Vega iGPU runs only when it pretends to be one.
    let o = rocforge(dir.path(), &["inspect", "--against", "gfx90c,gfx902", lib]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "gfx90c: gfx900 code only: runs on gfx90c only under HSA_OVERRIDE_GFX_VERSION=9.0.0"
        ),
        "{}",
        o.stdout
    );
    // Its own targets it does carry.
    let o = rocforge(dir.path(), &["inspect", "--against", "gfx900,gfx906", lib]);
    assert_eq!(o.code, 0, "{}", o.stdout);
}

/// Debian sid's librocblas4 (rocBLAS 6.4.4 with its Tensile libraries, built by Debian for its
/// 11 targets), pinned by the sha256 of sid's Packages index.
const LIBROCBLAS_DEB: &str =
    "http://deb.debian.org/debian/pool/main/r/rocblas/librocblas4_6.4.4-4_amd64.deb";
const LIBROCBLAS_SHA256: &str = "05613a07d3fba2feaa8b81a86a22bc142dd4fb6630c44c416883a33bf22a1cdb";

/// Debian's real Tensile libraries, read through their catalogs: gfx900 has its own tuned
/// solutions; gfx90c has no catalog of its own and would run gfx900's only under a spoof; and
/// gfx1010's catalog leads only to Tensile's fallback kernels, which its code objects alone
/// would not show.
#[test]
fn debians_rocblas_tensile_catalogs_say_what_each_target_gets() {
    let Some(dir) = debian_package(LIBROCBLAS_DEB, LIBROCBLAS_SHA256) else {
        return;
    };
    let library = "root/usr/lib/x86_64-linux-gnu/rocblas/4.4.1/library";
    let o = rocforge(
        dir.path(),
        &[
            "inspect",
            "--against",
            "gfx900,gfx90c,gfx1010",
            "--format",
            "json",
            library,
        ],
    );
    assert_eq!(o.code, 1, "{}", o.stdout);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let cell = |target: &str| {
        v["rows"][0]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["target"] == target)
            .unwrap()
            .clone()
    };
    assert_eq!(cell("gfx900")["status"], "present", "{}", o.stdout);
    assert_eq!(cell("gfx90c")["status"], "only-compatible", "{}", o.stdout);
    assert_eq!(cell("gfx90c")["nearest"], "gfx900", "{}", o.stdout);
    assert_eq!(cell("gfx1010")["status"], "incomplete", "{}", o.stdout);
    assert!(
        cell("gfx1010")["why"]
            .as_str()
            .unwrap()
            .contains("TensileLibrary_lazy_gfx1010.dat: only Tensile's fallback kernels"),
        "{}",
        o.stdout
    );
}

fn image_present(image: &str) -> bool {
    Command::new("podman")
        .args(["image", "exists", image])
        .env("CONTAINERS_CONF", containers_conf())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn rocrand_from_debians_archive_builds_for_gfx90c_and_gfx902() {
    if !require(
        &format!("podman with {BUILDER} (scripts/debian-image.sh)"),
        which("podman") && image_present(BUILDER),
    ) || !require("the Debian mirror (deb.debian.org)", mirror_answers())
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The line's rocRAND exactly as the built-in catalog ships it (the library; this line
    // builds no test client).
    // ROCFORGE_TEST_CACHE: a source cache (and ccache) to reuse across runs on a developer's
    // machine; CI starts from nothing.
    let cache = std::env::var_os("ROCFORGE_TEST_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| d.join("cache"));
    let env: [(&str, &Path); 3] = [
        ("CONTAINERS_CONF", &containers_conf()),
        ("ROCFORGE_STORE", &d.join("store")),
        ("ROCFORGE_CACHE", &cache),
    ];
    let o = rocforge_env(
        d,
        &env,
        &[
            "--release",
            "debian-6.4",
            "build",
            "rocrand",
            "--arch",
            "gfx90c,gfx902",
            "--runtime",
            "podman",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let tree = o.stdout.trim().to_string();
    assert!(
        Path::new(&tree).join("lib/librocrand.so").exists(),
        "{tree}"
    );
    // The gate passed; inspect agrees, and the code objects are the two targets' own.
    let o = rocforge(d, &["inspect", "--against", "gfx90c,gfx902", &tree]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(
        o.stdout
            .contains("0 missing, 0 with another target's code only"),
        "{}",
        o.stdout
    );
    let o = rocforge(d, &["--format", "json", "inspect", &format!("{tree}/lib")]);
    assert_eq!(o.code, 0);
    for t in ["gfx90c", "gfx902"] {
        assert!(o.stdout.contains(&format!("amdgcn-amd-amdhsa--{t}")), "{t}");
    }
    assert!(!o.stdout.contains("--gfx900\""), "no gfx900 code");

    // Packaged and signed, then installed by rocforge from the local index into a fresh prefix
    // of a sid container (the libraries need sid's glibc), where a program built against the
    // installed rocRAND links and starts, and says there is no GPU.
    ok(d, &["key", "generate", "--out", "keys"]);
    let o = rocforge_env(
        d,
        &env,
        &[
            "--release",
            "debian-6.4",
            "package",
            "rocrand",
            "--arch",
            "gfx90c,gfx902",
            "--runtime",
            "container",
            "--out",
            "dist",
            "--sign-key",
            "keys/rocforge.key",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    std::fs::write(d.join("prog.cpp"), PROGRAM).unwrap();
    let script = "set -e\n\
        rocforge install rocrand --release debian-6.4 --arch gfx90c,gfx902 --from /w/dist/index.json \
          --prefix /opt/fresh --key /w/keys/rocforge.pub\n\
        rocforge inspect --against gfx90c,gfx902 /opt/fresh\n\
        hipcc -o /tmp/prog /w/prog.cpp -I/opt/fresh/include -L/opt/fresh/lib -lrocrand\n\
        set +e\n\
        LD_LIBRARY_PATH=/opt/fresh/lib /tmp/prog\n\
        echo \"exit=$?\"\n";
    let out = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args(["run", "--rm", "--network=none", "-v"])
        .arg(format!(
            "{}:/usr/local/bin/rocforge:ro",
            env!("CARGO_BIN_EXE_rocforge")
        ))
        .arg("-v")
        .arg(format!("{}:/w:ro", d.display()))
        .args([BUILDER, "bash", "-c", script])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("index signature: good"), "{text}");
    assert!(
        text.contains("0 missing, 0 with another target's code only"),
        "{text}"
    );
    assert!(
        text.contains("hipGetDeviceCount:"),
        "the program ran: {text}"
    );
    assert!(text.contains("exit=3"), "no GPU here: {text}");
}

/// Links rocRAND and HIP, then asks for a device: on a machine without an AMD GPU it reports
/// none and exits 3; a loader or link failure would exit otherwise (127, or no output).
const PROGRAM: &str = r#"#include <cstdio>
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>

int main() {
    int version = 0;
    rocrand_get_version(&version);
    std::printf("rocRAND %d\n", version);
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    std::printf("hipGetDeviceCount: %s, %d device(s)\n", hipGetErrorString(e), n);
    if (e != hipSuccess || n == 0) {
        return 3;
    }
    rocrand_generator g;
    return rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_DEFAULT) == ROCRAND_STATUS_SUCCESS ? 0 : 1;
}
"#;

/// hipSOLVER's run-time loader of rocSPARSE needs rocSPARSE's headers, and the image carries
/// them alone: a Debian rocSPARSE library or CMake package in the image could be found in
/// place of the one the line builds.
#[test]
fn the_builder_image_has_rocsparses_headers_and_not_debians_rocsparse() {
    if !require(
        &format!("podman with {BUILDER} (scripts/debian-image.sh)"),
        which("podman") && image_present(BUILDER),
    ) {
        return;
    }
    let o = Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args([
            "run",
            "--rm",
            "--network=none",
            BUILDER,
            "sh",
            "-c",
            "grep -h '#define ROCSPARSE_VERSION_M' /usr/include/rocsparse/rocsparse-version.h; \
             find / -xdev \\( -name 'librocsparse*' -o -name 'rocsparse-config*.cmake' \\) -print",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "#define ROCSPARSE_VERSION_MAJOR 3",
            "#define ROCSPARSE_VERSION_MINOR 4",
        ],
        "rocSPARSE 3.4 (6.4.3) headers and no library or CMake package"
    );
}

/// rocm-examples in the default line: its Applications/monte_carlo_pi needs hipRAND, whose tarball
/// Debian's mirror does not serve, so the line takes hipRAND from its git repository, which a
/// machine without GitHub maps to a snapshot of its own in `[mirrors]`. Cheap: a plan and a fetch
/// from a repository made here (the real build is recorded in docs/catalog.md, not run in CI).
#[test]
fn rocm_examples_plans_hiprand_and_fetches_it_through_mirrors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = ok(
        d,
        &[
            "--release",
            "debian-6.4",
            "plan",
            "rocm-examples",
            "--arch",
            "gfx90c,gfx902",
        ],
    );
    // The table: from its header to the blank line before the totals.
    let rows: Vec<Vec<&str>> = plan
        .lines()
        .skip_while(|l| !l.starts_with("#  component"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let order: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(
        order,
        [
            "rocprim",
            "hipcub",
            "rocrand",
            "hiprand",
            "rocthrust",
            "rocm-examples"
        ],
        "{plan}"
    );
    let hiprand = &rows[3];
    assert_eq!(
        (hiprand[2], *hiprand.last().unwrap()),
        ("2.11.0", "rocrand"),
        "{plan}"
    );
    assert!(
        plan.contains("hipcub, hiprand, rocprim, rocrand, rocthrust"),
        "{plan}"
    );

    // The mirror answers but lacks the pinned commit: the error names the mirror, not GitHub.
    let repo = d.join("hipRAND.git");
    make_repo(&repo, &[("CMakeLists.txt", "project(hipRAND)\n")], "t");
    let url = format!("file://{}", repo.display());
    let config = d.join("mirrors.toml");
    std::fs::write(
        &config,
        format!("[mirrors]\n\"https://github.com/ROCm/hipRAND.git\" = \"{url}\"\n"),
    )
    .unwrap();
    let o = rocforge_env(
        d,
        &[("ROCFORGE_CONFIG", &config)],
        &["--release", "debian-6.4", "fetch", "hiprand"],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "hiprand: fetching https://github.com/ROCm/hipRAND.git from mirror {url}"
        )),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(&format!(
            "error: hiprand: {url} has no commit 2d9a226b515d259af1f0850a0523ae852a7ad826"
        )),
        "{}",
        o.stderr
    );
}
