"""zklock through its C ABI from Python: the peers' Python driver (harness.py) over the zklock
package of bindings/python (ctypes; every blocking call releases the GIL), as kazoo is driven.
Recipes: lock = Mutex, semaphore = SemaphoreMutex, lease = Semaphore(1), rw = ReadWriteLock."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ["PEERS_DIR"], "common", "python"))
import harness  # noqa: E402
import zklock  # noqa: E402

CONNECT = os.environ.get("ZK_CONNECT", "127.0.0.1:2182")


class ZklockPyAdapter:
    name = "zklock-py"
    version = zklock.version()

    def __init__(self, recipe):
        if recipe not in ("lock", "semaphore", "lease", "rw"):
            raise SystemExit("zklock-py recipes: lock | semaphore | lease | rw")
        self.recipe = recipe
        self.supports_rw = recipe in ("lock", "rw")

    def new_client(self):
        return zklock.Client(CONNECT, session_timeout=10.0)

    def mutex(self, c, path):
        if self.recipe == "semaphore":
            return c.semaphore_mutex(path)
        if self.recipe == "lease":
            return c.semaphore(path, 1)
        if self.recipe == "rw":
            return c.write_lock(path)
        return c.mutex(path)

    def rwlock(self, c, path):
        return c.rwlock(path)

    def notifications(self, c):
        raise NotImplementedError("the binding counts no watch events")

    def cancel(self, m):
        m.cancel()

    def cleanup(self, c, path):
        # zklock's parents are containers: the server deletes them once empty.
        pass

    def close(self, c):
        c.close()


if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1].upper() in ("W4", "W6"):
        harness.log("zklock-py: %s unsupported (no watch-event counter in the binding)" % sys.argv[1])
        sys.exit(3)
    harness.main(ZklockPyAdapter(os.environ.get("BENCH_RECIPE") or "lock"), sys.argv[1:])
