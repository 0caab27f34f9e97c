//! A TCP proxy on 127.0.0.1 in front of a real server, which cuts the first blob upload
//! (`PUT …/blobs/uploads/…`) it carries halfway: the server sees a request end in the middle,
//! the client a connection lost. Then it either carries on (a registry that blinked) or stops
//! listening altogether (a registry that went away).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does once it has cut the upload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AfterCut {
    /// Carries every later connection through.
    CarryOn,
    /// Closes every connection and stops listening: later connections are refused.
    GoAway,
}

struct State {
    after: AfterCut,
    armed: AtomicBool,
    stopped: AtomicBool,
    cuts: AtomicUsize,
    conns: Mutex<Vec<TcpStream>>,
}

pub struct FlakyProxy {
    pub port: u16,
    state: Arc<State>,
}

impl FlakyProxy {
    pub fn start(target: u16, after: AfterCut) -> FlakyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            after,
            armed: AtomicBool::new(true),
            stopped: AtomicBool::new(false),
            cuts: AtomicUsize::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        std::thread::spawn(move || {
            loop {
                if st.stopped.load(Ordering::SeqCst) {
                    // Dropping the listener: the port refuses connections from now on.
                    return;
                }
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        carry(client, server, st.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FlakyProxy { port, state }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many uploads it cut (0 or 1).
    pub fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        for c in self.state.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn carry(client: TcpStream, server: TcpStream, st: Arc<State>) {
    {
        let mut conns = st.conns.lock().unwrap();
        conns.push(client.try_clone().unwrap());
        conns.push(server.try_clone().unwrap());
    }
    let (mut from_client, mut to_server) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (mut from_server, mut to_client) = (server, client);
    let up = st.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            let upload = String::from_utf8_lossy(&chunk[..n.min(512)]).starts_with("PUT ")
                && String::from_utf8_lossy(&chunk[..n.min(512)]).contains("/blobs/uploads/");
            if upload && up.armed.swap(false, Ordering::SeqCst) {
                // Half of what the client sent in this read, then nothing more, either way.
                let _ = to_server.write_all(&chunk[..n / 2]);
                up.cuts.fetch_add(1, Ordering::SeqCst);
                let _ = to_server.shutdown(Shutdown::Both);
                let _ = from_client.shutdown(Shutdown::Both);
                if up.after == AfterCut::GoAway {
                    up.stopped.store(true, Ordering::SeqCst);
                    for c in up.conns.lock().unwrap().drain(..) {
                        let _ = c.shutdown(Shutdown::Both);
                    }
                }
                return;
            }
            if to_server.write_all(chunk).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Both);
    });
}
