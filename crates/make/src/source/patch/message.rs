//! The commit message a patch carries, cleaned the way `git commit` cleans one.

use std::path::Path;

/// The commit message a patch's header gives: the subject (from a mail `Subject:` line, without
/// `[PATCH …]`) and body of `git format-patch` output, or the free text before the diff, up to
/// the first `---` line. Falls back to "Apply <file stem>".
pub(super) fn message_from_header(header: &str, name: &str) -> String {
    let lines: Vec<&str> = header.lines().collect();
    let first_para_end = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .unwrap_or(lines.len());
    let is_mail = lines.first().is_some_and(|l| l.starts_with("From "))
        && lines[..first_para_end]
            .iter()
            .any(|l| l.starts_with("Subject:"));
    let mut out: Vec<String> = Vec::new();
    let body: &[&str] = if is_mail {
        let mut subject = String::new();
        let mut in_subject = false;
        for l in &lines[..first_para_end] {
            if let Some(s) = l.strip_prefix("Subject:") {
                subject = s.trim().to_string();
                in_subject = true;
            } else if in_subject && l.starts_with([' ', '\t']) {
                subject.push(' ');
                subject.push_str(l.trim());
            } else {
                in_subject = false;
            }
        }
        while subject.starts_with('[') {
            match subject.find(']') {
                Some(end) => subject = subject[end + 1..].trim_start().to_string(),
                None => break,
            }
        }
        out.push(subject);
        out.push(String::new());
        &lines[(first_para_end + 1).min(lines.len())..]
    } else {
        &lines
    };
    for l in body {
        if l.trim_end() == "---" {
            break;
        }
        out.push(l.to_string());
    }
    let message = clean_message(&out.join("\n"));
    if message.trim().is_empty() {
        let stem = Path::new(name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("Apply {stem}\n")
    } else {
        message
    }
}

/// Trailing whitespace off every line, blank lines off both ends, runs of blank lines collapsed,
/// one newline at the end (what `git commit` does to a message).
pub(super) fn clean_message(message: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for l in message.lines().map(str::trim_end) {
        if l.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}
