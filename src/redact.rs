//! Keeping secrets out of what rocforge prints and records: server answers that may echo a
//! token, and text that may carry one.

/// The environment variables whose values are secrets rocforge may send somewhere.
pub const SECRET_ENV: &[&str] = &[
    "GITHUB_TOKEN",
    "ROCFORGE_REGISTRY_PASSWORD",
    "ROCFORGE_SUBMIT_TOKEN",
    "ROCFORGE_KEY_PASSWORD",
    "ROCFORGE_CACHE_KEY_PASSWORD",
    "ROCFORGE_SIGNING_KEY",
    "ROCFORGE_CACHE_KEY",
];

/// The most of a server's own words an error relays.
const MAX_SERVER_TEXT: usize = 300;

/// `text` from a server, fit to print: every secret rocforge holds (the values of
/// [`SECRET_ENV`], and what follows `Bearer `, `Basic `, `token=`… ) replaced by `***`, GitHub
/// token shapes (`ghp_…`, `github_pat_…`) too, then escaped and cut.
pub fn server_text(text: &str) -> String {
    let mut s = text.to_string();
    for var in SECRET_ENV {
        if let Ok(v) = std::env::var(var) {
            for line in v.lines().map(str::trim).filter(|l| l.len() >= 4) {
                s = s.replace(line, "***");
            }
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut words =
        s.split_inclusive(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '&'));
    let mut hide_next = false;
    for w in words.by_ref() {
        let core =
            w.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '&'));
        let tail = &w[core.len()..];
        let lower = core.to_ascii_lowercase();
        let secret_shape = ["ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_"]
            .iter()
            .any(|p| core.starts_with(p));
        if hide_next && !core.is_empty() {
            out.push_str("***");
            hide_next = false;
        } else if secret_shape {
            out.push_str("***");
        } else if let Some((k, _)) = core.split_once('=').filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            ["token", "password", "secret", "key", "auth"]
                .iter()
                .any(|w| k.contains(w))
        }) {
            out.push_str(k);
            out.push_str("=***");
        } else {
            out.push_str(core);
            hide_next = matches!(lower.as_str(), "bearer" | "basic" | "token");
        }
        out.push_str(tail);
    }
    crate::package::extract::shown(&out)
        .chars()
        .take(MAX_SERVER_TEXT)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_server_answers_are_hidden() {
        let t = server_text(
            "bad credentials: Authorization: Bearer abc.def for ghp_0123456789abcdef, access_token=zzz\n\x1b[2J",
        );
        assert!(
            !t.contains("abc.def") && !t.contains("ghp_0") && !t.contains("zzz"),
            "{t}"
        );
        assert!(!t.contains('\x1b'), "{t}");
        assert!(
            t.starts_with("bad credentials: Authorization: Bearer ***"),
            "{t}"
        );
        assert!(server_text(&"x".repeat(10_000)).len() <= MAX_SERVER_TEXT * 4);
    }
}
