// zklock.hpp: a header-only C++17 RAII layer over the zklock C API (include/zklock.h).
//
//   zklock::Client client("127.0.0.1:2181");
//   zklock::Lock mutex = client.mutex("/locks/orders");
//   {
//     zklock::Guard guard(mutex);            // acquires (waits forever), releases at scope exit
//     std::cout << guard.fencing_token() << "\n";
//   }
//   if (auto g = zklock::try_lock_for(mutex, std::chrono::seconds(2))) { /* held */ }
//   std::unique_lock<zklock::Lock> l(mutex, std::chrono::seconds(2));  // a Lock is TimedLockable
//
//   zklock::Client secured("zk1:2281", zklock::Options().tls_ca_file("ca.pem").sasl_digest_md5("bob", pw));
//
// Every failing call throws zklock::Error, which carries the zkl_status and the library's
// message. Handles are move-only and free themselves; a Guard follows its lock's handle, so
// moving the Lock object does not strand it. Thread rules are the C API's (the conventions at
// the top of zklock.h): a const member function calls a const C function and may run on any
// thread beside any other call on the object; the others take turns. A Client may be shared by
// threads; a Lock is one participant (any thread may release what another acquired through it).
#ifndef ZKLOCK_HPP
#define ZKLOCK_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "zklock.hpp needs C++17 or later (-std=c++17); from C, include zklock.h"
#endif

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "zklock.h"

namespace zklock {

// A non-OK status from the library, with its message: zkl_last_error_message at the time, the
// setting that fixes it (zkl_last_error_hint) named as this layer names it (Options::tls_ca_file).
class Error : public std::runtime_error {
 public:
  Error(zkl_status status, const std::string& message)
      : std::runtime_error(std::string(zkl_status_name(static_cast<uint32_t>(status))) + ": " + message),
        status_(status),
        message_(message) {}

  zkl_status status() const noexcept { return status_; }
  const char* status_name() const noexcept { return zkl_status_name(static_cast<uint32_t>(status_)); }
  const std::string& message() const noexcept { return message_; }

 private:
  zkl_status status_;
  std::string message_;
};

namespace detail {
// The Options setter for a zkl_hint, or nullptr for none (or one newer than this header).
inline const char* hint_setting(uint32_t hint) {
  switch (hint) {
    case ZKL_HINT_TLS_CA_FILE: return "Options::tls_ca_file";
    case ZKL_HINT_TLS_IDENTITY: return "Options::tls_identity_files";
    case ZKL_HINT_TLS_KEY_PASSWORD: return "Options::tls_key_password";
    case ZKL_HINT_TLS: return "Options::use_tls";
    case ZKL_HINT_SASL: return "Options::sasl_digest_md5";
    case ZKL_HINT_IDENTITY:
      return "Options::sasl_digest_md5, Options::tls_identity_files or Options::add_auth";
    case ZKL_HINT_CONNECT_TIMEOUT: return "Options::connect_timeout";
    default: return nullptr;
  }
}

// This thread's last error message, its hint named as this layer names the setting.
inline std::string last_error_message() {
  const char* setting = hint_setting(zkl_last_error_hint());
  if (!setting) return zkl_last_error_message();
  return std::string(zkl_last_error_reason()) + " (" + setting + ")";
}
}  // namespace detail

// Throws Error unless s is ZKL_OK.
inline void check(zkl_status s) {
  if (s != ZKL_OK) throw Error(s, detail::last_error_message());
}

enum class Protocol : uint32_t {
  Curator = ZKL_PROTOCOL_CURATOR,
  Kazoo = ZKL_PROTOCOL_KAZOO,
};

// The ACL of the lock nodes a client creates (zkl_acl).
enum class Acl : uint32_t {
  open = ZKL_ACL_OPEN,
  creator_all = ZKL_ACL_CREATOR_ALL,
  creator_all_read_all = ZKL_ACL_CREATOR_ALL_READ_ALL,
};

// The state of a client's session (zkl_session_state).
enum class SessionState : uint32_t {
  connected = ZKL_SESSION_STATE_CONNECTED,
  suspended = ZKL_SESSION_STATE_SUSPENDED,
  expired = ZKL_SESSION_STATE_EXPIRED,
  closed = ZKL_SESSION_STATE_CLOSED,
};

// One participant of a lock (zkl_lock_participants): holders first, then waiters in order.
struct Participant {
  std::string node;
  std::string holder_id;
  int64_t sequence = 0;
  bool is_holder = false;
  bool is_reader = false;
  int64_t created_ms = 0;  // the node's creation, server clock, ms since the epoch
};

// What a lock handle may believe about its hold (zkl_hold_state).
enum class HoldState : uint32_t {
  none = ZKL_HOLD_NONE,
  held = ZKL_HOLD_HELD,            // the session is provably alive: act
  uncertain = ZKL_HOLD_UNCERTAIN,  // cut off long enough that it may be gone: stop acting
  lost = ZKL_HOLD_LOST,            // the session ended
};

inline std::string version() { return zkl_version(); }

namespace detail {
struct ClientFree {
  void operator()(zkl_client* c) const noexcept { zkl_client_free(c); }
};
struct LockFree {
  void operator()(zkl_lock* l) const noexcept { zkl_lock_free(l); }
};
struct OptionsFree {
  void operator()(zkl_options* o) const noexcept { zkl_options_free(o); }
};
// A duration as the C API's uint32_t milliseconds; Error(ZKL_INVALID_ARGUMENT) if it does not fit.
inline uint32_t to_u32_ms(std::chrono::milliseconds d, const char* what) {
  if (d.count() < 0 || d.count() > static_cast<int64_t>(UINT32_MAX))
    throw Error(ZKL_INVALID_ARGUMENT, std::string("invalid argument: ") + what +
                                          " must be 0 to 4294967295 ms");
  return static_cast<uint32_t>(d.count());
}
// A timeout as the C API's int64_t milliseconds, rounded up: negative waits forever (-1, as
// zkl_lock_acquire(l, -1); the same in C, C++ and Python), 0 tries once.
inline int64_t to_ms(std::chrono::nanoseconds d) {
  if (d < std::chrono::nanoseconds::zero()) return -1;
  return static_cast<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(d).count());
}
}  // namespace detail

class Lock;

// One participant in one lock recipe (zkl_lock). Move-only; frees (and so releases) itself.
// Meets the standard's TimedLockable requirements (lock, try_lock, try_lock_for,
// try_lock_until, unlock), so std::lock_guard, std::unique_lock and std::scoped_lock hold it.
// Timeouts mean what they mean in C and Python: a negative one waits forever (unlike
// std::timed_mutex::try_lock_for, which tries once), 0 tries once; try_lock_until with a
// deadline that has passed tries once.
class Lock {
 public:
  // Takes ownership of a handle made by the C API.
  explicit Lock(zkl_lock* raw) : l_(raw) {}

  // BasicLockable / Lockable / TimedLockable. unlock() throws Error (e.g. ZKL_NOT_HELD,
  // ZKL_LOCK_LOST) as release() does; std::lock_guard and std::unique_lock call it from their
  // destructors, where an exception terminates: use Guard to see release errors instead.
  void lock() { acquire(); }
  bool try_lock() { return try_acquire(); }
  template <class Rep, class Period>
  bool try_lock_for(std::chrono::duration<Rep, Period> timeout) {
    return try_acquire_for(timeout);
  }
  template <class Clock, class Duration>
  bool try_lock_until(std::chrono::time_point<Clock, Duration> deadline) {
    auto left = deadline - Clock::now();
    // A deadline that has passed is no timeout of "forever": one try.
    return left <= decltype(left)::zero() ? try_acquire() : try_acquire_for(left);
  }
  void unlock() { release(); }

  // Blocks until held, and held as it returns (zkl_lock_acquire: success is Held). Throws
  // Error with ZKL_TIMEOUT when the hold could not be proven held within one session timeout
  // (its node is given back).
  void acquire() { check(zkl_lock_acquire(get(), -1)); }

  // One attempt that never waits: false if the lock is busy, or its hold could not be proven
  // held within one session timeout.
  bool try_acquire() { return timed(0); }

  // Waits at most `timeout` in all: false if not acquired, and proven held, by then
  // (negative: forever).
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return timed(detail::to_ms(timeout));
  }

  // Releases one hold (throws Error with ZKL_NOT_HELD if not held).
  void release() { check(zkl_lock_release(get())); }

  // A semaphore's n leases at once, all or none, within `timeout` in all (negative: forever;
  // zkl_semaphore_acquire_many): their fencing tokens, or std::nullopt if they were not all
  // free in time (nothing is left taken). Return them with release_many.
  template <class Rep, class Period>
  std::optional<std::vector<int64_t>> acquire_many(uint32_t n,
                                                   std::chrono::duration<Rep, Period> timeout) {
    std::vector<int64_t> tokens(n);
    zkl_status s = zkl_semaphore_acquire_many(get(), n, detail::to_ms(timeout), tokens.data());
    if (s == ZKL_TIMEOUT) return std::nullopt;
    check(s);
    return tokens;
  }

  // Returns the leases with these tokens together (zkl_semaphore_release_many).
  void release_many(const std::vector<int64_t>& tokens) {
    check(zkl_semaphore_release_many(get(), tokens.data(), tokens.size()));
  }

  // Guarded writes (docs/guarded-writes.md): applied to ZooKeeper only while this handle's hold
  // still exists, all or none (zkl_lock_multi); else Error with ZKL_LOCK_LOST, nothing written.
  // Fence anything else with fencing_token().
  void multi(const std::vector<zkl_op>& ops) { check(zkl_lock_multi(get(), ops.data(), ops.size())); }
  void set_data(const std::string& path, const std::string& data) {
    check(zkl_lock_set_data(get(), path.c_str(), reinterpret_cast<const uint8_t*>(data.data()),
                            data.size()));
  }
  void create(const std::string& path, const std::string& data = "",
              uint32_t mode = ZKL_NODE_PERSISTENT) {
    check(zkl_lock_create(get(), path.c_str(), reinterpret_cast<const uint8_t*>(data.data()),
                          data.size(), mode));
  }
  void erase(const std::string& path) { check(zkl_lock_delete(get(), path.c_str())); }

  // Ends the acquire under way (on another thread): it throws Error with ZKL_CANCELLED. With
  // none under way, the lock remembers the cancel and its next acquire throws ZKL_CANCELLED at
  // once, forgetting it (sticky, as zkl_lock_cancel): a cancel just before an acquire begins
  // is not lost. One cancel ends one acquire; several with none between are one.
  void cancel() const { check(zkl_lock_cancel(get())); }

  // Forgets a cancel remembered for the next acquire (one that came after the acquire it was
  // meant for had returned); true if there was one.
  bool reset_cancel() const noexcept { return zkl_lock_reset_cancel(l_.get()) == 1; }

  bool is_held() const noexcept { return zkl_lock_is_held(l_.get()) == 1; }

  HoldState hold_state() const {
    uint32_t s = 0;
    check(zkl_lock_hold_state(l_.get(), &s));
    return static_cast<HoldState>(s);
  }

  // How long the hold stays provably valid if the server went silent now (throws Error with
  // ZKL_NOT_HELD if nothing is held).
  std::chrono::milliseconds lease_remaining() const {
    int64_t ms = 0;
    check(zkl_lock_lease_remaining_ms(l_.get(), &ms));
    return std::chrono::milliseconds(ms);
  }

  int64_t fencing_token() const {
    int64_t t = 0;
    check(zkl_lock_fencing_token(l_.get(), &t));
    return t;
  }

  // Blocks until the hold stops being believed (lease ran out or session ended): true; false
  // if still held at the timeout; throws Error with ZKL_NOT_HELD if nothing is held (or it is
  // released meanwhile). Any thread.
  bool wait_lost(std::chrono::milliseconds timeout) const {
    zkl_status s = zkl_lock_wait_lost(l_.get(), timeout.count());
    if (s == ZKL_TIMEOUT) return false;
    check(s);
    return true;
  }

  // The lock's participants, holders first (for a semaphore: the lease holders).
  std::vector<Participant> participants() const {
    zkl_participants* ps = nullptr;
    check(zkl_lock_participants(l_.get(), &ps));
    std::unique_ptr<zkl_participants, void (*)(zkl_participants*)> owned(ps, zkl_participants_free);
    std::vector<Participant> out;
    for (size_t i = 0, n = zkl_participants_count(ps); i < n; ++i) {
      zkl_participant p{};
      check(zkl_participants_get(ps, i, &p));
      Participant q;
      q.node = p.node;
      q.holder_id = p.holder_id;
      q.sequence = p.sequence;
      q.is_holder = p.is_holder != 0;
      q.is_reader = p.is_reader != 0;
      check(zkl_participants_created_ms(ps, i, &q.created_ms));
      out.push_back(std::move(q));
    }
    return out;
  }

  // This handle's statistics: acquires by outcome, holds ended, wait/hold percentiles (µs).
  zkl_stats stats() const {
    zkl_stats s{};
    check(zkl_lock_stats(l_.get(), &s));
    return s;
  }

  // Cooperative revocation (Curator's): after make_revocable(), wait_revoke_request() returns
  // true when someone asks this holder to let go (it still holds: release to comply).
  void make_revocable() { check(zkl_lock_make_revocable(get())); }
  bool wait_revoke_request(std::chrono::milliseconds timeout) const {
    zkl_status s = zkl_lock_wait_revoke_request(l_.get(), timeout.count());
    if (s == ZKL_TIMEOUT) return false;
    check(s);
    return true;
  }
  // Asks every current holder to let go; returns how many were asked.
  size_t revoke_holders() const {
    size_t n = 0;
    check(zkl_lock_revoke_holders(l_.get(), &n));
    return n;
  }

  zkl_lock* get() const noexcept { return l_.get(); }

  // Gives up ownership of the handle (the caller frees it, or hands it to the C API).
  zkl_lock* release_handle() noexcept { return l_.release(); }

  // All or nothing over `locks`: takes ownership of them only if it succeeds (then `locks` is
  // left empty); on an error it throws and `locks` are unchanged.
  static Lock multi(std::vector<Lock>& locks) {
    std::vector<zkl_lock*> raw;
    raw.reserve(locks.size());
    for (auto& l : locks) raw.push_back(l.get());
    zkl_lock* out = nullptr;
    check(zkl_multi_lock_new(raw.data(), raw.size(), &out));
    for (auto& l : locks) l.release_handle();
    locks.clear();
    return Lock(out);
  }

 private:
  bool timed(int64_t ms) {
    zkl_status s = zkl_lock_acquire(get(), ms);
    if (s == ZKL_TIMEOUT) return false;
    check(s);
    return true;
  }

  std::unique_ptr<zkl_lock, detail::LockFree> l_;
};

// The options of a connect (zkl_options): timeouts, holder id, protocol, ACL, credentials, TLS
// and SASL. Each setter calls its zkl_options_* function (which copies the strings) and returns
// *this, so they chain; a setter throws Error only for a bad argument. What the setters record is
// checked at connect (an unreadable CA file, a bad PEM, a timeout out of range: Error with
// ZKL_INVALID_ARGUMENT naming it). Move-only; a Client does not keep it.
//
//   zklock::Client c("zk1:2281", zklock::Options()
//                                    .tls_ca_file("/etc/zookeeper/ca.pem")
//                                    .tls_identity_files("client.pem", "client.key")
//                                    .holder_id("billing-7"));
//   zklock::Client s("zk1:2181", zklock::Options().sasl_digest_md5("bob", password));
//
// A wrong password, a client certificate missing or refused, a server certificate not trusted:
// Error with ZKL_AUTH_FAILED (e.status()), whose message says what to fix.
class Options {
 public:
  Options() {
    zkl_options* o = nullptr;
    check(zkl_options_new(&o));
    o_.reset(o);
  }

  // Default 10 s; the server caps it between its min and max session timeouts.
  Options& session_timeout(std::chrono::milliseconds t) {
    return set(zkl_options_set_session_timeout(get(), detail::to_u32_ms(t, "session_timeout")));
  }
  // How long the connect waits for a session (default 10 s; 0: the session timeout).
  Options& connect_timeout(std::chrono::milliseconds t) {
    return set(zkl_options_set_connect_timeout(get(), detail::to_u32_ms(t, "connect_timeout")));
  }
  // The text stored in the client's lock nodes (default HOSTNAME:PID).
  Options& holder_id(const std::string& id) { return set(zkl_options_set_holder_id(get(), id.c_str())); }
  // The servers' tickTime (0, the default: read from the servers).
  Options& server_tick(std::chrono::milliseconds t) {
    return set(zkl_options_set_server_tick(get(), detail::to_u32_ms(t, "server_tick")));
  }
  Options& protocol(Protocol p) { return set(zkl_options_set_protocol(get(), static_cast<uint32_t>(p))); }
  // Creator-only ACLs need an identity: SASL, a client certificate or add_auth.
  Options& acl(Acl a) { return set(zkl_options_set_acl(get(), static_cast<uint32_t>(a))); }
  // addAuth at every (re)connect, e.g. ("digest", "user:password"); several may be added.
  Options& add_auth(const std::string& scheme, const std::string& auth) {
    return set(zkl_options_add_auth(get(), scheme.c_str(), auth.c_str()));
  }
  // TLS to every host not written tcp://, with the system's CAs unless a CA is set. Every tls_*
  // setter turns TLS on too.
  Options& use_tls() { return set(zkl_options_use_tls(get())); }
  Options& tls_ca_file(const std::string& path) { return set(zkl_options_set_tls_ca_file(get(), path.c_str())); }
  Options& tls_ca_pem(const std::string& pem) { return set(zkl_options_set_tls_ca_pem(get(), pem.c_str())); }
  // The client's certificate and key (PEM files), for mutual TLS.
  Options& tls_identity_files(const std::string& cert, const std::string& key) {
    return set(zkl_options_set_tls_identity_files(get(), cert.c_str(), key.c_str()));
  }
  Options& tls_identity_pem(const std::string& cert_pem, const std::string& key_pem) {
    return set(zkl_options_set_tls_identity_pem(get(), cert_pem.c_str(), key_pem.c_str()));
  }
  // The password of an encrypted PKCS#8 key.
  Options& tls_key_password(const std::string& password) {
    return set(zkl_options_set_tls_key_password(get(), password.c_str()));
  }
  // DANGEROUS: any certificate of a trusted CA passes for the servers, whatever its name.
  Options& tls_danger_accept_any_server_name() {
    return set(zkl_options_tls_danger_accept_any_server_name(get()));
  }
  // SASL DIGEST-MD5 at every (re)connect; the servers know the client as sasl:<user>.
  Options& sasl_digest_md5(const std::string& user, const std::string& password) {
    return set(zkl_options_set_sasl_digest_md5(get(), user.c_str(), password.c_str()));
  }

  zkl_options* get() const noexcept { return o_.get(); }

 private:
  Options& set(zkl_status s) {
    check(s);
    return *this;
  }

  std::unique_ptr<zkl_options, detail::OptionsFree> o_;
};

// One ZooKeeper session (zkl_client). Move-only; locks made from it keep the session open
// after the Client is destroyed, until they are destroyed too.
class Client {
 public:
  explicit Client(const std::string& hosts,
                  std::chrono::milliseconds session_timeout = std::chrono::seconds(10)) {
    zkl_client* c = nullptr;
    check(zkl_client_connect(hosts.c_str(), static_cast<uint32_t>(session_timeout.count()), &c));
    c_.reset(c);
  }

  // With a connect timeout of its own (0: the session timeout) and a holder id (empty: the
  // default HOSTNAME:PID) stored in the client's lock nodes.
  Client(const std::string& hosts, std::chrono::milliseconds session_timeout,
         std::chrono::milliseconds connect_timeout, const std::string& holder_id = "") {
    zkl_client* c = nullptr;
    check(zkl_client_connect_with(hosts.c_str(), static_cast<uint32_t>(session_timeout.count()),
                                  static_cast<uint32_t>(connect_timeout.count()),
                                  holder_id.empty() ? nullptr : holder_id.c_str(), &c));
    c_.reset(c);
  }

  // With options (zkl_client_connect_with_options): TLS, SASL, timeouts, holder id... Throws
  // Error: ZKL_AUTH_FAILED for refused credentials or certificates, ZKL_CONNECTION_LOSS when no
  // server answered within the connect timeout, ZKL_INVALID_ARGUMENT for a bad option or file.
  Client(const std::string& hosts, const Options& options) {
    zkl_client* c = nullptr;
    check(zkl_client_connect_with_options(hosts.c_str(), options.get(), &c));
    c_.reset(c);
  }

  std::string holder_id() const {
    const char* id = nullptr;
    check(zkl_client_holder_id(get(), &id));
    return id;
  }

  SessionState session_state() const {
    uint32_t s = 0;
    check(zkl_client_session_state(get(), &s));
    return static_cast<SessionState>(s);
  }

  // The session-state listener, on the caller's thread: the first event after `after_seq`
  // (pass 0, then the last event's seq); nothing at the timeout or once CLOSED was handed out.
  std::optional<zkl_session_event> next_session_event(uint64_t after_seq,
                                                      std::chrono::milliseconds timeout) const {
    zkl_session_event e{};
    zkl_status s = zkl_client_wait_session_event(get(), after_seq, timeout.count(), &e);
    if (s == ZKL_TIMEOUT || s == ZKL_CLOSED) return std::nullopt;
    check(s);
    return e;
  }

  // Asks the holder of a lock node (full path) to let go (Curator's Revoker.attemptRevoke);
  // false if there is no such node.
  bool request_revoke(const std::string& node_path) const {
    zkl_status s = zkl_client_request_revoke(get(), node_path.c_str());
    if (s == ZKL_NOT_HELD) return false;
    check(s);
    return true;
  }

  // Closes the client now: its holds are lost, later acquires throw ZKL_CLOSED; the session
  // (and its nodes) ends once its Locks are destroyed too.
  void close() { check(zkl_client_close(get())); }

  void set_protocol(Protocol p) { check(zkl_client_set_protocol(get(), static_cast<uint32_t>(p))); }

  void add_auth(const std::string& scheme, const std::string& auth) {
    check(zkl_client_add_auth(get(), scheme.c_str(), auth.c_str()));
  }

  // The ACL of nodes created after the call (creator-only ACLs need add_auth first).
  void set_acl(Acl acl) { check(zkl_client_set_acl(get(), static_cast<uint32_t>(acl))); }

  Lock mutex(const std::string& path) { return make(zkl_mutex_new, path); }

  // Both halves of ONE read-write lock, one participant: {read, write}. While the write half is
  // held the read half may be taken too (downgrade); the reverse throws ZKL_WOULD_DEADLOCK.
  std::pair<Lock, Lock> rwlock(const std::string& path) {
    zkl_lock* r = nullptr;
    zkl_lock* w = nullptr;
    check(zkl_rwlock_new(get(), path.c_str(), &r, &w));
    return {Lock(r), Lock(w)};
  }
  Lock semaphore_mutex(const std::string& path) { return make(zkl_semaphore_mutex_new, path); }
  Lock read_lock(const std::string& path) { return make(zkl_read_lock_new, path); }
  Lock write_lock(const std::string& path) { return make(zkl_write_lock_new, path); }
  Lock simple_lock(const std::string& path) { return make(zkl_simple_lock_new, path); }
  // A participant of a leader election: acquire waits for leadership, is_held says whether it
  // leads now, fencing_token is the term, release relinquishes.
  Lock leader_election(const std::string& path) { return make(zkl_leader_election_new, path); }
  // A semaphore of max_leases leases: each acquire takes one lease, each release returns the
  // most recent one (a handle may hold several).
  Lock semaphore(const std::string& path, uint32_t max_leases) {
    zkl_lock* l = nullptr;
    check(zkl_semaphore_new(get(), path.c_str(), max_leases, &l));
    return Lock(l);
  }

  zkl_client* get() const noexcept { return c_.get(); }

 private:
  Lock make(zkl_status (*ctor)(zkl_client*, const char*, zkl_lock**), const std::string& path) {
    zkl_lock* l = nullptr;
    check(ctor(get(), path.c_str(), &l));
    return Lock(l);
  }

  std::unique_ptr<zkl_client, detail::ClientFree> c_;
};

// Holds a Lock for a scope: acquires in the constructor, releases in the destructor (errors on
// that release are swallowed; call unlock() to see them). Non-copyable, movable. It keeps the
// lock's handle, not the Lock object, so moving the Lock elsewhere does not strand the hold
// (the handle must outlive the guard, as a mutex must outlive std::lock_guard).
class Guard {
 public:
  // Blocks until held.
  explicit Guard(Lock& lock) : lock_(lock.get()) { lock.acquire(); }

  // Waits at most `timeout` (negative: forever); throws Error with ZKL_TIMEOUT if not acquired.
  template <class Rep, class Period>
  Guard(Lock& lock, std::chrono::duration<Rep, Period> timeout) : lock_(lock.get()) {
    check(zkl_lock_acquire(lock.get(), detail::to_ms(timeout)));
  }

  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  Guard(Guard&& other) noexcept : lock_(std::exchange(other.lock_, nullptr)) {}
  Guard& operator=(Guard&& other) noexcept {
    if (this != &other) {
      reset();
      lock_ = std::exchange(other.lock_, nullptr);
    }
    return *this;
  }
  ~Guard() { reset(); }

  // Releases now; throws on failure (e.g. ZKL_LOCK_LOST: the lock had been lost). A second
  // unlock() throws ZKL_NOT_HELD.
  void unlock() {
    zkl_lock* l = std::exchange(lock_, nullptr);
    if (!l) throw Error(ZKL_NOT_HELD, "this guard holds nothing (unlocked or moved from)");
    check(zkl_lock_release(l));
  }

  // Throws Error with ZKL_NOT_HELD once the guard was unlocked or moved from.
  int64_t fencing_token() const {
    if (!lock_) throw Error(ZKL_NOT_HELD, "this guard holds nothing (unlocked or moved from)");
    int64_t t = 0;
    check(zkl_lock_fencing_token(lock_, &t));
    return t;
  }
  bool is_held() const noexcept { return lock_ && zkl_lock_is_held(lock_) == 1; }

 private:
  friend std::optional<Guard> try_lock_for(Lock&, std::chrono::milliseconds);
  struct Adopt {};
  Guard(Lock& lock, Adopt) : lock_(lock.get()) {}

  void reset() noexcept {
    if (lock_) zkl_lock_release(std::exchange(lock_, nullptr));
  }

  zkl_lock* lock_;
};

// A Guard if the lock was acquired within `timeout` (0: try once; negative: forever), else nothing.
inline std::optional<Guard> try_lock_for(Lock& lock, std::chrono::milliseconds timeout) {
  if (!lock.try_acquire_for(timeout)) return std::nullopt;
  return std::optional<Guard>(Guard(lock, Guard::Adopt{}));
}

}  // namespace zklock

#endif  // ZKLOCK_HPP
