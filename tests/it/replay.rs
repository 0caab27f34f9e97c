//! scripts/miopen-replay's fake HIP device, on its own: MIOpen's proof of its run-time kernels
//! rests on it answering as the target's device and telling a code object for that processor
//! from one for another. In the builder image (HIP 6's headers, hipcc): code objects compiled
//! for gfx90c and gfx902, a program linked against the HIP runtime with the fake device
//! preloaded, run once as each target.

use crate::common;

use common::*;

const BUILDER: &str = "localhost/rocforge/builder:debian-6.4";

#[test]
fn the_fake_device_answers_as_the_target_and_tells_its_code_objects_apart() {
    if !podman_ready(BUILDER) {
        return;
    }
    let script = manifest().join("scripts/miopen-replay");
    let fixture = manifest().join("tests/fixtures/fakedevice");
    let work = tempfile::tempdir().unwrap();
    let run = r#"set -eu
cd /scratch
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -o fakedevice.so /replay/fakedevice.c -ldl -lpthread
gcc -std=gnu11 -O2 -Wall -o probe /fixture/probe.c -lamdhip64
for a in gfx90c gfx902; do
  hipcc --offload-arch=$a --cuda-device-only --no-gpu-bundle-output -c -o $a.co /fixture/kernel.hip
done
for t in gfx90c gfx902; do
  echo "== $t"
  FAKEDEVICE_ARCH=$t:xnack- FAKEDEVICE_CU=8 FAKEDEVICE_LOG=0 FAKEDEVICE_REPORT=/scratch/$t.jsonl \
    LD_PRELOAD=/scratch/fakedevice.so ./probe gfx90c.co gfx902.co
  cat /scratch/$t.jsonl
done
"#;
    let o = std::process::Command::new("podman")
        .env("CONTAINERS_CONF", containers_conf())
        .args([
            "run",
            "--rm",
            "--network=none",
            "--security-opt",
            "label=disable",
        ])
        .arg("-v")
        .arg(format!("{}:/replay:ro", script.display()))
        .arg("-v")
        .arg(format!("{}:/fixture:ro", fixture.display()))
        .arg("-v")
        .arg(format!("{}:/scratch", work.path().display()))
        .args([BUILDER, "bash", "-c", run])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (t, other) in [("gfx90c", "gfx902"), ("gfx902", "gfx90c")] {
        let part = out
            .split(&format!("== {t}\n"))
            .nth(1)
            .unwrap()
            .split("== ")
            .next()
            .unwrap();
        assert!(part.contains(&format!("arch {t}:xnack- cu 8\n")), "{part}");
        assert!(part.contains("copy ok\n"), "{part}");
        let report: serde_json::Value = serde_json::from_str(
            part.lines()
                .find(|l| l.starts_with('{'))
                .unwrap_or_else(|| panic!("no report: {part}")),
        )
        .unwrap();
        assert_eq!(report["arch"], format!("{t}:xnack-"), "{report}");
        assert_eq!(report["module_loads"], 2, "{report}");
        assert_eq!(report["module_loads_for_arch"], 1, "{report}");
        assert_eq!(report["module_loads_other"], 1, "{report}");
        assert_eq!(report["other_machs"], other, "{report}");
        assert_eq!(report["launches_skipped"], 0, "{report}");
    }
}
