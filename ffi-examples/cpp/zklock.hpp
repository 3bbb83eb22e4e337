// zklock.hpp: a header-only C++17 RAII layer over the zklock C API (include/zklock.h).
//
//   zklock::Client client("127.0.0.1:2181");
//   zklock::Lock mutex = client.mutex("/locks/orders");
//   {
//     zklock::Guard guard(mutex);            // acquires (waits forever), releases at scope exit
//     std::cout << guard.fencing_token() << "\n";
//   }
//   if (auto g = zklock::try_lock_for(mutex, std::chrono::seconds(2))) { /* held */ }
//
// Every failing call throws zklock::Error, which carries the zkl_status and the library's
// message. Handles are move-only and free themselves. Thread rules are the C API's: a Client
// may be shared by threads; a Lock is used by one thread at a time, except cancel(), which any
// thread may call; a mutex or read/write half is released on the thread that acquired it.
#ifndef ZKLOCK_HPP
#define ZKLOCK_HPP

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

// A non-OK status from the library, with its message (zkl_last_error_message at the time).
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

// Throws Error unless s is ZKL_OK.
inline void check(zkl_status s) {
  if (s != ZKL_OK) throw Error(s, zkl_last_error_message());
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
inline int64_t to_ms(std::chrono::nanoseconds d) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return ms < 0 ? 0 : static_cast<int64_t>(ms);
}
}  // namespace detail

class Lock;

// One participant in one lock recipe (zkl_lock). Move-only; frees (and so releases) itself.
class Lock {
 public:
  // Takes ownership of a handle made by the C API.
  explicit Lock(zkl_lock* raw) : l_(raw) {}

  // Blocks until held.
  void acquire() { check(zkl_lock_acquire(get(), -1)); }

  // One attempt that never waits: false if the lock is busy.
  bool try_acquire() { return timed(0); }

  // Waits at most `timeout` in all: false if not acquired by then.
  template <class Rep, class Period>
  bool try_acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return timed(detail::to_ms(timeout));
  }

  // Releases one hold (throws Error with ZKL_NOT_HELD if not held).
  void release() { check(zkl_lock_release(get())); }

  // Makes a waiting acquire (on another thread) throw Error with ZKL_CANCELLED.
  void cancel() { check(zkl_lock_cancel(get())); }

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
// that release are swallowed; call unlock() to see them). Non-copyable, movable.
class Guard {
 public:
  // Blocks until held.
  explicit Guard(Lock& lock) : lock_(&lock) { lock.acquire(); }

  // Waits at most `timeout`; throws Error with ZKL_TIMEOUT if not acquired.
  template <class Rep, class Period>
  Guard(Lock& lock, std::chrono::duration<Rep, Period> timeout) : lock_(&lock) {
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

  // Releases now; throws on failure (e.g. ZKL_LOCK_LOST: the lock had been lost).
  void unlock() {
    Lock* l = std::exchange(lock_, nullptr);
    if (l) l->release();
  }

  int64_t fencing_token() const { return lock_->fencing_token(); }
  bool is_held() const noexcept { return lock_ && lock_->is_held(); }

 private:
  friend std::optional<Guard> try_lock_for(Lock&, std::chrono::milliseconds);
  struct Adopt {};
  Guard(Lock& lock, Adopt) : lock_(&lock) {}

  void reset() noexcept {
    if (lock_) zkl_lock_release(std::exchange(lock_, nullptr)->get());
  }

  Lock* lock_;
};

// A Guard if the lock was acquired within `timeout` (0: try once), else nothing.
inline std::optional<Guard> try_lock_for(Lock& lock, std::chrono::milliseconds timeout) {
  if (!lock.try_acquire_for(timeout)) return std::nullopt;
  return std::optional<Guard>(Guard(lock, Guard::Adopt{}));
}

}  // namespace zklock

#endif  // ZKLOCK_HPP
