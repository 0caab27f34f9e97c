//! Any bytes as a recipe file, through the catalog's recipe entry points (`recipe::parse`, and
//! `recipe::outline`, which the catalog uses for a recipe that failed its checks), with the
//! target table from recipes/arches.toml; every diagnostic is rendered as the CLI prints it.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rocforge::arch::ArchTable;
use rocforge::catalog::{CatalogRoot, load_arches};
use rocforge::diag::{Diagnostics, SourceFile};

fn arches() -> &'static ArchTable {
    static ARCHES: OnceLock<ArchTable> = OnceLock::new();
    ARCHES.get_or_init(|| {
        let mut d = Diagnostics::default();
        let table = load_arches(&CatalogRoot::Embedded, &mut d).expect("recipes/arches.toml");
        assert!(d.is_empty(), "recipes/arches.toml has problems");
        table
    })
}

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

fuzz_target!(|data: &[u8]| {
    // The catalog reads recipe files as UTF-8 text; other bytes never reach the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = SourceFile::new("recipes/fuzz-1.0/fuzz.toml", text);
    let mut d = Diagnostics::default();
    let _ = rocforge::recipe::parse(&file, "fuzz", arches(), &mut d);
    let _ = rocforge::recipe::outline(&file, "fuzz");
    // Rendering (annotate-snippets) takes most of the time of a run: once, without colour.
    for diag in d.iter() {
        let _ = diag.render(false);
    }
});
