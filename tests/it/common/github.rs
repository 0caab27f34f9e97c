//! A GitHub-like server on 127.0.0.1: the release endpoints `rocforge publish` uses (every
//! request recorded for the test to assert), and the `browser_download_url` downloads a user's
//! `rocforge install` makes from a published release, served from the uploaded bytes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub target: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

pub struct Asset {
    pub id: u64,
    pub name: String,
    /// What the listing reports: a test lowers it to stand for an interrupted upload.
    pub size: u64,
    pub bytes: Vec<u8>,
}

#[derive(Default)]
pub struct GhState {
    pub release: bool,
    pub assets: Vec<Asset>,
    pub next_id: u64,
    pub requests: Vec<Req>,
    /// Answer every request with 401 (a revoked token).
    pub refuse: bool,
    /// The `digest` GitHub gives a finished asset, by name (none: an older server).
    pub digests: BTreeMap<String, String>,
}

pub struct FakeGitHub {
    pub port: u16,
    pub state: Arc<Mutex<GhState>>,
}

/// The one release the server knows: OWNER/REPO@TAG.
#[derive(Clone)]
struct Slug {
    owner: String,
    repo: String,
    tag: String,
}

impl FakeGitHub {
    /// The release o/r@v1.
    pub fn start() -> FakeGitHub {
        FakeGitHub::start_release("o", "r", "v1")
    }

    pub fn start_release(owner: &str, repo: &str, tag: &str) -> FakeGitHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(GhState {
            next_id: 100,
            ..Default::default()
        }));
        let slug = Slug {
            owner: owner.into(),
            repo: repo.into(),
            tag: tag.into(),
        };
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let st = st.clone();
                let slug = slug.clone();
                std::thread::spawn(move || serve(conn, port, &slug, &st));
            }
        });
        FakeGitHub { port, state }
    }

    /// `http://127.0.0.1:PORT`: stands for both https://api.github.com and https://github.com.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn take(&self) -> Vec<Req> {
        std::mem::take(&mut self.state.lock().unwrap().requests)
    }
}

enum Body {
    Json(serde_json::Value),
    Bytes(Vec<u8>),
}

fn serve(conn: TcpStream, port: u16, slug: &Slug, st: &Mutex<GhState>) {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut w = conn;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().to_string(),
        );
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
        }
        let len: usize = headers
            .get("content-length")
            .map_or(0, |l| l.parse().unwrap());
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        let req = Req {
            method,
            target,
            headers,
            body,
        };
        let (status, body) = answer(&req, port, slug, st);
        st.lock().unwrap().requests.push(req);
        let reason = match status {
            200 => "OK",
            201 => "Created",
            204 => "No Content",
            401 => "Unauthorized",
            _ => "Not Found",
        };
        let (kind, bytes) = match body {
            Body::Json(j) => ("application/json", j.to_string().into_bytes()),
            Body::Bytes(b) => ("application/octet-stream", b),
        };
        let mut resp = if status == 204 {
            format!("HTTP/1.1 204 {reason}\r\n\r\n").into_bytes()
        } else {
            format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            )
            .into_bytes()
        };
        if status != 204 {
            resp.extend_from_slice(&bytes);
        }
        if w.write_all(&resp).is_err() {
            return;
        }
    }
}

fn release_json(port: u16, slug: &Slug) -> serde_json::Value {
    serde_json::json!({
        "id": 7,
        "tag_name": slug.tag,
        "upload_url": format!("http://127.0.0.1:{port}/uploads/repos/{}/{}/releases/7/assets{{?name,label}}", slug.owner, slug.repo),
    })
}

fn not_found() -> (u16, Body) {
    (404, Body::Json(serde_json::json!({"message": "Not Found"})))
}

fn answer(req: &Req, port: u16, slug: &Slug, st: &Mutex<GhState>) -> (u16, Body) {
    let mut s = st.lock().unwrap();
    let t = req.target.as_str();
    // Downloads are public: a revoked token does not stop them.
    let download = format!(
        "/{}/{}/releases/download/{}/",
        slug.owner, slug.repo, slug.tag
    );
    if req.method == "GET"
        && let Some(name) = t.strip_prefix(&download)
    {
        return match s.assets.iter().find(|a| a.name == name) {
            Some(a) => (200, Body::Bytes(a.bytes.clone())),
            None => not_found(),
        };
    }
    if s.refuse {
        return (
            401,
            Body::Json(serde_json::json!({"message": "Bad credentials", "status": "401"})),
        );
    }
    let repo = format!("/repos/{}/{}", slug.owner, slug.repo);
    let json = |status, j| (status, Body::Json(j));
    match req.method.as_str() {
        "GET" if t == format!("{repo}/releases/tags/{}", slug.tag) => {
            if s.release {
                json(200, release_json(port, slug))
            } else {
                not_found()
            }
        }
        "POST" if t == format!("{repo}/releases") => {
            s.release = true;
            json(201, release_json(port, slug))
        }
        "GET" if t.starts_with(&format!("{repo}/releases/7/assets?")) => {
            let list: Vec<_> = s
                .assets
                .iter()
                .map(|a| {
                    let url = format!("http://127.0.0.1:{port}{download}{}", a.name);
                    let mut j = serde_json::json!({"id": a.id, "name": a.name, "size": a.size, "browser_download_url": url});
                    if let Some(d) = s.digests.get(&a.name) {
                        j["state"] = "uploaded".into();
                        j["digest"] = d.clone().into();
                    }
                    j
                })
                .collect();
            json(200, serde_json::Value::Array(list))
        }
        "POST" if t.starts_with(&format!("/uploads{repo}/releases/7/assets?name=")) => {
            let name = t.split_once("?name=").unwrap().1.to_string();
            let id = s.next_id;
            s.next_id += 1;
            let size = req.body.len() as u64;
            s.assets.push(Asset {
                id,
                name: name.clone(),
                size,
                bytes: req.body.clone(),
            });
            let url = format!("http://127.0.0.1:{port}{download}{name}");
            json(
                201,
                serde_json::json!({"id": id, "name": name, "size": size, "browser_download_url": url}),
            )
        }
        "DELETE" if t.starts_with(&format!("{repo}/releases/assets/")) => {
            let id: u64 = t.rsplit('/').next().unwrap().parse().unwrap();
            s.assets.retain(|a| a.id != id);
            (204, Body::Json(serde_json::Value::Null))
        }
        _ => not_found(),
    }
}
