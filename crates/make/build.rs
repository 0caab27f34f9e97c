// The shipped catalog and the builder images' Containerfiles are embedded with include_dir, which cannot tell cargo which files it read
// on stable Rust: rebuild whenever anything under these paths changes.
fn main() {
    for path in ["recipes", "patches", "containers", "rocforge.lock"] {
        println!("cargo:rerun-if-changed=../../{path}");
    }
}
