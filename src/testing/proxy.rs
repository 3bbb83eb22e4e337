//! A fault-injecting TCP proxy in front of one ZooKeeper server.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::resolve;

/// Frames longer than this are taken as "not ZooKeeper framing" (e.g. a four-letter word,
/// whose 4 ASCII bytes read as a length of more than 1.6 GB): the connection is then
/// forwarded as raw bytes.
const MAX_FRAME: usize = 64 << 20;

/// ZooKeeper op codes of create requests: create, create2, createContainer, createTTL.
const CREATE_OPS: [i32; 4] = [1, 15, 19, 21];

/// ZooKeeper's op code of a multi request.
const MULTI_OP: i32 = 14;

/// One proxied connection: both sockets and its flags.
struct Conn {
    client: TcpStream,
    server: Option<TcpStream>,
    /// Set once the arm fired on this connection: nothing more goes to the client.
    cut: AtomicBool,
    /// The connection does not carry ZooKeeper framing (a four-letter word).
    raw: AtomicBool,
    /// The client side is to be reset, not closed in order: it is never shut down, so that
    /// the last of its descriptors to go sends the reset (SO_LINGER 0).
    reset: AtomicBool,
}

impl Conn {
    fn close(&self) {
        if !self.reset.load(Ordering::SeqCst) {
            let _ = self.client.shutdown(Shutdown::Both);
        }
        if let Some(s) = &self.server {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

struct Shared {
    target: SocketAddr,
    stop: AtomicBool,
    blackhole: AtomicBool,
    refuse: AtomicBool,
    /// The cut comes after this many more creates (0: not armed).
    arm_create: AtomicUsize,
    /// The network goes silent once this many more creates were forwarded (0: not armed).
    arm_blackhole_create: AtomicUsize,
    /// The network goes silent once the reply to this many more creates reached the client
    /// (0: not armed).
    arm_blackhole_reply: AtomicUsize,
    /// The xid of the create whose reply is the last to reach the client (0: none).
    blackhole_xid: AtomicI32,
    /// The network goes silent once the next connect request was forwarded.
    arm_blackhole_connect: AtomicBool,
    /// The op code whose next request resets its connection instead of being forwarded (-1:
    /// not armed).
    arm_reset: AtomicI32,
    /// The op code whose next request is forwarded but whose reply is dropped (-1: not armed).
    arm_drop: AtomicI32,
    /// The xid of the request whose reply is to be dropped (0: none).
    drop_xid: AtomicI32,
    /// Replies dropped so far.
    dropped: AtomicUsize,
    creates: AtomicUsize,
    /// Requests forwarded so far, by op code.
    ops: Mutex<HashMap<i32, usize>>,
    /// Connect requests (first frames of framed connections) forwarded so far.
    connects: AtomicUsize,
    /// How long whatever the server sends is held before it goes on to the client (µs).
    server_delay_us: AtomicU64,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A TCP proxy on a free loopback port in front of one ZooKeeper server, for fault
/// injection: cut every connection, black-hole the network, refuse new connections, or cut
/// a connection right after it forwarded a create request (the server applies the create,
/// the client never sees the reply).
///
/// Dropping it stops accepting and closes every proxied connection.
///
/// ```no_run
/// use zklock::testing::{TcpProxy, TestingServer};
/// let server = TestingServer::start().unwrap();
/// let proxy = TcpProxy::start(&server.connect_string()).unwrap();
/// // clients connect to proxy.connect_string()
/// proxy.cut_after_next_create();
/// ```
pub struct TcpProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpProxy {
    /// Listens on a free `127.0.0.1` port and forwards each accepted connection to `target`
    /// (`"127.0.0.1:PORT"`).
    pub fn start(target: &str) -> io::Result<TcpProxy> {
        let target = resolve(target)?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            target,
            stop: AtomicBool::new(false),
            blackhole: AtomicBool::new(false),
            refuse: AtomicBool::new(false),
            arm_create: AtomicUsize::new(0),
            arm_blackhole_create: AtomicUsize::new(0),
            arm_blackhole_reply: AtomicUsize::new(0),
            blackhole_xid: AtomicI32::new(0),
            arm_blackhole_connect: AtomicBool::new(false),
            arm_reset: AtomicI32::new(-1),
            arm_drop: AtomicI32::new(-1),
            drop_xid: AtomicI32::new(0),
            dropped: AtomicUsize::new(0),
            creates: AtomicUsize::new(0),
            ops: Mutex::new(HashMap::new()),
            connects: AtomicUsize::new(0),
            server_delay_us: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name(format!("zk-proxy-{port}"))
            .spawn(move || accept_loop(listener, sh))?;
        Ok(TcpProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// `"127.0.0.1:PORT"` of the proxy: give this to clients.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every live proxied connection now (both sides).
    pub fn cut_all(&self) {
        let conns: Vec<Arc<Conn>> = self.shared.conns().drain().map(|(_, c)| c).collect();
        for c in conns {
            c.close();
        }
    }

    /// While on, nothing is forwarded in either direction (whole frames are silently
    /// dropped, connections stay open), and connections accepted meanwhile are never
    /// forwarded at all: a black-holed network.
    pub fn set_blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::SeqCst);
    }

    /// A slow link from the server: each piece the proxy reads from the server is held `delay`
    /// before it goes on to the client, in order (pieces read together wait once; a reply
    /// read while an earlier piece is held waits after it, so a burst arrives later still).
    /// What the client sends is not delayed. Zero: at once.
    pub fn set_server_delay(&self, delay: Duration) {
        self.shared
            .server_delay_us
            .store(delay.as_micros() as u64, Ordering::SeqCst);
    }

    /// Arms a one-shot fault: the next create request (op 1, 15, 19 or 21, or a multi whose
    /// first operation is one) is forwarded to the server, then its connection is cut before
    /// the server's reply reaches the client.
    pub fn cut_after_next_create(&self) {
        self.cut_after_creates(1);
    }

    /// As [`TcpProxy::cut_after_next_create`], after the `n`-th create request from now (the
    /// ones before it go through; `n` = 0 disarms).
    pub fn cut_after_creates(&self, n: usize) {
        self.shared.arm_create.store(n, Ordering::SeqCst);
    }

    /// Arms a one-shot fault: the `n`-th create request from now (as counted by
    /// [`TcpProxy::cut_after_creates`]) is forwarded to the server, and the network is
    /// black-holed ([`TcpProxy::set_blackhole`]) before its reply can come back: the server
    /// applies the create, the client hears nothing more. `n` = 0 disarms;
    /// `set_blackhole(false)` ends the silence.
    pub fn blackhole_after_creates(&self, n: usize) {
        self.shared.arm_blackhole_create.store(n, Ordering::SeqCst);
    }

    /// As [`TcpProxy::blackhole_after_creates`], one reply later: the reply to the `n`-th
    /// create from now reaches the client, and the network is black-holed right after it
    /// (replies the server sent after that one, e.g. to requests pipelined behind the create,
    /// are dropped).
    pub fn blackhole_after_reply_to_creates(&self, n: usize) {
        self.shared.arm_blackhole_reply.store(n, Ordering::SeqCst);
    }

    /// Arms a one-shot fault: the next connect request (a session's first message on a
    /// connection: a new session, or one reconnecting here) is forwarded to the server, and the
    /// network is black-holed ([`TcpProxy::set_blackhole`]) before the answer can come back:
    /// the server takes the session (a reconnect: with the session timeout it grants), the
    /// client never learns what it was granted. `set_blackhole(false)` ends the silence.
    pub fn blackhole_after_next_connect(&self) {
        self.shared
            .arm_blackhole_connect
            .store(true, Ordering::SeqCst);
    }

    /// Arms a one-shot fault: the next request with op code `op` (e.g. 3, exists) is not
    /// forwarded; its connection is reset instead (the client reads ECONNRESET, as when a
    /// server dies under it), so every request in flight on it fails.
    pub fn reset_at_next_op(&self, op: i32) {
        self.shared.arm_reset.store(op, Ordering::SeqCst);
    }

    /// Whether the fault armed by [`TcpProxy::reset_at_next_op`] is still waiting for its
    /// request.
    pub fn reset_pending(&self) -> bool {
        self.shared.arm_reset.load(Ordering::SeqCst) != -1
    }

    /// Arms a one-shot fault: the next request with op code `op` (e.g. 2, delete) is forwarded
    /// and applied by the server, but its reply never reaches the client (the connection stays
    /// open: the client's request times out and it retries on the same session).
    pub fn drop_reply_of_next_op(&self, op: i32) {
        self.shared.arm_drop.store(op, Ordering::SeqCst);
    }

    /// How many replies [`TcpProxy::drop_reply_of_next_op`] has dropped so far.
    pub fn replies_dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Number of create requests forwarded to the server so far.
    pub fn creates_seen(&self) -> usize {
        self.shared.creates.load(Ordering::SeqCst)
    }

    /// Number of requests with op code `op` (e.g. 2, delete) forwarded to the server so far.
    pub fn requests_seen(&self, op: i32) -> usize {
        let ops = self.shared.ops.lock().unwrap_or_else(|e| e.into_inner());
        ops.get(&op).copied().unwrap_or(0)
    }

    /// Number of connect requests (a session's first message on a connection: a new session
    /// or one moving here) forwarded to the server so far.
    pub fn connects_seen(&self) -> usize {
        self.shared.connects.load(Ordering::SeqCst)
    }

    /// While on, accepted connections are closed at once.
    pub fn refuse_new(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// Number of live proxied connections.
    pub fn connections(&self) -> usize {
        self.shared.conns().len()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
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

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("port", &self.port)
            .field("target", &self.shared.target)
            .finish()
    }
}

fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    for incoming in listener.incoming() {
        if sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = incoming else { continue };
        if sh.refuse.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let _ = client.set_nodelay(true);
        let id = sh.next_id.fetch_add(1, Ordering::SeqCst);
        if sh.blackhole.load(Ordering::SeqCst) {
            // Accepted, never forwarded: swallow whatever the client sends until it goes.
            let Ok(reader) = client.try_clone() else {
                continue;
            };
            let conn = Arc::new(Conn {
                client,
                server: None,
                cut: AtomicBool::new(true),
                raw: AtomicBool::new(true),
                reset: AtomicBool::new(false),
            });
            sh.conns().insert(id, conn.clone());
            let sh2 = sh.clone();
            let _ = std::thread::Builder::new()
                .name("zk-proxy-void".into())
                .spawn(move || {
                    let mut r = reader;
                    let mut buf = [0u8; 4096];
                    while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
                    conn.close();
                    sh2.conns().remove(&id);
                });
            continue;
        }
        let Ok(server) = TcpStream::connect_timeout(&sh.target, Duration::from_secs(2)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = server.set_nodelay(true);
        let (Ok(c_read), Ok(c_write), Ok(s_read), Ok(s_write)) = (
            client.try_clone(),
            client.try_clone(),
            server.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        let conn = Arc::new(Conn {
            client,
            server: Some(server),
            cut: AtomicBool::new(false),
            raw: AtomicBool::new(false),
            reset: AtomicBool::new(false),
        });
        sh.conns().insert(id, conn.clone());
        let (sh1, conn1) = (sh.clone(), conn.clone());
        let _ = std::thread::Builder::new()
            .name("zk-proxy-c2s".into())
            .spawn(move || {
                // A clean end from the client only half-closes (the server may still
                // answer, e.g. a four-letter word); the other thread then closes all.
                if client_to_server(c_read, s_write, &sh1, &conn1).is_err() {
                    conn1.close();
                    sh1.conns().remove(&id);
                }
            });
        let (sh2, conn2) = (sh.clone(), conn);
        let _ = std::thread::Builder::new()
            .name("zk-proxy-s2c".into())
            .spawn(move || {
                let _ = server_to_client(s_read, c_write, &sh2, &conn2);
                conn2.close();
                sh2.conns().remove(&id);
            });
    }
}

/// Reads one length-prefixed frame (the length bytes included) into `frame`. `Ok(false)` on
/// a clean end of stream. If the length is implausible, `frame` holds just the 4 bytes read
/// and `Ok(true)` is returned with `*raw = true`.
fn read_frame(r: &mut TcpStream, frame: &mut Vec<u8>, raw: &mut bool) -> io::Result<bool> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..])?;
        if n == 0 {
            if got > 0 {
                // A short non-framed tail: pass it on as raw bytes.
                frame.clear();
                frame.extend_from_slice(&len[..got]);
                *raw = true;
                return Ok(true);
            }
            return Ok(false);
        }
        got += n;
    }
    frame.clear();
    frame.extend_from_slice(&len);
    let n = i32::from_be_bytes(len);
    if n < 0 || n as usize > MAX_FRAME {
        *raw = true;
        return Ok(true);
    }
    frame.resize(4 + n as usize, 0);
    r.read_exact(&mut frame[4..])?;
    Ok(true)
}

/// Writes what the server sent on to the client, after the link's delay (slept here, on the
/// connection's server-to-client thread: the pieces behind it wait in the socket meanwhile).
fn to_client_write(w: &mut TcpStream, sh: &Shared, bytes: &[u8]) -> io::Result<()> {
    let delay = sh.server_delay_us.load(Ordering::SeqCst);
    if delay > 0 {
        std::thread::sleep(Duration::from_micros(delay));
    }
    w.write_all(bytes)
}

fn copy_raw(
    r: &mut TcpStream,
    w: &mut TcpStream,
    sh: &Shared,
    conn: &Conn,
    to_client: bool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            let _ = w.shutdown(Shutdown::Write);
            return Ok(());
        }
        if sh.blackhole.load(Ordering::SeqCst) || (to_client && conn.cut.load(Ordering::SeqCst)) {
            continue;
        }
        if to_client {
            to_client_write(w, sh, &buf[..n])?;
        } else {
            w.write_all(&buf[..n])?;
        }
    }
}

fn client_to_server(
    mut r: TcpStream,
    mut w: TcpStream,
    sh: &Shared,
    conn: &Conn,
) -> io::Result<()> {
    let mut frame = Vec::new();
    let mut first = true;
    loop {
        let mut raw = false;
        if !read_frame(&mut r, &mut frame, &mut raw)? {
            let _ = w.shutdown(Shutdown::Write);
            return Ok(());
        }
        if raw {
            // Not ZooKeeper framing (a four-letter word): forward verbatim from now on.
            conn.raw.store(true, Ordering::SeqCst);
            if !sh.blackhole.load(Ordering::SeqCst) {
                w.write_all(&frame)?;
            }
            return copy_raw(&mut r, &mut w, sh, conn, false);
        }
        if sh.blackhole.load(Ordering::SeqCst) {
            first = false;
            continue;
        }
        let op = (!first && frame.len() >= 12)
            .then(|| i32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]));
        // A multi (op 14) whose first operation creates counts as a create (the simple lock
        // creates its node and its witness in one multi).
        let first_of_multi = (op == Some(MULTI_OP) && frame.len() >= 16)
            .then(|| i32::from_be_bytes([frame[12], frame[13], frame[14], frame[15]]));
        let is_create = [op, first_of_multi]
            .into_iter()
            .flatten()
            .any(|op| CREATE_OPS.contains(&op));
        let first_frame = first;
        first = false;
        if let Some(op) = op {
            if sh
                .arm_reset
                .compare_exchange(op, -1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // The client's descriptors close as this thread and the other direction's
                // end (its server side is shut down here); the last one sends the reset.
                conn.cut.store(true, Ordering::SeqCst);
                conn.reset.store(true, Ordering::SeqCst);
                crate::sys::reset_on_close(conn.client.as_raw_fd());
                conn.close();
                return Ok(());
            }
        }
        if let Some(op) = op {
            if sh
                .arm_drop
                .compare_exchange(op, -1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let xid = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                sh.drop_xid.store(xid, Ordering::SeqCst);
            }
        }
        if let Some(op) = op {
            *sh.ops
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(op)
                .or_insert(0) += 1;
        } else if first_frame {
            sh.connects.fetch_add(1, Ordering::SeqCst);
            if sh.arm_blackhole_connect.swap(false, Ordering::SeqCst) {
                // Silent from here on (the answer included), the request itself forwarded.
                sh.blackhole.store(true, Ordering::SeqCst);
                w.write_all(&frame)?;
                continue;
            }
        }
        if is_create {
            sh.creates.fetch_add(1, Ordering::SeqCst);
            let armed = sh
                .arm_create
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                == Ok(1);
            let countdown = |arm: &AtomicUsize| {
                arm.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) == Ok(1)
            };
            if countdown(&sh.arm_blackhole_reply) {
                let xid = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                sh.blackhole_xid.store(xid, Ordering::SeqCst);
            }
            if countdown(&sh.arm_blackhole_create) {
                // Silent from here on (its reply included), the create itself forwarded.
                sh.blackhole.store(true, Ordering::SeqCst);
                w.write_all(&frame)?;
                continue;
            }
            if armed {
                // Nothing more reaches the client from here on, then cut once the server
                // has had time to apply the create.
                conn.cut.store(true, Ordering::SeqCst);
                w.write_all(&frame)?;
                w.flush()?;
                std::thread::sleep(Duration::from_millis(50));
                conn.close();
                return Ok(());
            }
        }
        w.write_all(&frame)?;
    }
}

fn server_to_client(
    mut r: TcpStream,
    mut w: TcpStream,
    sh: &Shared,
    conn: &Conn,
) -> io::Result<()> {
    let mut frame = Vec::new();
    loop {
        let mut raw = false;
        if conn.raw.load(Ordering::SeqCst) {
            return copy_raw(&mut r, &mut w, sh, conn, true);
        }
        if !read_frame(&mut r, &mut frame, &mut raw)? {
            if !conn.reset.load(Ordering::SeqCst) {
                let _ = w.shutdown(Shutdown::Write);
            }
            return Ok(());
        }
        if raw || conn.raw.load(Ordering::SeqCst) {
            // The server answers a four-letter word with plain text.
            conn.raw.store(true, Ordering::SeqCst);
            if !sh.blackhole.load(Ordering::SeqCst) && !conn.cut.load(Ordering::SeqCst) {
                to_client_write(&mut w, sh, &frame)?;
            }
            return copy_raw(&mut r, &mut w, sh, conn, true);
        }
        if sh.blackhole.load(Ordering::SeqCst) || conn.cut.load(Ordering::SeqCst) {
            continue;
        }
        if frame.len() >= 8 {
            let xid = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
            if xid > 0
                && sh
                    .drop_xid
                    .compare_exchange(xid, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                sh.dropped.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            if xid > 0
                && sh
                    .blackhole_xid
                    .compare_exchange(xid, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                // The armed create's reply goes through; nothing after it. Silent before the
                // reply leaves: a client that gets it and ends the silence at once (as a test
                // does) must not have it begin again behind its back.
                sh.blackhole.store(true, Ordering::SeqCst);
                to_client_write(&mut w, sh, &frame)?;
                continue;
            }
        }
        to_client_write(&mut w, sh, &frame)?;
    }
}
