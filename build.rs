// The shipped catalog is embedded with include_dir, which cannot tell cargo which files it read
// on stable Rust: rebuild whenever anything under these paths changes.
fn main() {
    for path in ["recipes", "patches", "rocforge.lock"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
