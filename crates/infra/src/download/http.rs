//! Downloads over HTTP: attempts retried with backoff, each resuming with `Range` from the
//! bytes already in the part file, within the deadline of the whole download.

use std::io::{self, Read};
use std::thread;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT_ENCODING, CONTENT_RANGE, RANGE, RETRY_AFTER};

use super::part::Part;
use super::{DownloadError, DownloadOptions, MAX_BACKOFF, Want, redact_url};
use crate::net::Cause;
use crate::progress::{Reporter, Task};

/// How often a wait before a retry looks for Ctrl-C.
const POLL: Duration = Duration::from_millis(100);

const HTTP_CHUNK: usize = 256 * 1024;

/// Why one attempt did not produce a complete body.
enum Failure {
    /// Worth another attempt: it resumes from the bytes already written.
    Transient {
        reason: String,
        status: Option<u16>,
        retry_after: Option<Duration>,
    },
    Fatal(DownloadError),
    /// [`DownloadOptions::deadline`] passed.
    Late,
}

/// How one attempt ended.
enum Step {
    /// The body is complete in the part file.
    Complete,
    /// 416 to our `Range`: the part file is as long as the resource (or longer).
    RangeNotSatisfiable,
}

/// Runs the attempts until the part file holds the verified body; returns the requests made.
pub(super) fn http_download(
    client: &Client,
    url: &str,
    want: Want<'_>,
    part: &mut Part,
    opts: &DownloadOptions,
    reporter: &dyn Reporter,
    task: &dyn Task,
) -> Result<u32, DownloadError> {
    let max_attempts = opts.retries.saturating_add(1);
    let deadline = Instant::now() + opts.deadline;
    let late = || DownloadError::Deadline {
        url: redact_url(url),
        limit: opts.deadline,
    };
    let mut requests = 0u32;
    let mut failures = 0u32;
    // Whether we already started over from zero after a bad resumed file.
    let mut restarted = false;
    loop {
        requests = requests.saturating_add(1);
        if Instant::now() >= deadline {
            return Err(late());
        }
        let (reason, status, retry_after) = match attempt(client, url, part, task, deadline) {
            Ok(step) => {
                if part.matches(want) {
                    return Ok(requests);
                }
                // 416 means the part file is already as long as the resource; a mismatch then,
                // or after stitching responses together, may come from a stale prefix (changed
                // upstream since the earlier run) or a damaged one (a crash before the data
                // reached the disk): fetch the whole file once more before giving up.
                let retry_whole = matches!(step, Step::RangeNotSatisfiable) || part.stitched;
                if retry_whole && !restarted {
                    restarted = true;
                    reporter.note(&format!(
                        "{} did not verify after resuming; downloading {} again from the start",
                        part.path.display(),
                        redact_url(url)
                    ));
                    part.reset().map_err(|e| part.io_err(url, e))?;
                    task.set_position(0);
                    continue;
                }
                part.check(url, want)?;
                return Ok(requests);
            }
            Err(Failure::Late) => return Err(late()),
            Err(Failure::Fatal(mut e)) => {
                if let DownloadError::Http { attempts, .. }
                | DownloadError::Transport { attempts, .. } = &mut e
                {
                    *attempts = requests;
                }
                return Err(e);
            }
            Err(Failure::Transient {
                reason,
                status,
                retry_after,
            }) => (reason, status, retry_after),
        };
        failures = failures.saturating_add(1);
        if failures >= max_attempts {
            return Err(match status {
                Some(status) => DownloadError::Http {
                    url: redact_url(url),
                    status,
                    attempts: requests,
                },
                None => DownloadError::Transport {
                    url: redact_url(url),
                    cause: Cause::of_text(&reason),
                    message: reason,
                    attempts: requests,
                },
            });
        }
        let delay = backoff_delay(opts.backoff, failures, retry_after)
            .min(deadline.saturating_duration_since(Instant::now()));
        reporter.note(&format!(
            "retrying {} in {} (attempt {}/{max_attempts}): {reason}",
            redact_url(url),
            format_delay(delay),
            failures + 1,
        ));
        let until = Instant::now() + delay;
        while Instant::now() < until {
            if crate::interrupt::requested() {
                return Err(DownloadError::Interrupted {
                    url: redact_url(url),
                });
            }
            thread::sleep(until.saturating_duration_since(Instant::now()).min(POLL));
        }
    }
}

/// One request: streams the body into the part file, resuming from its length.
fn attempt(
    client: &Client,
    url: &str,
    part: &mut Part,
    task: &dyn Task,
    deadline: Instant,
) -> Result<Step, Failure> {
    let offset = part.len;
    let mut response = send(client, url, offset)?;
    if let Some(step) = accept_status(&response, url, part, task, offset)? {
        return Ok(step);
    }
    receive(&mut response, url, part, task, deadline)?;
    Ok(Step::Complete)
}

/// The request, asking for the bytes from `offset` on when there are some already.
fn send(client: &Client, url: &str, offset: u64) -> Result<Response, Failure> {
    let mut request = client.get(url).header(ACCEPT_ENCODING, "identity");
    if offset > 0 {
        request = request.header(RANGE, format!("bytes={offset}-"));
    }
    request.send().map_err(|e| {
        // Without the URL, whose host name could read as a cause ("ssl.example.org").
        let e = e.without_url();
        let cause = Cause::of(&e);
        if e.is_redirect() || cause.permanent() {
            // A refused redirect, a name that does not resolve, a closed port or a bad
            // certificate fail the same way every time: retrying only delays the error.
            Failure::Fatal(DownloadError::Transport {
                url: redact_url(url),
                cause,
                message: describe(&e),
                attempts: 1,
            })
        } else {
            Failure::Transient {
                reason: describe(&e),
                status: None,
                retry_after: None,
            }
        }
    })
}

/// Whether the response's status lets its body be appended to the part file (`None`), or ends
/// the attempt: the resource is no longer than the part file already is, or the status is an
/// error. A response that ignores or misreads our range empties the part file first.
fn accept_status(
    response: &Response,
    url: &str,
    part: &mut Part,
    task: &dyn Task,
    offset: u64,
) -> Result<Option<Step>, Failure> {
    let status = response.status();
    let fatal_io = |part: &Part, e| Failure::Fatal(part.io_err(url, e));
    match status {
        StatusCode::PARTIAL_CONTENT => {
            let start = response
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(content_range_start);
            if start != Some(offset) {
                // Not the range we asked for: start over cleanly on the next attempt.
                let got = response
                    .headers()
                    .get(CONTENT_RANGE)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_else(|| "no Content-Range".into());
                part.reset().map_err(|e| fatal_io(part, e))?;
                task.set_position(0);
                return Err(Failure::Transient {
                    reason: format!("asked for bytes {offset}- but the server sent {got:?}"),
                    status: None,
                    retry_after: None,
                });
            }
            if offset > 0 {
                part.stitched = true;
            }
        }
        StatusCode::OK => {
            if offset > 0 {
                // The server ignores ranges: the body is the whole file.
                tracing::debug!(url, "server ignored Range; restarting from zero");
                part.reset().map_err(|e| fatal_io(part, e))?;
            }
        }
        StatusCode::RANGE_NOT_SATISFIABLE if offset > 0 => {
            return Ok(Some(Step::RangeNotSatisfiable));
        }
        _ if is_transient_status(status.as_u16()) => {
            return Err(Failure::Transient {
                reason: format!("HTTP {status}"),
                status: Some(status.as_u16()),
                retry_after: retry_after(response),
            });
        }
        _ => {
            return Err(Failure::Fatal(DownloadError::Http {
                url: redact_url(url),
                status: status.as_u16(),
                attempts: 1,
            }));
        }
    }
    Ok(None)
}

/// The body appended to the part file, refused at once when its length would pass the limit.
fn receive(
    response: &mut Response,
    url: &str,
    part: &mut Part,
    task: &dyn Task,
    deadline: Instant,
) -> Result<(), Failure> {
    let fatal_io = |part: &Part, e| Failure::Fatal(part.io_err(url, e));
    let remaining = response.content_length();
    if let (Some(n), Some(limit)) = (remaining, part.limit)
        && part.len.saturating_add(n) > limit
    {
        return Err(Failure::Fatal(DownloadError::TooLarge {
            url: redact_url(url),
            limit,
        }));
    }
    if let Some(n) = remaining {
        task.set_total(part.len.saturating_add(n));
    }
    task.set_position(part.len);
    stream_body(response, part, task, remaining, deadline).map_err(|e| match e {
        BodyError::Late => Failure::Late,
        BodyError::Interrupted => Failure::Fatal(DownloadError::Interrupted {
            url: redact_url(url),
        }),
        BodyError::Read(e, received) => Failure::Transient {
            reason: format!(
                "connection lost after {received} bytes: {}",
                describe_io(&e)
            ),
            status: None,
            retry_after: None,
        },
        BodyError::Short(received, expected) => Failure::Transient {
            reason: format!("body ended after {received} of {expected} bytes"),
            status: None,
            retry_after: None,
        },
        BodyError::Write(e) => fatal_io(part, e),
    })
}

enum BodyError {
    Late,
    Interrupted,
    Read(io::Error, u64),
    Short(u64, u64),
    Write(io::Error),
}

fn stream_body(
    response: &mut Response,
    part: &mut Part,
    task: &dyn Task,
    expected: Option<u64>,
    deadline: Instant,
) -> Result<(), BodyError> {
    let mut buf = vec![0u8; HTTP_CHUNK];
    let mut received = 0u64;
    loop {
        if Instant::now() >= deadline {
            return Err(BodyError::Late);
        }
        // A source tarball can take minutes: Ctrl-C must not wait for its end.
        if crate::interrupt::requested() {
            return Err(BodyError::Interrupted);
        }
        let n = match response.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BodyError::Read(e, received)),
        };
        part.write(&buf[..n]).map_err(BodyError::Write)?;
        received += n as u64;
        task.inc(n as u64);
    }
    match expected {
        Some(expected) if received < expected => Err(BodyError::Short(received, expected)),
        _ => Ok(()),
    }
}

pub(super) fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// The first byte position of `Content-Range: bytes START-END/TOTAL`.
fn content_range_start(value: &str) -> Option<u64> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (start, _) = rest.split_once('-')?;
    start.trim().parse().ok()
}

/// `Retry-After` in seconds (the HTTP-date form is ignored).
fn retry_after(response: &Response) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs.min(MAX_BACKOFF.as_secs())))
}

/// `backoff * 2^(failures-1)`, at least `retry_after`, at most [`MAX_BACKOFF`].
fn backoff_delay(backoff: Duration, failures: u32, retry_after: Option<Duration>) -> Duration {
    let factor = 1u32
        .checked_shl(failures.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let delay = backoff
        .checked_mul(factor)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    retry_after.map_or(delay, |r| delay.max(r)).min(MAX_BACKOFF)
}

pub(super) fn format_delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// An error and its causes on one line ("error sending request: connection refused").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

fn describe_io(e: &io::Error) -> String {
    match e.get_ref() {
        Some(inner) => describe(inner),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_is_parsed() {
        assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(content_range_start("bytes */200"), None);
        assert_eq!(content_range_start("items 1-2/3"), None);
        assert_eq!(content_range_start(""), None);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(500);
        assert_eq!(backoff_delay(b, 1, None), Duration::from_millis(500));
        assert_eq!(backoff_delay(b, 2, None), Duration::from_secs(1));
        assert_eq!(backoff_delay(b, 3, None), Duration::from_secs(2));
        assert_eq!(backoff_delay(b, 40, None), MAX_BACKOFF);
        assert_eq!(backoff_delay(Duration::MAX, 2, None), MAX_BACKOFF);
        assert_eq!(
            backoff_delay(b, 1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(format_delay(Duration::from_secs(1)), "1.0s");
        assert_eq!(format_delay(Duration::from_millis(10)), "10ms");
    }
}
