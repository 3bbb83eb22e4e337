// A peer process for tests/it/interop.rs: Apache Curator locks on the same paths as zklock.
//
// Usage: CuratorPeer <connect> <path> <lock> <action> <ms> <history> <who> <read_fraction>
//   lock:   mutex (InterProcessMutex) | read | write | rw (InterProcessReadWriteLock halves;
//           rw picks read with probability read_fraction) | semaphore:N (InterProcessSemaphoreV2)
//           | latch (LeaderLatch: held = leading)
//   action: load (hold repeatedly for <ms>) | hold (once, <ms> long) | try (wait at most <ms>)
//           | count (the mutex <ms> times, each enter line ending with the node's czxid)
//           | revocable (mutex made revocable with makeRevocable; hold until a revocation is
//             requested or <ms> passed, then release: prints HELD, REVOKE_REQUESTED or
//             NOT_ASKED, RELEASED) | revoke (Revoker.attemptRevoke on the node <path>: REVOKED)
//           | leader (a latch's getLeader(), not joining: prints LEADER <id> or LEADER none)
// Every hold appends "enter <R|W|S> <who>" after acquiring and "exit <R|W|S> <who>" before
// releasing to <history>, one write per line on an append-mode file (so the file order is a
// valid order of the real events). Prints HELD / RELEASED / ACQUIRED / NOT_ACQUIRED / DONE n.
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorPeer {
    static FileOutputStream history;
    static String who;
    static PeerMutex mutex;
    static CuratorFramework cf;

    /** InterProcessMutex with its node's path readable (getLockPath is protected). */
    static class PeerMutex extends InterProcessMutex {
        PeerMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }
    static InterProcessReadWriteLock rw;
    static InterProcessSemaphoreV2 semaphore;
    static Lease lease;
    static LeaderLatch latch;

    static void append(String event, char kind) throws IOException {
        history.write((event + " " + kind + " " + who + "\n").getBytes(StandardCharsets.UTF_8));
    }

    static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    /** Acquires; waitMs < 0 waits forever. */
    static boolean acquire(String lock, char kind, long waitMs) throws Exception {
        if (lock.equals("latch")) {
            latch.start();
            if (waitMs < 0) {
                latch.await();
                return true;
            }
            if (latch.await(waitMs, TimeUnit.MILLISECONDS)) return true;
            latch.close();
            return false;
        }
        if (kind == 'S') {
            lease = waitMs < 0 ? semaphore.acquire() : semaphore.acquire(waitMs, TimeUnit.MILLISECONDS);
            return lease != null;
        }
        org.apache.curator.framework.recipes.locks.InterProcessLock l =
            lock.equals("mutex") ? mutex : (kind == 'R' ? rw.readLock() : rw.writeLock());
        if (waitMs < 0) {
            l.acquire();
            return true;
        }
        return l.acquire(waitMs, TimeUnit.MILLISECONDS);
    }

    static void release(String lock, char kind) throws Exception {
        if (lock.equals("latch")) {
            latch.close();
        } else if (kind == 'S') {
            semaphore.returnLease(lease);
            lease = null;
        } else if (lock.equals("mutex")) {
            mutex.release();
        } else if (kind == 'R') {
            rw.readLock().release();
        } else {
            rw.writeLock().release();
        }
    }

    static boolean hold(String lock, char kind, long waitMs, long sleepMs, boolean announce) throws Exception {
        if (!acquire(lock, kind, waitMs)) return false;
        append("enter", kind);
        if (announce) say("HELD");
        Thread.sleep(sleepMs);
        append("exit", kind);
        release(lock, kind);
        return true;
    }

    public static void main(String[] a) throws Exception {
        String connect = a[0], path = a[1], lock = a[2], action = a[3];
        long ms = Long.parseLong(a[4]);
        history = new FileOutputStream(a[5], true);
        who = a[6];
        double readFraction = Double.parseDouble(a[7]);
        cf = CuratorFrameworkFactory.builder().connectString(connect)
                .sessionTimeoutMs(6000).connectionTimeoutMs(15000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5)).build();
        cf.start();
        if (!cf.blockUntilConnected(30, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
        char fixed;
        if (lock.startsWith("semaphore:")) {
            semaphore = new InterProcessSemaphoreV2(cf, path, Integer.parseInt(lock.substring(10)));
            fixed = 'S';
        } else if (lock.equals("mutex")) {
            mutex = new PeerMutex(cf, path);
            fixed = 'W';
        } else if (lock.equals("latch")) {
            latch = new LeaderLatch(cf, path, who);
            fixed = 'W';
        } else {
            rw = new InterProcessReadWriteLock(cf, path);
            fixed = lock.equals("read") ? 'R' : 'W';
        }
        switch (action) {
            case "load": {
                Random rnd = new Random(who.hashCode());
                long end = System.nanoTime() + ms * 1_000_000L;
                int n = 0;
                while (System.nanoTime() < end) {
                    char kind = lock.equals("rw") ? (rnd.nextDouble() < readFraction ? 'R' : 'W') : fixed;
                    hold(lock, kind, -1, kind == 'W' ? 3 : 20, false);
                    n++;
                }
                say("DONE " + n);
                break;
            }
            case "count": {
                // <ms> holds of the mutex, each enter line carrying its node's czxid (zklock's
                // fencing token is its node's czxid: comparable across clients).
                say("READY");
                while (!new java.io.File(a[5] + ".go").exists()) Thread.sleep(5);
                for (int i = 0; i < ms; i++) {
                    mutex.acquire();
                    long czxid = cf.checkExists().forPath(mutex.node()).getCzxid();
                    history.write(("enter W " + who + " " + czxid + "\n").getBytes(StandardCharsets.UTF_8));
                    Thread.sleep(5);
                    append("exit", 'W');
                    mutex.release();
                }
                say("DONE " + ms);
                break;
            }
            case "hold":
                hold(lock, fixed, -1, ms, true);
                say("RELEASED");
                break;
            case "try":
                say(hold(lock, fixed, ms, 10, false) ? "ACQUIRED" : "NOT_ACQUIRED");
                break;
            case "revocable": {
                // The listener runs on Curator's event thread; the acquiring thread releases.
                CountDownLatch asked = new CountDownLatch(1);
                mutex.makeRevocable(l -> asked.countDown());
                mutex.acquire();
                append("enter", 'W');
                say("HELD");
                say(asked.await(ms, TimeUnit.MILLISECONDS) ? "REVOKE_REQUESTED" : "NOT_ASKED");
                append("exit", 'W');
                mutex.release();
                say("RELEASED");
                break;
            }
            case "leader": {
                org.apache.curator.framework.recipes.leader.Participant l = latch.getLeader();
                say("LEADER " + (l.isLeader() ? l.getId() : "none"));
                break;
            }
            case "revoke":
                Revoker.attemptRevoke(cf, path);
                say("REVOKED");
                break;
            default:
                throw new IllegalArgumentException("action " + action);
        }
        cf.close();
    }
}
