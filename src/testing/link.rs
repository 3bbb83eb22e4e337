//! A raw byte TCP proxy for the links between ensemble members (quorum and election traffic),
//! which a test can black-hole to partition members from each other.
//!
//! Quorum traffic is not framed like the client protocol, so this proxy copies bytes as they
//! come. One thing is rewritten: the first message of an election connection carries the
//! caller's own election address, and the callee, when it wins the connection tie-break
//! (higher server id), hangs up and calls back *that* address; the proxy replaces it with the
//! proxy through which the callee reaches the caller, so that call-backs are proxied too.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest election address (or address list) accepted in an initial message; ZooKeeper's own
/// limit is larger, but loopback addresses are short.
const MAX_ADDR: usize = 4096;

/// One proxied connection.
struct Conn {
    near: TcpStream,
    far: Option<TcpStream>,
}

impl Conn {
    fn close(&self) {
        let _ = self.near.shutdown(Shutdown::Both);
        if let Some(f) = &self.far {
            let _ = f.shutdown(Shutdown::Both);
        }
    }
}

struct Shared {
    target: SocketAddr,
    /// For an election link: the address that replaces the caller's own in its initial message.
    callback: Option<String>,
    stop: AtomicBool,
    blackhole: AtomicBool,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, id: u64) {
        if let Some(c) = self.conns().remove(&id) {
            c.close();
        }
    }
}

/// A raw TCP proxy from one ensemble member to one port (quorum or election) of another.
pub(crate) struct LinkProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl LinkProxy {
    /// Forwards the connections accepted on `listener` to `target`. `callback`: for an
    /// election link, the address the target should use to call the caller back.
    pub(crate) fn start(
        listener: TcpListener,
        target: SocketAddr,
        callback: Option<String>,
    ) -> io::Result<LinkProxy> {
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            target,
            callback,
            stop: AtomicBool::new(false),
            blackhole: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name(format!("zk-link-{port}"))
            .spawn(move || accept_loop(listener, sh))?;
        Ok(LinkProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// While on, bytes are swallowed in both directions and connections stay open; connections
    /// made meanwhile are accepted and never forwarded.
    pub(crate) fn set_blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// Closes every live connection (both sides).
    pub(crate) fn cut_all(&self) {
        let conns: Vec<Arc<Conn>> = self.shared.conns().drain().map(|(_, c)| c).collect();
        for c in conns {
            c.close();
        }
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_secs(1),
        );
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        self.cut_all();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    let _ = std::thread::Builder::new().name(name.into()).spawn(f);
}

fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    for incoming in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(near) = incoming else { continue };
        let _ = near.set_nodelay(true);
        let id = sh.next_id.fetch_add(1, Ordering::SeqCst);
        if sh.blackhole.load(Ordering::SeqCst) {
            // Accepted, never forwarded: swallow whatever comes until the caller goes.
            let Ok(mut reader) = near.try_clone() else {
                continue;
            };
            sh.conns().insert(id, Arc::new(Conn { near, far: None }));
            let sh2 = sh.clone();
            spawn("zk-link-void", move || {
                let mut buf = [0u8; 4096];
                while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
                sh2.forget(id);
            });
            continue;
        }
        let Ok(far) = TcpStream::connect_timeout(&sh.target, Duration::from_secs(2)) else {
            let _ = near.shutdown(Shutdown::Both);
            continue;
        };
        let _ = far.set_nodelay(true);
        let (Ok(n_read), Ok(n_write), Ok(f_read), Ok(f_write)) = (
            near.try_clone(),
            near.try_clone(),
            far.try_clone(),
            far.try_clone(),
        ) else {
            continue;
        };
        sh.conns().insert(
            id,
            Arc::new(Conn {
                near,
                far: Some(far),
            }),
        );
        let sh1 = sh.clone();
        spawn("zk-link-out", move || {
            let mut r = n_read;
            let mut w = f_write;
            if let Some(cb) = &sh1.callback {
                if rewrite_initial(&mut r, &mut w, cb, &sh1).is_err() {
                    sh1.forget(id);
                    return;
                }
            }
            let _ = copy(&mut r, &mut w, &sh1);
            sh1.forget(id);
        });
        let sh2 = sh.clone();
        spawn("zk-link-back", move || {
            let (mut r, mut w) = (f_read, n_write);
            let _ = copy(&mut r, &mut w, &sh2);
            sh2.forget(id);
        });
    }
}

/// Copies until either side ends; while black-holed, what is read is dropped.
fn copy(r: &mut TcpStream, w: &mut TcpStream, sh: &Shared) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        if sh.blackhole.load(Ordering::SeqCst) {
            continue;
        }
        w.write_all(&buf[..n])?;
    }
}

/// Passes on an election connection's initial message with the caller's address replaced by
/// `callback`. The message (QuorumCnxManager.InitialMessage): protocol version (i64; a
/// non-negative value is an old-style bare server id, passed on as is), server id (i64),
/// address length (i32), address bytes (`host:port`, several joined by `|` in version 2).
fn rewrite_initial(
    r: &mut TcpStream,
    w: &mut TcpStream,
    callback: &str,
    sh: &Shared,
) -> io::Result<()> {
    let mut version = [0u8; 8];
    r.read_exact(&mut version)?;
    let mut out = version.to_vec();
    if i64::from_be_bytes(version) < 0 {
        let mut head = [0u8; 12];
        r.read_exact(&mut head)?;
        let len = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if len < 0 || len as usize > MAX_ADDR {
            // Not what we expect: pass it on untouched.
            out.extend_from_slice(&head);
        } else {
            let mut addr = vec![0u8; len as usize];
            r.read_exact(&mut addr)?;
            out.extend_from_slice(&head[..8]);
            out.extend_from_slice(&(callback.len() as i32).to_be_bytes());
            out.extend_from_slice(callback.as_bytes());
        }
    }
    if !sh.blackhole.load(Ordering::SeqCst) {
        w.write_all(&out)?;
    }
    Ok(())
}
