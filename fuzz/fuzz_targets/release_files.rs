//! Any bytes as the small files an install reads from a release directory before it trusts
//! anything: key lists and their minisign signatures (`keys.json`, `keys-N.json`, followed back
//! to a root key and forward again), a signature over an index, a public key line, a registry's
//! `WWW-Authenticate` challenge, and the index itself, then the install order of each component
//! it names. Never a panic, never unbounded work.
//!
//! The input is up to seven parts separated by `\n--8<--\n`: `keys.json`, its signature,
//! `keys-1.json`, its signature, `keys-2.json`, its signature, and `index.json`. The seeds
//! (fuzz/corpus/release_files/) are a genuine chain of two rotations from the root key below,
//! so the fuzzer starts past the signature checks.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rocforge::{install, sign, trust};

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

/// The key the seeds' chain starts from (its secret key is not kept).
const ROOT: &str = "RWSR59VmfXsnBqUQZwFLrtCGDDZuQ23EFvy38v6CzrIsNunUAa1xyJ0+";
const SEPARATOR: &[u8] = b"\n--8<--\n";
const NAMES: [&str; 3] = ["keys.json", "keys-1.json", "keys-2.json"];

struct Parts(BTreeMap<&'static str, (Vec<u8>, Option<String>)>);

impl trust::ListSource for Parts {
    fn fetch(&mut self, name: &str) -> Result<Option<trust::Fetched>, String> {
        Ok(self.0.get(name).map(|(bytes, signature)| trust::Fetched {
            bytes: bytes.clone(),
            signature: signature.clone(),
        }))
    }

    fn describe(&self, name: &str) -> String {
        name.to_string()
    }
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        parts.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    parts.push(rest);
    parts
}

fuzz_target!(|data: &[u8]| {
    let parts = split(data);
    let text = |i: usize| String::from_utf8_lossy(parts.get(i).copied().unwrap_or_default());
    let root = sign::parse_public(ROOT).expect("the root key parses");

    for i in 0..parts.len() {
        let t = text(i);
        let _ = sign::parse_public(&t);
        let _ = rocforge::oci::challenge_params(&t);
        if let Err(e) = sign::verify_bytes(std::slice::from_ref(&root), parts[i], &t, "fuzz") {
            let _ = e.to_string();
        }
    }

    let mut files = BTreeMap::new();
    for (n, name) in NAMES.iter().enumerate() {
        if let Some(bytes) = parts.get(2 * n) {
            files.insert(
                *name,
                (
                    bytes.to_vec(),
                    parts.get(2 * n + 1).map(|_| text(2 * n + 1).into_owned()),
                ),
            );
        }
    }
    // A state file that does not exist: empty, and read-only, so nothing is written.
    let mut state = trust::StateFile::load(std::path::Path::new(
        "/nonexistent/rocforge-fuzz/trust.json",
    ))
    .expect("a missing state file is an empty state")
    .read_only();
    match trust::resolve(
        std::slice::from_ref(&root),
        &mut Parts(files),
        "keys.json",
        &mut state,
    ) {
        Ok(resolved) => {
            for k in &resolved.keys {
                let key = sign::public_base64(k);
                let _ = sign::verify_bytes(&resolved.keys, key.as_bytes(), &text(1), "fuzz");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }

    if let Some(bytes) = parts.get(6)
        && let Ok(index) = install::parse_index(bytes, "index.json")
    {
        let mut names: Vec<String> = index.artifacts.iter().map(|a| a.name.to_string()).collect();
        names.sort();
        names.dedup();
        for n in names.iter().take(16) {
            let _ = install::plan::resolve(&index, std::slice::from_ref(n), &[]);
        }
        let _ = install::plan::resolve(&index, &names, &[]);
    }
});
