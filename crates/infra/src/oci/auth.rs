//! Bearer challenges (RFC 7235) and the tokens they lead to.

use std::io::Read;

use reqwest::blocking::Client;

/// The auth-params of a `Bearer k=v, k="quoted, with commas"` challenge (RFC 7235): a quoted
/// value may hold commas (`scope="repository:r:push,pull"`) and `\`-escapes. None when it is
/// not a Bearer challenge or is malformed.
pub fn challenge_params(challenge: &str) -> Option<Vec<(String, String)>> {
    let rest = challenge.trim_start();
    let (scheme, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') || key.is_empty() {
            return None;
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' || c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.to_ascii_lowercase(), value));
    }
}

/// The most of a token server's reply read: a token is a few KiB, and the realm is whatever
/// the registry's challenge names. A longer reply is cut, fails to parse, and gives no token.
const MAX_TOKEN_REPLY: u64 = 1 << 20;

/// Follows a `Bearer realm="…",service="…",scope="…"` challenge for an anonymous token.
pub(super) fn anonymous_token(client: &Client, challenge: &str) -> Option<String> {
    let mut realm = None;
    let mut query = Vec::new();
    for (k, v) in challenge_params(challenge)? {
        if k == "realm" {
            realm = Some(v);
        } else {
            query.push((k, v));
        }
    }
    let url = reqwest::Url::parse_with_params(&realm?, &query).ok()?;
    let resp = client.get(url).send().ok()?;
    let v: serde_json::Value = serde_json::from_reader(resp.take(MAX_TOKEN_REPLY)).ok()?;
    v.get("token")
        .or_else(|| v.get("access_token"))?
        .as_str()
        .map(str::to_string)
}

/// A token for `scope` from a Bearer challenge's realm (with Basic credentials when given).
pub(super) fn token_for(
    client: &Client,
    challenge: &str,
    scope: &str,
    creds: Option<&(String, String)>,
) -> Option<String> {
    let mut realm = None;
    let mut query = Vec::new();
    for (k, v) in challenge_params(challenge)? {
        match k.as_str() {
            "realm" => realm = Some(v),
            "scope" => {}
            _ => query.push((k, v)),
        }
    }
    query.push(("scope".into(), scope.to_string()));
    let url = reqwest::Url::parse_with_params(&realm?, &query).ok()?;
    let mut rb = client.get(url);
    if let Some((u, p)) = creds {
        rb = rb.basic_auth(u, Some(p));
    }
    let resp = rb.send().ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_reader(resp.take(MAX_TOKEN_REPLY)).ok()?;
    v.get("token")
        .or_else(|| v.get("access_token"))?
        .as_str()
        .map(str::to_string)
}
