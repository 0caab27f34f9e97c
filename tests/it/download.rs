//! `download` against a real HTTP/1.1 server on 127.0.0.1 that can misbehave on demand.

use rocforge::diag::Hint;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use rocforge::download::{
    self, DownloadError, DownloadOptions, Downloaded, client, client_with, download,
};
use rocforge::progress::{Reporter, Silent, Task};
use sha2::{Digest, Sha256};

const SIZE: usize = 5 * 1024 * 1024;

/// 5 MB of xorshift bytes, generated once.
fn data() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| pseudo_random(SIZE, 0x9E37_79B9_7F4A_7C15))
}

fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// How the server misbehaves. Request indices count from 0 over the server's life.
#[derive(Clone, Default)]
struct Behaviour {
    /// What is served (defaults to `data()`).
    body: Option<Arc<Vec<u8>>>,
    /// Close the connection after this many body bytes on the first `drop_first` requests.
    drop_after: Option<usize>,
    drop_first: usize,
    /// Send this many body bytes on the first request, then go silent for the duration.
    stall: Option<(usize, Duration)>,
    /// Answer 503 to the first this-many requests.
    unavailable_first: usize,
    not_found: bool,
    ignore_range: bool,
}

struct Server {
    url: String,
    state: Arc<State>,
}

struct State {
    behaviour: Behaviour,
    requests: AtomicUsize,
    ranges: Mutex<Vec<Option<String>>>,
    user_agents: Mutex<Vec<Option<String>>>,
}

impl Server {
    fn start(behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            behaviour,
            requests: AtomicUsize::new(0),
            ranges: Mutex::new(Vec::new()),
            user_agents: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        Server {
            url: format!("http://{addr}/rocm/rocBLAS-6.2.4.tar.gz"),
            state,
        }
    }

    fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    fn ranges(&self) -> Vec<Option<String>> {
        self.state.ranges.lock().expect("ranges").clone()
    }
}

fn serve(mut stream: TcpStream, state: &State) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut range = None;
    let mut user_agent = None;
    let mut line = String::new();
    reader.read_line(&mut line)?; // request line
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim().to_string();
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(value),
                "user-agent" => user_agent = Some(value),
                _ => {}
            }
        }
    }
    let n = state.requests.fetch_add(1, Ordering::SeqCst);
    state.ranges.lock().expect("ranges").push(range.clone());
    state
        .user_agents
        .lock()
        .expect("user agents")
        .push(user_agent);

    let b = &state.behaviour;
    let body: &[u8] = b.body.as_deref().map_or(data(), |v| v.as_slice());
    if b.not_found {
        return respond(&mut stream, "404 Not Found", &[], b"not found\n");
    }
    if n < b.unavailable_first {
        return respond(&mut stream, "503 Service Unavailable", &[], b"busy\n");
    }
    let start = range
        .as_deref()
        .filter(|_| !b.ignore_range)
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok());
    let (status, slice, content_range) = match start {
        Some(s) if s >= body.len() => {
            let cr = format!("Content-Range: bytes */{}", body.len());
            return respond(&mut stream, "416 Range Not Satisfiable", &[&cr], b"");
        }
        Some(s) => (
            "206 Partial Content",
            &body[s..],
            Some(format!(
                "Content-Range: bytes {s}-{}/{}",
                body.len() - 1,
                body.len()
            )),
        ),
        None => ("200 OK", body, None),
    };
    let extra: Vec<&str> = content_range.iter().map(String::as_str).collect();
    write_head(&mut stream, status, &extra, slice.len())?;
    if let (Some(k), true) = (b.drop_after, n < b.drop_first) {
        stream.write_all(&slice[..k.min(slice.len())])?;
        stream.flush()?;
        return stream.shutdown(Shutdown::Both);
    }
    if let (Some((k, pause)), 0) = (b.stall, n) {
        stream.write_all(&slice[..k.min(slice.len())])?;
        stream.flush()?;
        thread::sleep(pause);
        return stream.shutdown(Shutdown::Both);
    }
    for chunk in slice.chunks(64 * 1024) {
        stream.write_all(chunk)?;
    }
    stream.flush()
}

fn write_head(
    stream: &mut TcpStream,
    status: &str,
    extra: &[&str],
    len: usize,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n");
    for h in extra {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    extra: &[&str],
    body: &[u8],
) -> std::io::Result<()> {
    write_head(stream, status, extra, body.len())?;
    stream.write_all(body)?;
    stream.flush()
}

/// The progress task's (total, position, finish message).
type Progress = Arc<Mutex<(Option<u64>, u64, Option<String>)>>;

/// Records notes, the progress tasks' labels and the task's total and position.
#[derive(Default, Clone)]
struct Recorder {
    notes: Arc<Mutex<Vec<String>>>,
    labels: Arc<Mutex<Vec<String>>>,
    progress: Progress,
}

struct RecTask(Progress);

impl Task for RecTask {
    fn inc(&self, n: u64) {
        if let Ok(mut p) = self.0.lock() {
            p.1 += n;
        }
    }
    fn set_total(&self, total: u64) {
        if let Ok(mut p) = self.0.lock() {
            p.0 = Some(total);
        }
    }
    fn set_position(&self, pos: u64) {
        if let Ok(mut p) = self.0.lock() {
            p.1 = pos;
        }
    }
    fn finish(&self, message: &str) {
        if let Ok(mut p) = self.0.lock() {
            p.2 = Some(message.to_string());
        }
    }
}

impl Reporter for Recorder {
    fn task(&self, label: &str, total: Option<u64>, bytes: bool) -> Box<dyn Task> {
        assert!(bytes, "a download reports bytes");
        self.labels.lock().expect("labels").push(label.to_string());
        if let Ok(mut p) = self.progress.lock() {
            p.0 = total;
        }
        Box::new(RecTask(self.progress.clone()))
    }
    fn note(&self, message: &str) {
        self.notes.lock().expect("notes").push(message.to_string());
    }
}

impl Recorder {
    fn notes(&self) -> Vec<String> {
        self.notes.lock().expect("notes").clone()
    }
}

fn fast() -> DownloadOptions {
    DownloadOptions {
        backoff: Duration::from_millis(10),
        ..DownloadOptions::default()
    }
}

struct Case {
    _dir: tempfile::TempDir,
    dest: PathBuf,
    part: PathBuf,
}

fn case() -> Case {
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("dl").join("rocBLAS-6.2.4.tar.gz");
    let part = dir.path().join("dl").join("rocBLAS-6.2.4.tar.gz.part");
    Case {
        _dir: dir,
        dest,
        part,
    }
}

fn get(server: &Server, c: &Case, reporter: &dyn Reporter) -> Result<Downloaded, DownloadError> {
    download(
        &client(),
        &server.url,
        &sha(data()),
        &c.dest,
        &fast(),
        reporter,
    )
}

fn assert_verified(c: &Case, got: &Downloaded) {
    assert_eq!(got.path, c.dest);
    assert_eq!(got.bytes, SIZE as u64);
    let on_disk = fs::read(&c.dest).expect("dest exists");
    assert!(
        on_disk == data(),
        "the downloaded file differs from the served one"
    );
    assert!(!c.part.exists(), ".part must be gone after the rename");
}

#[test]
fn clean_download_verifies_and_renames() {
    let server = Server::start(Behaviour::default());
    let c = case();
    let rec = Recorder::default();
    let got = get(&server, &c, &rec).expect("download");
    assert_verified(&c, &got);
    assert_eq!((got.attempts, got.resumed_from), (1, 0));
    assert_eq!(server.ranges(), vec![None]);
    let ua = server.state.user_agents.lock().expect("ua")[0]
        .clone()
        .unwrap_or_default();
    assert!(ua.starts_with("rocforge/"), "user agent {ua:?}");
    let (total, pos, finish) = rec.progress.lock().expect("progress").clone();
    assert_eq!((total, pos), (Some(SIZE as u64), SIZE as u64));
    assert_eq!(finish.as_deref(), Some("verified"));
    assert!(rec.notes().is_empty(), "{:?}", rec.notes());
    // Labelled by the file asked for, not by the cache's digest name for it.
    assert_eq!(
        *rec.labels.lock().expect("labels"),
        ["rocBLAS-6.2.4.tar.gz"]
    );
}

#[test]
fn dropped_connection_resumes_with_range() {
    let k = 1_000_000;
    let server = Server::start(Behaviour {
        drop_after: Some(k),
        drop_first: 1,
        ..Behaviour::default()
    });
    let c = case();
    let rec = Recorder::default();
    let got = get(&server, &c, &rec).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![None, Some(format!("bytes={k}-"))]);
    assert_eq!((got.attempts, got.resumed_from), (2, 0));
    let notes = rec.notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let want = format!("retrying {} in 10ms (attempt 2/6): ", server.url);
    assert!(notes[0].starts_with(&want), "{notes:?}");
    let (total, pos, _) = rec.progress.lock().expect("progress").clone();
    assert_eq!((total, pos), (Some(SIZE as u64), SIZE as u64));
}

#[test]
fn repeated_drops_resume_each_time() {
    let k = 700_000;
    let server = Server::start(Behaviour {
        drop_after: Some(k),
        drop_first: 3,
        ..Behaviour::default()
    });
    let c = case();
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    let want: Vec<_> = [None, Some(k), Some(2 * k), Some(3 * k)]
        .into_iter()
        .map(|o| o.map(|o| format!("bytes={o}-")))
        .collect();
    assert_eq!(server.ranges(), want);
    assert_eq!(got.attempts, 4);
}

#[test]
fn stalled_connection_times_out_and_resumes() {
    let k = 300_000;
    let server = Server::start(Behaviour {
        stall: Some((k, Duration::from_secs(5))),
        ..Behaviour::default()
    });
    let c = case();
    let opts = DownloadOptions {
        timeout: Duration::from_millis(300),
        ..fast()
    };
    let got = download(
        &client_with(&opts),
        &server.url,
        &sha(data()),
        &c.dest,
        &opts,
        &Silent,
    )
    .expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![None, Some(format!("bytes={k}-"))]);
}

#[test]
fn unavailable_then_success_retries() {
    let server = Server::start(Behaviour {
        unavailable_first: 1,
        ..Behaviour::default()
    });
    let c = case();
    let rec = Recorder::default();
    let got = get(&server, &c, &rec).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.requests(), 2);
    let notes = rec.notes();
    assert!(
        notes.len() == 1 && notes[0].contains("(attempt 2/6): HTTP 503"),
        "{notes:?}"
    );
}

#[test]
fn persistent_unavailable_gives_up_after_the_retries() {
    let server = Server::start(Behaviour {
        unavailable_first: 100,
        ..Behaviour::default()
    });
    let c = case();
    let opts = DownloadOptions {
        retries: 2,
        ..fast()
    };
    let err = download(
        &client(),
        &server.url,
        &sha(data()),
        &c.dest,
        &opts,
        &Silent,
    )
    .expect_err("must fail");
    assert_eq!(server.requests(), 3);
    match &err {
        DownloadError::Http {
            url,
            status: 503,
            attempts: 3,
        } => assert_eq!(url, &server.url),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.hint().contains("[mirrors]"), "{}", err.hint());
    assert!(!c.dest.exists() && !c.part.exists());
}

#[test]
fn not_found_fails_at_once() {
    let server = Server::start(Behaviour {
        not_found: true,
        ..Behaviour::default()
    });
    let c = case();
    let rec = Recorder::default();
    let err = get(&server, &c, &rec).expect_err("must fail");
    assert_eq!(server.requests(), 1);
    assert!(
        matches!(
            &err,
            DownloadError::Http {
                status: 404,
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains(&server.url), "{err}");
    assert!(err.hint().contains("[mirrors]"), "{}", err.hint());
    assert!(rec.notes().is_empty(), "no retry on 404: {:?}", rec.notes());
    assert!(!c.dest.exists() && !c.part.exists());
}

#[test]
fn wrong_checksum_fails_and_leaves_nothing() {
    let other = Arc::new(pseudo_random(SIZE, 42));
    let server = Server::start(Behaviour {
        body: Some(other.clone()),
        ..Behaviour::default()
    });
    let c = case();
    let err = get(&server, &c, &Silent).expect_err("must fail");
    match &err {
        DownloadError::Checksum {
            url,
            expected,
            actual,
        } => {
            assert_eq!(url, &server.url);
            assert_eq!(expected, &sha(data()));
            assert_eq!(actual, &sha(&other));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains(&sha(data())) && err.to_string().contains(&sha(&other)));
    assert!(err.hint().contains("partial file was deleted"));
    assert_eq!(server.requests(), 1);
    assert!(!c.dest.exists(), "dest must not exist");
    assert!(!c.part.exists(), ".part must be deleted");
}

#[test]
fn part_from_a_killed_run_is_resumed() {
    let k = 2_000_000;
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.part.parent().expect("parent")).expect("mkdir");
    fs::write(&c.part, &data()[..k]).expect("write part");
    let rec = Recorder::default();
    let got = get(&server, &c, &rec).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![Some(format!("bytes={k}-"))]);
    assert_eq!((got.attempts, got.resumed_from), (1, k as u64));
    let (total, pos, _) = rec.progress.lock().expect("progress").clone();
    assert_eq!((total, pos), (Some(SIZE as u64), SIZE as u64));
}

#[test]
fn server_ignoring_range_still_yields_the_right_file() {
    let server = Server::start(Behaviour {
        ignore_range: true,
        ..Behaviour::default()
    });
    let c = case();
    fs::create_dir_all(c.part.parent().expect("parent")).expect("mkdir");
    fs::write(&c.part, &data()[..1_234_567]).expect("write part");
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![Some("bytes=1234567-".to_string())]);
    assert_eq!((got.attempts, got.resumed_from), (1, 0));
}

#[test]
fn server_ignoring_range_after_a_drop_restarts_from_zero() {
    let server = Server::start(Behaviour {
        ignore_range: true,
        drop_after: Some(999_999),
        drop_first: 1,
        ..Behaviour::default()
    });
    let c = case();
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.requests(), 2);
}

#[test]
fn stale_part_is_discarded_once_the_digest_fails() {
    // An earlier run fetched a different file (upstream changed): the resumed result does not
    // verify, so the whole file is fetched once more.
    let k = 1_000_000;
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.part.parent().expect("parent")).expect("mkdir");
    fs::write(&c.part, pseudo_random(k, 7)).expect("write part");
    let rec = Recorder::default();
    let got = get(&server, &c, &rec).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![Some(format!("bytes={k}-")), None]);
    assert_eq!((got.attempts, got.resumed_from), (2, 0));
    assert!(
        rec.notes().iter().any(|n| n.contains("from the start")),
        "{:?}",
        rec.notes()
    );
}

#[test]
fn complete_part_gets_416_and_is_verified_without_a_body() {
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.part.parent().expect("parent")).expect("mkdir");
    fs::write(&c.part, data()).expect("write part");
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![Some(format!("bytes={SIZE}-"))]);
    assert_eq!(got.resumed_from, SIZE as u64);
}

#[test]
fn complete_but_corrupt_part_restarts_once() {
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.part.parent().expect("parent")).expect("mkdir");
    let mut corrupt = data().to_vec();
    corrupt[SIZE / 2] ^= 0xff;
    fs::write(&c.part, &corrupt).expect("write part");
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.ranges(), vec![Some(format!("bytes={SIZE}-")), None]);
    assert_eq!(got.resumed_from, 0);
}

#[test]
fn file_urls_are_copied_and_verified() {
    let c = case();
    let mirror = tempfile::tempdir().expect("tempdir");
    let src = mirror.path().join("rocBLAS-6.2.4.tar.gz");
    fs::write(&src, data()).expect("write mirror file");
    let url = file_url(&src);
    let got = download(&client(), &url, &sha(data()), &c.dest, &fast(), &Silent).expect("copy");
    assert_verified(&c, &got);
    assert_eq!(got.attempts, 0);

    // Same checksum rules: a wrong digest fails and leaves nothing.
    let c2 = case();
    let wrong = "0".repeat(64);
    let err = download(&client(), &url, &wrong, &c2.dest, &fast(), &Silent).expect_err("mismatch");
    assert!(matches!(&err, DownloadError::Checksum { actual, .. } if actual == &sha(data())));
    assert!(!c2.dest.exists() && !c2.part.exists());

    // A missing mirror file names the path.
    let missing = file_url(&mirror.path().join("nope.tar.gz"));
    let err = download(
        &client(),
        &missing,
        &sha(data()),
        &c2.dest,
        &fast(),
        &Silent,
    )
    .expect_err("missing");
    assert!(matches!(&err, DownloadError::Io { path, .. } if path.ends_with("nope.tar.gz")));
    assert!(err.to_string().contains(&missing), "{err}");
    assert!(!c2.part.exists());
}

fn file_url(path: &Path) -> String {
    reqwest::Url::from_file_path(path)
        .expect("absolute path")
        .to_string()
}

#[test]
fn present_dest_makes_no_request() {
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.dest.parent().expect("parent")).expect("mkdir");
    fs::write(&c.dest, data()).expect("write dest");
    let got = get(&server, &c, &Silent).expect("cache hit");
    assert_verified(&c, &got);
    assert_eq!(got.attempts, 0);
    assert_eq!(server.requests(), 0);
}

#[test]
fn present_dest_with_wrong_bytes_is_downloaded_again() {
    let server = Server::start(Behaviour::default());
    let c = case();
    fs::create_dir_all(c.dest.parent().expect("parent")).expect("mkdir");
    fs::write(&c.dest, b"truncated").expect("write dest");
    let got = get(&server, &c, &Silent).expect("download");
    assert_verified(&c, &got);
    assert_eq!(server.requests(), 1);
}

/// The first error offline: one request, no retry notes, the URL, the cause and the mirror.
fn fails_at_once(url: &str) -> (DownloadError, String) {
    let c = case();
    let rec = Recorder::default();
    let err = download(&client(), url, &sha(data()), &c.dest, &fast(), &rec).expect_err("fails");
    match &err {
        DownloadError::Transport {
            url: u, attempts, ..
        } => {
            assert_eq!(u, url);
            assert_eq!(*attempts, 1, "{err}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(rec.notes().is_empty(), "retried: {:?}", rec.notes());
    assert!(!c.part.exists());
    let hint = err.hint();
    assert!(hint.contains("not retried"), "{hint}");
    assert!(
        hint.contains("rocforge.toml") && hint.contains("~/.config/rocforge/config.toml"),
        "{hint}"
    );
    (err, hint)
}

#[test]
fn a_refused_connection_fails_at_once_with_a_mirror_hint() {
    // A port that was just free: connections are refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}/rocm/x.tar.gz");
    let (err, hint) = fails_at_once(&url);
    assert!(
        err.to_string().starts_with(&format!(
            "cannot download {url}: 127.0.0.1:{port} refused the connection ("
        )),
        "{err}"
    );
    assert!(
        hint.contains(&format!(
            "[mirrors] \"http://127.0.0.1:{port}/\" = \"file:///srv/mirror/\""
        )),
        "{hint}"
    );
}

#[test]
fn a_name_that_does_not_resolve_fails_at_once_with_a_mirror_hint() {
    let url = "http://rocforge-test.invalid/x.tar.gz";
    let (err, hint) = fails_at_once(url);
    assert!(
        err.to_string().starts_with(
            "cannot download http://rocforge-test.invalid/x.tar.gz: the host name rocforge-test.invalid does not resolve (DNS failure) ("
        ),
        "{err}"
    );
    assert!(
        hint.contains("[mirrors] \"http://rocforge-test.invalid/\" = \"file:///srv/mirror/\""),
        "{hint}"
    );
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let c = case();
    let good = sha(data());
    let cases: [(&str, &str, &Path); 6] = [
        ("http://127.0.0.1:1/x", "not-a-digest", &c.dest),
        ("http://127.0.0.1:1/x", &good[..63], &c.dest),
        ("not a url", &good, &c.dest),
        ("ftp://example.com/x.tar.gz", &good, &c.dest),
        ("file://remote-host/x.tar.gz", &good, &c.dest),
        ("http://127.0.0.1:1/x", &good, Path::new("/")),
    ];
    for (url, digest, dest) in cases {
        let err =
            download(&client(), url, digest, dest, &fast(), &Silent).expect_err("must be rejected");
        assert_eq!(err.url(), url);
        assert!(!err.hint().is_empty());
    }
    assert!(!c.dest.exists() && !c.part.exists());
}

#[test]
fn options_have_the_documented_defaults() {
    let d = DownloadOptions::default();
    assert_eq!(d.retries, 5);
    assert_eq!(d.backoff, Duration::from_millis(500));
    assert_eq!(d.timeout, Duration::from_secs(60));
    assert_eq!(download::MAX_BACKOFF, Duration::from_secs(30));
}
