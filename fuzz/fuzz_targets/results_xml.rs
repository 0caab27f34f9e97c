//! Any bytes as a test client's gtest XML report (`GTEST_OUTPUT=xml:FILE`), read by
//! `rocforge test` (crates/use/src/testrun/gtest.rs), and, when they are text, as the client's event
//! lines and `--gtest_list_tests` listing. Never a panic; what comes back is serialisable.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: rocforge_fuzz::Guard = rocforge_fuzz::Guard;

fuzz_target!(|data: &[u8]| {
    use rocforge::testrun::gtest;
    match gtest::parse_xml(data) {
        Ok(cases) => {
            for c in &cases {
                assert!(matches!(c.outcome, "passed" | "failed" | "skipped"));
                let _ = serde_json::to_string(&(&c.name, c.outcome, c.seconds, &c.message));
            }
        }
        Err(e) => {
            let _ = e.len();
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            let _ = gtest::parse_line(line);
        }
        let _ = gtest::parse_list(text);
    }
});
