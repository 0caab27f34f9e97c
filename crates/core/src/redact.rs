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
    shown(&out).chars().take(MAX_SERVER_TEXT).collect()
}

/// `url` with any user name, password and token-like query value replaced by `***`, for
/// messages, logs and records.
pub fn url(url: &str) -> String {
    let Ok(mut u) = url::Url::parse(url) else {
        // Not a URL: cut anything that looks like `user:password@`.
        return match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(a)) if a > s => format!("{}***{}", &url[..s + 3], &url[a..]),
            _ => url.to_string(),
        };
    };
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
    if u.query().is_some() {
        let secret = |k: &str| {
            let k = k.to_ascii_lowercase();
            [
                "token",
                "key",
                "sig",
                "secret",
                "password",
                "auth",
                "credential",
            ]
            .iter()
            .any(|w| k.contains(w))
        };
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret(&k) {
                    "***".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// The most of a hostile path an error shows.
const SHOWN_CHARS: usize = 160;

/// `s` for a message: control and non-ASCII characters escaped, cut to [`SHOWN_CHARS`] with the
/// full length said, so a hostile name can neither flood a terminal nor rewrite it.
pub fn shown(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= SHOWN_CHARS {
            out.push_str(&format!("…({} bytes in all)", s.len()));
            break;
        }
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
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
