//! A raw byte TCP proxy for the links between ensemble members (quorum and election traffic),
//! which a test can partition: *hold* the bytes, as a real network partition does (TCP keeps
//! retransmitting; what was sent arrives once the network heals), or *drop* them.
//!
//! Quorum traffic is not framed like the client protocol, so this proxy copies bytes as they
//! come. One thing is rewritten: the first message of an election connection carries the
//! caller's own election address, and the callee, when it wins the connection tie-break
//! (higher server id), hangs up and calls back *that* address; the proxy replaces it with the
//! proxy through which the callee reaches the caller, so that call-backs are proxied too.
//!
//! Each direction of a connection is a reader, which reads from its source as bytes come and
//! queues them, and a writer, which writes the queue to the other side while the link is
//! [`LinkMode::Open`]: holding is just not writing, so nothing read is ever lost or reordered.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest election address (or address list) accepted in an initial message; ZooKeeper's own
/// limit is larger, but loopback addresses are short.
const MAX_ADDR: usize = 4096;

/// What a link does with the bytes it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkMode {
    /// Forwards them.
    Open = 0,
    /// Keeps them, in order, and forwards them once open again; a connection made meanwhile is
    /// accepted and reaches its target only then.
    Hold = 1,
    /// Swallows them (a black hole); a connection made meanwhile is never forwarded.
    Drop = 2,
}

impl LinkMode {
    fn from_u8(v: u8) -> LinkMode {
        match v {
            1 => LinkMode::Hold,
            2 => LinkMode::Drop,
            _ => LinkMode::Open,
        }
    }
}

/// What a reader queues for its writer.
enum Chunk {
    Data(Vec<u8>),
    /// The source ended (closed, or failed): the writer ends its side for writing.
    End,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Chunk>,
    bytes: usize,
}

/// One direction of a connection: what was read from its source and not yet written.
#[derive(Default)]
struct Pipe {
    queue: Mutex<Queue>,
    cv: Condvar,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, c: Chunk) {
        let mut q = self.lock();
        if let Chunk::Data(d) = &c {
            q.bytes += d.len();
        }
        q.chunks.push_back(c);
        self.cv.notify_all();
    }

    /// Wakes whoever waits on this pipe (the link's mode changed or the connection closed).
    fn wake(&self) {
        let _q = self.lock();
        self.cv.notify_all();
    }

    fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The next chunk to write, waiting while the link is not open or nothing is queued; `None`
    /// once the connection is closed or the proxy stops.
    fn pop(&self, sh: &Shared, conn: &Conn) -> Option<Chunk> {
        let mut q = self.lock();
        loop {
            if conn.closed.load(Ordering::SeqCst) || sh.stop.load(Ordering::SeqCst) {
                return None;
            }
            if sh.mode() == LinkMode::Open {
                if let Some(c) = q.chunks.pop_front() {
                    if let Chunk::Data(d) = &c {
                        q.bytes -= d.len();
                    }
                    return Some(c);
                }
            }
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until the link is open (`true`), or the connection is closed or the proxy stops
    /// (`false`).
    fn wait_open(&self, sh: &Shared, conn: &Conn) -> bool {
        let mut q = self.lock();
        loop {
            if conn.closed.load(Ordering::SeqCst) || sh.stop.load(Ordering::SeqCst) {
                return false;
            }
            if sh.mode() == LinkMode::Open {
                return true;
            }
            q = self.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One proxied connection: `near` is the caller's side, `far` the target's, connected once the
/// link is open.
struct Conn {
    near: TcpStream,
    far: Mutex<Option<TcpStream>>,
    /// near → far.
    out: Pipe,
    /// far → near.
    back: Pipe,
    closed: AtomicBool,
    /// Directions whose writer has ended.
    ended: AtomicU8,
}

impl Conn {
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.near.shutdown(Shutdown::Both);
        if let Some(f) = self.far.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = f.shutdown(Shutdown::Both);
        }
        self.out.wake();
        self.back.wake();
    }
}

struct Shared {
    target: SocketAddr,
    /// For an election link: the address that replaces the caller's own in its initial message.
    callback: Option<String>,
    stop: AtomicBool,
    mode: AtomicU8,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mode(&self) -> LinkMode {
        LinkMode::from_u8(self.mode.load(Ordering::SeqCst))
    }

    fn forget(&self, id: u64) {
        let c = self.conns().remove(&id);
        if let Some(c) = c {
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
            mode: AtomicU8::new(LinkMode::Open as u8),
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

    /// The link's mode now.
    pub(crate) fn mode(&self) -> LinkMode {
        self.shared.mode()
    }

    /// Sets what the link does with the bytes it reads from now on; connections stay open.
    /// Opening a held link forwards what it held, in order, first.
    pub(crate) fn set_mode(&self, mode: LinkMode) {
        self.shared.mode.store(mode as u8, Ordering::SeqCst);
        let conns: Vec<Arc<Conn>> = self.shared.conns().values().cloned().collect();
        for c in conns {
            c.out.wake();
            c.back.wake();
        }
    }

    /// Bytes read and not yet forwarded, in the direction from the caller to the target
    /// (`outgoing`) or back.
    pub(crate) fn held_bytes(&self, outgoing: bool) -> usize {
        let conns: Vec<Arc<Conn>> = self.shared.conns().values().cloned().collect();
        conns
            .iter()
            .map(|c| {
                if outgoing {
                    c.out.bytes()
                } else {
                    c.back.bytes()
                }
            })
            .sum()
    }

    /// Closes every live connection (both sides); what they held is lost.
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .is_ok()
}

fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    for incoming in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(near) = incoming else { continue };
        let _ = near.set_nodelay(true);
        let Ok(reader) = near.try_clone() else {
            continue;
        };
        let id = sh.next_id.fetch_add(1, Ordering::SeqCst);
        let conn = Arc::new(Conn {
            near,
            far: Mutex::new(None),
            out: Pipe::default(),
            back: Pipe::default(),
            closed: AtomicBool::new(false),
            ended: AtomicU8::new(0),
        });
        sh.conns().insert(id, conn.clone());
        // The caller's bytes are read (and held, or dropped) from the start, whether or not the
        // target is reachable yet.
        let (sh1, conn1) = (sh.clone(), conn.clone());
        let started = spawn("zk-link-read", move || {
            let cb = sh1.callback.clone();
            read_into(reader, &conn1.out, &sh1, cb.as_deref());
        });
        let sh2 = sh.clone();
        if !started || !spawn("zk-link-out", move || forward(id, conn, sh2)) {
            sh.forget(id);
        }
    }
}

/// Once the link is open, connects to the target, starts the way back, and writes what the
/// caller sent (and sends) to the target.
fn forward(id: u64, conn: Arc<Conn>, sh: Arc<Shared>) {
    // A connection accepted while the link held waits here; one accepted while it dropped is
    // closed by the heal (`cut_all`) before the link opens.
    if !conn.out.wait_open(&sh, &conn) {
        sh.forget(id);
        return;
    }
    let Ok(far) = TcpStream::connect_timeout(&sh.target, Duration::from_secs(2)) else {
        sh.forget(id);
        return;
    };
    let _ = far.set_nodelay(true);
    let (Ok(f_read), Ok(f_write), Ok(n_write)) =
        (far.try_clone(), far.try_clone(), conn.near.try_clone())
    else {
        sh.forget(id);
        return;
    };
    *conn.far.lock().unwrap_or_else(|e| e.into_inner()) = Some(far);
    if conn.closed.load(Ordering::SeqCst) {
        // Closed while connecting: `close` did not see `far`.
        sh.forget(id);
        let _ = f_write.shutdown(Shutdown::Both);
        return;
    }
    let (sh1, conn1) = (sh.clone(), conn.clone());
    let (sh2, conn2) = (sh.clone(), conn.clone());
    let ok = spawn("zk-link-back-read", move || {
        read_into(f_read, &conn1.back, &sh1, None)
    }) && spawn("zk-link-back", move || {
        write_from(id, &conn2, &conn2.back, n_write, &sh2)
    });
    if !ok {
        sh.forget(id);
        return;
    }
    write_from(id, &conn, &conn.out, f_write, &sh);
}

/// Reads `r` into `pipe` until it ends (then queues [`Chunk::End`]); while the link drops,
/// what is read is discarded. `callback`: rewrite the election initial message first.
fn read_into(mut r: TcpStream, pipe: &Pipe, sh: &Shared, callback: Option<&str>) {
    if let Some(cb) = callback {
        match rewrite_initial(&mut r, cb) {
            Ok(first) => {
                if sh.mode() != LinkMode::Drop {
                    pipe.push(Chunk::Data(first));
                }
            }
            Err(_) => {
                pipe.push(Chunk::End);
                return;
            }
        }
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => {
                pipe.push(Chunk::End);
                return;
            }
            Ok(n) => {
                if sh.mode() != LinkMode::Drop {
                    pipe.push(Chunk::Data(buf[..n].to_vec()));
                }
            }
        }
    }
}

/// Writes what `pipe` queues to `w` while the link is open; at the source's end, ends `w` for
/// writing (after everything the source sent before). The connection is forgotten when both
/// directions have ended, or at once if a write fails.
fn write_from(id: u64, conn: &Conn, pipe: &Pipe, mut w: TcpStream, sh: &Shared) {
    while let Some(c) = pipe.pop(sh, conn) {
        match c {
            Chunk::Data(d) => {
                if w.write_all(&d).is_err() {
                    sh.forget(id);
                    return;
                }
            }
            Chunk::End => {
                let _ = w.shutdown(Shutdown::Write);
                if conn.ended.fetch_add(1, Ordering::SeqCst) == 1 {
                    sh.forget(id);
                }
                return;
            }
        }
    }
    sh.forget(id);
}

/// Reads an election connection's initial message and returns it with the caller's address
/// replaced by `callback`. The message (QuorumCnxManager.InitialMessage): protocol version
/// (i64; a non-negative value is an old-style bare server id, passed on as is), server id
/// (i64), address length (i32), address bytes (`host:port`, several joined by `|` in
/// version 2).
fn rewrite_initial(r: &mut TcpStream, callback: &str) -> io::Result<Vec<u8>> {
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
    Ok(out)
}
