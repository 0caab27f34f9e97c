//! A patch's text made into the `git diff` form libgit2 parses: the header split off, plain
//! `diff -u` sections given a git header, hunks counted, modes made canonical.

pub(super) fn split_lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

fn is_plain_start(lines: &[&[u8]], i: usize) -> bool {
    lines[i].starts_with(b"--- ")
        && lines.get(i + 1).is_some_and(|l| l.starts_with(b"+++ "))
        && lines.get(i + 2).is_some_and(|l| l.starts_with(b"@@ -"))
}

fn find_start(lines: &[&[u8]]) -> Option<usize> {
    for i in 0..lines.len() {
        if lines[i].starts_with(b"diff --git ") {
            return Some(i);
        }
        if is_plain_start(lines, i) {
            // `diff -ru a/x b/x` before a plain diff belongs to it, not to the header.
            let cmd = i > 0 && lines[i - 1].starts_with(b"diff ");
            return Some(if cmd { i - 1 } else { i });
        }
    }
    None
}

/// Splits a patch into its header text and its diff, normalised for libgit2: plain `diff -u`
/// sections get a `diff --git` header, modes are made canonical, and a patch whose every line
/// was converted to CRLF (header lines included) is converted back.
pub(super) fn split_patch(bytes: &[u8]) -> Result<(String, Vec<u8>), String> {
    let lines = split_lines(bytes);
    let Some(start) = find_start(&lines) else {
        return Err("no `diff --git` or `---`/`+++`/`@@` lines found".into());
    };
    if lines[start].ends_with(b"\r\n") {
        let converted: Vec<u8> = lines
            .iter()
            .flat_map(|l| {
                l.strip_suffix(b"\r\n")
                    .map_or_else(|| l.to_vec(), |s| [s, b"\n"].concat())
            })
            .collect();
        return normalise(&converted);
    }
    normalise(bytes)
}

fn normalise(bytes: &[u8]) -> Result<(String, Vec<u8>), String> {
    let lines = split_lines(bytes);
    let Some(start) = find_start(&lines) else {
        return Err("no `diff --git` or `---`/`+++`/`@@` lines found".into());
    };
    let header = String::from_utf8_lossy(&lines[..start].concat()).into_owned();

    #[derive(PartialEq)]
    enum Section {
        None,
        Git,
        Plain,
    }
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + 256);
    let mut section = Section::None;
    let mut git_header_open = false;
    let (mut old_left, mut new_left) = (0usize, 0usize);
    let mut hunk_line = 0;
    let mut i = start;
    while i < lines.len() {
        let line = lines[i];
        let lineno = i + 1;
        if old_left > 0 || new_left > 0 {
            match line.first() {
                Some(b' ') | Some(b'\n') => {
                    if old_left == 0 || new_left == 0 {
                        return Err(hunk_short(hunk_line, lineno));
                    }
                    old_left -= 1;
                    new_left -= 1;
                }
                Some(b'-') if old_left > 0 => old_left -= 1,
                Some(b'+') if new_left > 0 => new_left -= 1,
                Some(b'\\') => {}
                _ => return Err(hunk_short(hunk_line, lineno)),
            }
            out.extend_from_slice(line);
            i += 1;
            continue;
        }
        if line.starts_with(b"diff --git ") {
            section = Section::Git;
            git_header_open = true;
            out.extend_from_slice(line);
        } else if !git_header_open && is_plain_start(&lines, i) {
            section = Section::Plain;
            let old = plain_path(&lines[i][4..]).map_err(|e| format!("line {lineno}: {e}"))?;
            let new =
                plain_path(&lines[i + 1][4..]).map_err(|e| format!("line {}: {e}", lineno + 1))?;
            let (old, new) = match (old, new) {
                (None, None) => return Err(format!("line {lineno}: both sides are /dev/null")),
                (Some(o), Some(n)) if o != n => (Some(n.clone()), Some(n)),
                other => other,
            };
            let a = old.as_deref().or(new.as_deref()).unwrap_or_default();
            let b = new.as_deref().or(old.as_deref()).unwrap_or_default();
            out.extend_from_slice(
                format!(
                    "diff --git {} {}\n",
                    quote(&format!("a/{a}")),
                    quote(&format!("b/{b}"))
                )
                .as_bytes(),
            );
            if old.is_none() {
                out.extend_from_slice(b"new file mode 100644\n");
            }
            if new.is_none() {
                out.extend_from_slice(b"deleted file mode 100644\n");
            }
            let side = |p: &Option<String>, prefix: &str| {
                p.as_ref()
                    .map_or("/dev/null".to_string(), |p| quote(&format!("{prefix}/{p}")))
            };
            out.extend_from_slice(
                format!("--- {}\n+++ {}\n", side(&old, "a"), side(&new, "b")).as_bytes(),
            );
            i += 2;
            continue;
        } else if line.starts_with(b"@@ -") {
            if section == Section::None {
                return Err(format!("line {lineno}: hunk outside a file section"));
            }
            let (o, n) =
                hunk_counts(line).ok_or_else(|| format!("line {lineno}: bad hunk header"))?;
            (old_left, new_left) = (o, n);
            hunk_line = lineno;
            git_header_open = false;
            out.extend_from_slice(line);
        } else if line.starts_with(b"\\") {
            out.extend_from_slice(line);
        } else if section == Section::Git {
            if git_header_open {
                out.extend_from_slice(
                    &canonical_mode_line(line).map_err(|e| format!("line {lineno}: {e}"))?,
                );
                if line.starts_with(b"GIT binary patch") || line.starts_with(b"Binary files ") {
                    git_header_open = false;
                }
            } else {
                out.extend_from_slice(line);
            }
        }
        i += 1;
    }
    if old_left > 0 || new_left > 0 {
        return Err(format!(
            "the hunk at line {hunk_line} is cut short by the end of the patch"
        ));
    }
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok((header, out))
}

fn hunk_short(hunk_line: usize, lineno: usize) -> String {
    format!("line {lineno}: the hunk at line {hunk_line} has fewer lines than its header says")
}

/// `@@ -a[,b] +c[,d] @@` → (b, d).
fn hunk_counts(line: &[u8]) -> Option<(usize, usize)> {
    let s = std::str::from_utf8(line).ok()?;
    let rest = s.strip_prefix("@@ -")?;
    let end = rest.find(" @@")?;
    let mut parts = rest[..end].split(" +");
    let count = |r: &str| -> Option<usize> {
        match r.split_once(',') {
            Some((start, n)) => {
                start.parse::<usize>().ok()?;
                n.parse().ok()
            }
            None => {
                r.parse::<usize>().ok()?;
                Some(1)
            }
        }
    };
    let old = count(parts.next()?)?;
    let new = count(parts.next()?)?;
    parts.next().is_none().then_some((old, new))
}

/// The path of a `---`/`+++` line of a plain diff, strip level 1; `None` for /dev/null.
fn plain_path(rest: &[u8]) -> Result<Option<String>, String> {
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
    let raw = String::from_utf8(rest.to_vec()).map_err(|_| "path is not UTF-8".to_string())?;
    let path = if raw.starts_with('"') {
        unquote(&raw).ok_or_else(|| format!("bad quoted path {raw}"))?
    } else {
        raw.split('\t').next().unwrap_or_default().to_string()
    };
    if path == "/dev/null" {
        return Ok(None);
    }
    match path.trim_start_matches('/').split_once('/') {
        Some((_, p)) if !p.is_empty() => Ok(Some(p.to_string())),
        _ => Err(format!("cannot strip one leading directory from {path:?}")),
    }
}

fn needs_quote(s: &str) -> bool {
    s.bytes()
        .any(|b| b < 0x20 || b == b'"' || b == b'\\' || b == b' ' || b == 0x7f)
}

fn quote(s: &str) -> String {
    if !needs_quote(s) {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\{:03o}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?;
    let end = inner.rfind('"')?;
    let inner = &inner.as_bytes()[..end];
    let mut out = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        if inner[i] != b'\\' {
            out.push(inner[i]);
            i += 1;
            continue;
        }
        let c = *inner.get(i + 1)?;
        i += 2;
        out.push(match c {
            b'n' => b'\n',
            b't' => b'\t',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'r' => b'\r',
            b'v' => 11,
            b'0'..=b'7' => {
                let digits = inner.get(i - 1..i + 2)?;
                i += 1;
                u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok()?
            }
            other => other,
        });
    }
    String::from_utf8(out).ok()
}

/// Git header lines that carry a file mode, with the mode made one git knows (as git does:
/// any regular file is 100644 or 100755).
fn canonical_mode_line(line: &[u8]) -> Result<Vec<u8>, String> {
    const KEYS: [&str; 4] = [
        "old mode ",
        "new mode ",
        "new file mode ",
        "deleted file mode ",
    ];
    let Ok(text) = std::str::from_utf8(line) else {
        return Ok(line.to_vec());
    };
    let (prefix, mode, suffix) = if let Some(k) = KEYS.iter().find(|k| text.starts_with(*k)) {
        let rest = &text[k.len()..];
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        (k.to_string(), &rest[..end], &rest[end..])
    } else if let Some(rest) = text.strip_prefix("index ") {
        let body = rest.trim_end();
        match body.split_once(' ') {
            Some((ids, mode)) => (format!("index {ids} "), mode, &rest[body.len()..]),
            None => return Ok(line.to_vec()),
        }
    } else {
        return Ok(line.to_vec());
    };
    let m = u32::from_str_radix(mode, 8).map_err(|_| format!("bad file mode {mode:?}"))?;
    let canonical = match m & 0o170000 {
        0o100000 if m & 0o111 != 0 => 0o100755,
        0o100000 => 0o100644,
        0o120000 => 0o120000,
        0o160000 => 0o160000,
        0o040000 => 0o040000,
        _ => return Err(format!("unknown file mode {mode:?}")),
    };
    Ok(format!("{prefix}{canonical:06o}{suffix}").into_bytes())
}
