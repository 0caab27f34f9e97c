//! The one HTTP client, and why a server could not be reached (which mirror setting would
//! avoid it).
//!
//! Every client rocforge makes comes from [`client`]: rocforge's user agent, the timeouts the
//! caller asks for, proxies from the environment (`HTTPS_PROXY`, `NO_PROXY`…, reqwest's
//! default), optionally redirects confined to the hosts an install may use. It is reqwest's
//! blocking client on purpose: rocforge is a blocking program, and the async client would bring
//! a tokio runtime into it. Retrying is the caller's: a download resumes and retries by
//! [`Cause`] and status (source/download.rs); requests to an API are not repeated blindly.
//!
//! Offline, the first error is what a user reads: it must name the cause (a name that does not
//! resolve, a refused connection, a TLS failure) rather than the HTTP client's chain of
//! wrappers, and say where a mirror is configured. The cause also decides whether another
//! attempt can help: none of a name that does not resolve, a port nobody listens on, or a
//! certificate that does not verify changes within the seconds of a retry.

use std::fmt;

/// What went wrong on the way to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The host name does not resolve (no DNS, no network, or a typo).
    Dns,
    /// Nothing listens on the port (or a firewall rejects the connection).
    Refused,
    /// The TLS handshake or the certificate check failed.
    Tls,
    /// The server did not answer in time.
    Timeout,
    /// Anything else (a connection lost midway, a protocol error).
    Other,
}

impl Cause {
    /// The cause an error chain (reqwest's, or an `io::Error`) tells.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Cause {
        let mut text = String::new();
        let mut cur = Some(e);
        while let Some(err) = cur {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                match io.kind() {
                    std::io::ErrorKind::ConnectionRefused => return Cause::Refused,
                    std::io::ErrorKind::TimedOut => return Cause::Timeout,
                    _ => {}
                }
            }
            text.push_str(&err.to_string());
            text.push('\n');
            cur = err.source();
        }
        Cause::of_text(&text)
    }

    /// The cause a message tells (git's and libgit2's are text only). The message must not
    /// carry the URL: a host named `ssl.example.org` says nothing of TLS.
    pub fn of_text(message: &str) -> Cause {
        let m = message.to_ascii_lowercase();
        let any = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
        if any(&[
            "dns error",
            "failed to lookup address",
            "name or service not known",
            "temporary failure in name resolution",
            "could not resolve host",
            "failed to resolve address",
            "no address associated with hostname",
            "nodename nor servname",
        ]) {
            Cause::Dns
        } else if any(&["connection refused", "os error 111"]) {
            Cause::Refused
        } else if any(&[
            "certificate",
            "tls handshake",
            "tls error",
            "tls connect",
            "ssl routines",
            "ssl error",
            "ssl connect",
            "ssl_",
            "handshake failure",
            "handshake failed",
        ]) {
            Cause::Tls
        } else if any(&["timed out", "timeout"]) {
            Cause::Timeout
        } else {
            Cause::Other
        }
    }

    /// Whether an immediate retry is pointless: the answer will be the same.
    pub fn permanent(self) -> bool {
        matches!(self, Cause::Dns | Cause::Refused | Cause::Tls)
    }

    /// The cause in words, about `url`'s host.
    pub fn explain(self, url: &str) -> String {
        let host = host_of(url);
        match self {
            Cause::Dns => format!("the host name {host} does not resolve (DNS failure)"),
            Cause::Refused => format!("{host} refused the connection"),
            Cause::Tls => format!("the TLS connection to {host} failed"),
            Cause::Timeout => format!("{host} did not answer in time"),
            Cause::Other => format!("the connection to {host} failed"),
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::Dns => "DNS failure",
            Cause::Refused => "connection refused",
            Cause::Tls => "TLS failure",
            Cause::Timeout => "timeout",
            Cause::Other => "connection failure",
        })
    }
}

/// `host` or `host:port` of a URL (or the URL itself when it has no host).
fn host_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some() => {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// The `[mirrors]` entry that would send `url` elsewhere, and the two files it may go in.
pub fn mirror_hint(url: &str) -> String {
    let prefix = match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some() => format!("{}://{}/", u.scheme(), host_of(url)),
        _ => "https://host/prefix/".into(),
    };
    format!(
        "map this URL to a mirror in rocforge.toml (beside the catalog) or ~/.config/rocforge/config.toml: [mirrors] \"{prefix}\" = \"file:///srv/mirror/\""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_read_from_messages() {
        for (text, cause) in [
            (
                "client error (Connect): dns error: failed to lookup address information: Name or service not known",
                Cause::Dns,
            ),
            ("Temporary failure in name resolution", Cause::Dns),
            (
                "fatal: unable to access 'https://x.invalid/r.git/': Could not resolve host: x.invalid",
                Cause::Dns,
            ),
            (
                "failed to resolve address for x.invalid: Name or service not known; class=Net (12)",
                Cause::Dns,
            ),
            (
                "tcp connect error: Connection refused (os error 111)",
                Cause::Refused,
            ),
            ("the SSL certificate is invalid", Cause::Tls),
            (
                "error:0A000086:SSL routines::certificate verify failed",
                Cause::Tls,
            ),
            ("connection reset by peer (ssl.example.org)", Cause::Other),
            ("operation timed out", Cause::Timeout),
            ("connection reset by peer", Cause::Other),
        ] {
            assert_eq!(Cause::of_text(text), cause, "{text}");
        }
    }

    #[test]
    fn io_kinds_decide_before_text() {
        let e = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "no");
        assert_eq!(Cause::of(&e), Cause::Refused);
        assert!(Cause::Refused.permanent() && !Cause::Timeout.permanent());
    }

    #[test]
    fn the_hint_names_the_prefix_and_both_files() {
        let h = mirror_hint("http://rocforge-test.invalid/x.tar.gz");
        assert!(
            h.contains("[mirrors] \"http://rocforge-test.invalid/\" = "),
            "{h}"
        );
        assert!(h.contains("rocforge.toml") && h.contains("~/.config/rocforge/config.toml"));
        assert_eq!(
            Cause::Dns.explain("http://rocforge-test.invalid/x.tar.gz"),
            "the host name rocforge-test.invalid does not resolve (DNS failure)"
        );
    }
}

/// rocforge's `User-Agent`.
pub const USER_AGENT: &str = concat!("rocforge/", env!("CARGO_PKG_VERSION"));

/// How long a client waits, and where it follows redirects.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// For the connection; None: as long as the system allows.
    pub connect: Option<std::time::Duration>,
    /// For the response head and then between reads of the body (an idle limit: a long transfer
    /// that makes progress is never cut off); None: no limit (image layers of gigabytes).
    pub idle: Option<std::time::Duration>,
    pub redirects: Redirects,
}

impl Default for HttpOptions {
    /// 30 s idle: reqwest's blocking default, which every client without its own always had.
    fn default() -> HttpOptions {
        HttpOptions {
            connect: None,
            idle: Some(std::time::Duration::from_secs(30)),
            redirects: Redirects::Any,
        }
    }
}

impl HttpOptions {
    /// Connecting and idle limits of `timeout` each.
    pub fn timeout(timeout: std::time::Duration) -> HttpOptions {
        HttpOptions {
            connect: Some(timeout),
            idle: Some(timeout),
            ..HttpOptions::default()
        }
    }
}

#[derive(Debug, Clone)]
pub enum Redirects {
    /// Up to 10, anywhere (reqwest's default).
    Any,
    /// Only to `start`'s scheme, host and port or to one of `hosts` (`host` or `host:port`, as
    /// `install --allow-host` takes them): the rule for the URLs an index names, so a redirect
    /// cannot take a download where the index could not.
    Confined {
        start: reqwest::Url,
        hosts: Vec<String>,
    },
    /// Only to `start`'s scheme, host and port: a registry pushed to, whose answers must come
    /// from itself.
    SameOrigin { start: reqwest::Url },
}

/// The client for `opts`. Fails only when the TLS backend cannot start.
pub fn try_client(opts: &HttpOptions) -> Result<reqwest::blocking::Client, reqwest::Error> {
    let mut b = reqwest::blocking::Client::builder()
        .user_agent(USER_AGENT)
        .timeout(opts.idle);
    if let Some(c) = opts.connect {
        b = b.connect_timeout(c);
    }
    match &opts.redirects {
        Redirects::Any => {}
        Redirects::Confined { start, hosts } => {
            b = b.redirect(confined(
                start,
                hosts.clone(),
                "another host than the index's (pass --allow-host to accept it)",
            ));
        }
        Redirects::SameOrigin { start } => {
            b = b.redirect(confined(start, Vec::new(), REDIRECTED_AWAY));
        }
    }
    b.build()
}

/// [`try_client`], for callers with no error to report: when the TLS backend cannot start, a
/// plain client, whose requests then fail with that reason.
pub fn client(opts: &HttpOptions) -> reqwest::blocking::Client {
    try_client(opts).unwrap_or_else(|_| reqwest::blocking::Client::new())
}

/// What a refused [`Redirects::SameOrigin`] redirect says, after "redirected to URL, ".
pub const REDIRECTED_AWAY: &str = "another host than the registry's";

fn confined(
    start: &reqwest::Url,
    hosts: Vec<String>,
    elsewhere: &'static str,
) -> reqwest::redirect::Policy {
    let origin = |u: &reqwest::Url| {
        (
            u.scheme().to_string(),
            u.host_str().map(str::to_string),
            u.port_or_known_default(),
        )
    };
    let home = origin(start);
    reqwest::redirect::Policy::custom(move |attempt| {
        let u = attempt.url();
        let allowed = origin(u) == home
            || u.host_str().is_some_and(|h| {
                hosts.iter().any(|a| {
                    a == h
                        || u.port_or_known_default()
                            .is_some_and(|p| *a == format!("{h}:{p}"))
                })
            });
        if attempt.previous().len() >= 10 {
            attempt.error("more than 10 redirects")
        } else if allowed {
            attempt.follow()
        } else {
            let to = crate::redact::url(u.as_str());
            attempt.error(format!("redirected to {to}, {elsewhere}"))
        }
    })
}
