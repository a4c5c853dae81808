// The Java side of benches/compare.rs: Apache Curator's InterProcessMutex and
// InterProcessReadWriteLock (and, for reference, ZooKeeper's own recipe
// WriteLock) under the same scenarios as zklock's locks, on the same server.
//
// Classpath: the compiled class, curator-recipes/-framework/-client, guava,
// zookeeper, zookeeper-jute, zookeeper-recipes-lock, slf4j-api and slf4j-nop
// (all from Debian's packages under /usr/share/java).
//
//   java CuratorLockBench serve <connect string> <root>
//     One CuratorFramework (session timeout 30 s). Reads one command a line on
//     stdin and answers each with one line: "ok key value key value ..." or
//     "error <message>". First line: "ready curator <version> zookeeper-client
//     <version>". The lock znodes are <root>/uncontended-mutex,
//     uncontended-rw, uncontended-recipe, threads, readers and
//     handoff; the caller makes them beforehand (so no request of a measured
//     command creates a parent).
//       uncontended <form> <cycles>  one thread, acquire + release in a loop;
//                                    form: mutex | rw-write | rw-read | zk-recipe
//                                    | perfect:<name>:<data bytes> (the perfect
//                                    client: the plain ZooKeeper client of
//                                    Curator's session making zklock's requests,
//                                    no lock logic; see PerfectLock)
//                                    -> ok cycles N elapsed_ns E p50_ns P p99_ns Q
//       threads <n> <ms>             n threads, each its own InterProcessMutex on
//                                    one lock znode, acquire + release until <ms>
//                                    have passed -> ok grants G elapsed_ns E
//       readers <n> <ms>             n threads, each its own InterProcessReadWriteLock
//                                    on one znode, read lock in a loop
//                                    -> ok grants G elapsed_ns E
//       handoff <k>                  two InterProcessMutex instances (two threads)
//                                    pass the lock back and forth k times each; a
//                                    holder releases only once the other's watch on
//                                    its node is set (seen through Curator's
//                                    AdvancedTracerDriver: the getData-with-watcher
//                                    trace, committed when the server answered)
//                                    -> ok handoffs H elapsed_ns E
//       quit
//     The recipe (zk-recipe) runs uncontended only, on Curator's session: under
//     contention its lock() can return false without a watch set (when the node
//     it would wait for is deleted between its getChildren and its exists), and
//     the waiter is never granted; it also knows its own node by the session id,
//     so two instances of one session on one lock znode take each other's node.
//
//   java CuratorLockBench worker <connect string> <lock znode>
//     One process of the multi-process scenario: its own CuratorFramework, one
//     InterProcessMutex. Prints "ready"; then for each "go <ms>" line on stdin,
//     acquire + release until <ms> have passed and print "done grants <n>
//     elapsed_ns <ns>"; for "warm <znode> <cycles>", the JIT's warm-up, <cycles>
//     cycles of another InterProcessMutex on <znode> (which one other worker
//     shares, so that the queued path warms up too), answered the same way. Ends (closing its session) at end of input or on
//     anything else.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.drivers.AdvancedTracerDriver;
import org.apache.curator.drivers.EventTrace;
import org.apache.curator.drivers.OperationTrace;
import org.apache.curator.drivers.TracerDriver;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.lock.LockListener;
import org.apache.zookeeper.recipes.lock.WriteLock;

public class CuratorLockBench {
    /** The session timeout of every session of the benchmark (zklock's too). */
    static final int SESSION_TIMEOUT_MS = 30_000;
    static final int CONNECTION_TIMEOUT_MS = 15_000;

    /** acquire + release, whatever the library. */
    interface Lock {
        void acquire() throws Exception;

        void release() throws Exception;

        default void close() throws Exception {}
    }

    static Lock curator(InterProcessMutex m) {
        return new Lock() {
            public void acquire() throws Exception {
                m.acquire();
            }

            public void release() throws Exception {
                m.release();
            }
        };
    }

    /**
     * ZooKeeper's recipe WriteLock, made blocking: lock() then wait for the
     * listener's lockAcquired (it is called for an immediate grant too).
     */
    static class RecipeLock implements Lock {
        final WriteLock lock;
        final Semaphore granted = new Semaphore(0);

        RecipeLock(ZooKeeper zk, String dir) {
            this.lock = new WriteLock(zk, dir, ZooDefs.Ids.OPEN_ACL_UNSAFE, new LockListener() {
                public void lockAcquired() {
                    granted.release();
                }

                public void lockReleased() {}
            });
        }

        public void acquire() throws Exception {
            lock.lock();
            if (!granted.tryAcquire(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("recipe lock not granted within 60 s");
            }
        }

        public void release() {
            lock.unlock();
        }

        public void close() {
            lock.close();
        }
    }

    /**
     * The perfect client (as benches/java/RawCycleBench.java): a lock's
     * requests with no lock logic. acquire: an asynchronous create2 of an
     * ephemeral sequential <dir>/<name> with <len> bytes, getChildren(dir)
     * right behind it (the same 2 round trips as zklock's write lock, the same
     * sizes), the listing not looked at; release: delete.
     */
    static class PerfectLock implements Lock {
        final ZooKeeper zk;
        final String dir;
        final String prefix;
        final byte[] data;
        final BlockingQueue<Object> created = new LinkedBlockingQueue<>();
        String node;

        PerfectLock(ZooKeeper zk, String dir, String name, int len) {
            this.zk = zk;
            this.dir = dir;
            this.prefix = dir + "/" + name;
            this.data = new byte[len];
            Arrays.fill(this.data, (byte) 'x');
        }

        public void acquire() throws Exception {
            zk.create(prefix, data, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL,
                    (rc, path, ctx, name, stat) -> created.add(rc == 0 ? name
                            : KeeperException.create(KeeperException.Code.get(rc), path)),
                    null);
            zk.getChildren(dir, false);
            Object r = created.poll(60, TimeUnit.SECONDS);
            if (r instanceof Exception) {
                throw (Exception) r;
            }
            if (r == null) {
                throw new IllegalStateException("create not answered within 60 s");
            }
            node = (String) r;
        }

        public void release() throws Exception {
            zk.delete(node, -1);
        }
    }

    static CuratorFramework curatorClient(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, SESSION_TIMEOUT_MS,
                CONNECTION_TIMEOUT_MS, new RetryOneTime(100));
        c.start();
        if (!c.blockUntilConnected(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Curator not connected to " + connect);
        }
        return c;
    }

    // ------------------------------------------------------------------
    // serve
    // ------------------------------------------------------------------

    final String root;
    final CuratorFramework client;
    /** The uncontended lock of each form, kept across rounds (like zklock's). */
    final Map<String, Lock> uncontended = new HashMap<>();
    /** The original tracer, put back after a hand-off. */
    final TracerDriver defaultTracer;

    CuratorLockBench(String connect, String root) throws Exception {
        this.root = root;
        this.client = curatorClient(connect);
        this.defaultTracer = client.getZookeeperClient().getTracerDriver();
    }

    Lock uncontendedLock(String form) throws Exception {
        Lock l = uncontended.get(form);
        if (l != null) {
            return l;
        }
        switch (form) {
            case "mutex":
                l = curator(new InterProcessMutex(client, root + "/uncontended-mutex"));
                break;
            case "rw-write":
                l = curator(new InterProcessReadWriteLock(client, root + "/uncontended-rw").writeLock());
                break;
            case "rw-read":
                l = curator(new InterProcessReadWriteLock(client, root + "/uncontended-rw").readLock());
                break;
            case "zk-recipe":
                l = new RecipeLock(client.getZookeeperClient().getZooKeeper(),
                        root + "/uncontended-recipe");
                break;
            default:
                String[] perfect = form.split(":");
                if (perfect.length != 3 || !perfect[0].equals("perfect")) {
                    throw new IllegalArgumentException("unknown form " + form);
                }
                l = new PerfectLock(client.getZookeeperClient().getZooKeeper(),
                        root + "/uncontended-perfect", perfect[1], Integer.parseInt(perfect[2]));
        }
        uncontended.put(form, l);
        return l;
    }

    String runUncontended(String form, int cycles) throws Exception {
        Lock l = uncontendedLock(form);
        long[] t = new long[cycles];
        long started = System.nanoTime();
        for (int i = 0; i < cycles; i++) {
            long s = System.nanoTime();
            l.acquire();
            l.release();
            t[i] = System.nanoTime() - s;
        }
        long elapsed = System.nanoTime() - started;
        Arrays.sort(t);
        return "ok cycles " + cycles + " elapsed_ns " + elapsed + " p50_ns "
                + t[(int) Math.round((cycles - 1) * 0.5)] + " p99_ns "
                + t[(int) Math.round((cycles - 1) * 0.99)];
    }

    /** n threads, one lock each, looping for ms; grants and elapsed. */
    static String loop(List<Lock> locks, long ms, boolean exclusive) throws Exception {
        int n = locks.size();
        CyclicBarrier barrier = new CyclicBarrier(n + 1);
        AtomicLong grants = new AtomicLong();
        AtomicInteger inside = new AtomicInteger();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (Lock l : locks) {
            Thread th = new Thread(() -> {
                try {
                    barrier.await();
                    long deadline = System.nanoTime() + ms * 1_000_000L;
                    long mine = 0;
                    while (System.nanoTime() < deadline) {
                        l.acquire();
                        if (inside.incrementAndGet() != 1 && exclusive) {
                            throw new IllegalStateException("two holders of an exclusive lock");
                        }
                        inside.decrementAndGet();
                        mine++;
                        l.release();
                    }
                    grants.addAndGet(mine);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            th.start();
            threads.add(th);
        }
        barrier.await();
        long started = System.nanoTime();
        for (Thread th : threads) {
            th.join();
        }
        long elapsed = System.nanoTime() - started;
        if (failure.get() != null) {
            throw new Exception("a bench thread failed: " + failure.get(), failure.get());
        }
        return "ok grants " + grants.get() + " elapsed_ns " + elapsed;
    }

    String runThreads(int n, long ms) throws Exception {
        List<Lock> locks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            locks.add(curator(new InterProcessMutex(client, root + "/threads")));
        }
        return loop(locks, ms, true);
    }

    String runReaders(int n, long ms) throws Exception {
        List<Lock> locks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            locks.add(curator(new InterProcessReadWriteLock(client, root + "/readers").readLock()));
        }
        return loop(locks, ms, false);
    }

    /** Tells the other hand-off thread when this one's watch is set. */
    static final class QueuedTracer extends AdvancedTracerDriver {
        final Map<Thread, BlockingQueue<Boolean>> tellOther = new HashMap<>();

        @Override
        public void addTrace(OperationTrace trace) {
            // LockInternals waits on its predecessor after a foreground getData
            // with a watcher; the trace is committed once the server answered.
            if (trace.getName().equals("GetDataBuilderImpl-Foreground") && trace.isWithWatcher()
                    && trace.getReturnCode() == 0) {
                BlockingQueue<Boolean> q = tellOther.get(Thread.currentThread());
                if (q != null) {
                    q.add(Boolean.TRUE);
                }
            }
        }

        @Override
        public void addEvent(EventTrace trace) {}
    }

    String runHandoff(int k) throws Exception {
        // The lock znode exists (benches/compare.rs makes every lock znode
        // beforehand, outside the request windows).
        String path = root + "/handoff";
        InterProcessMutex a = new InterProcessMutex(client, path);
        InterProcessMutex b = new InterProcessMutex(client, path);
        // A message to a thread: true = "my watch is set: release", false = "I am done".
        BlockingQueue<Boolean> toA = new LinkedBlockingQueue<>();
        BlockingQueue<Boolean> toB = new LinkedBlockingQueue<>();
        QueuedTracer tracer = new QueuedTracer();
        CyclicBarrier barrier = new CyclicBarrier(3);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread ta = handoffThread(a, k, toA, toB, barrier, failure);
        Thread tb = handoffThread(b, k, toB, toA, barrier, failure);
        tracer.tellOther.put(ta, toB);
        tracer.tellOther.put(tb, toA);
        client.getZookeeperClient().setTracerDriver(tracer);
        long started;
        try {
            ta.start();
            tb.start();
            barrier.await();
            started = System.nanoTime();
            ta.join();
            tb.join();
        } finally {
            client.getZookeeperClient().setTracerDriver(defaultTracer);
        }
        long elapsed = System.nanoTime() - started;
        if (failure.get() != null) {
            throw new Exception("a hand-off thread failed: " + failure.get(), failure.get());
        }
        return "ok handoffs " + (2L * k - 1) + " elapsed_ns " + elapsed;
    }

    static Thread handoffThread(InterProcessMutex lock, int k, BlockingQueue<Boolean> mine,
            BlockingQueue<Boolean> other, CyclicBarrier barrier, AtomicReference<Throwable> failure) {
        return new Thread(() -> {
            try {
                barrier.await();
                boolean otherDone = false;
                for (int i = 0; i < k; i++) {
                    lock.acquire();
                    if (!otherDone) {
                        Boolean m = mine.poll(30, TimeUnit.SECONDS);
                        if (m == null) {
                            throw new IllegalStateException("hand-off: no word from the other thread");
                        }
                        otherDone = !m;
                    }
                    lock.release();
                }
                other.add(Boolean.FALSE);
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
                other.add(Boolean.FALSE);
            }
        });
    }

    String handle(String[] f) throws Exception {
        switch (f[0]) {
            case "uncontended":
                return runUncontended(f[1], Integer.parseInt(f[2]));
            case "threads":
                return runThreads(Integer.parseInt(f[1]), Long.parseLong(f[2]));
            case "readers":
                return runReaders(Integer.parseInt(f[1]), Long.parseLong(f[2]));
            case "handoff":
                return runHandoff(Integer.parseInt(f[1]));
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    /** Curator's version, from the recipes jar's Maven properties. */
    static String curatorVersion() {
        try (java.io.InputStream in = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            java.util.Properties p = new java.util.Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        // "ready curator <version> zookeeper-client <version>" (no spaces inside).
        System.out.println("ready curator " + curatorVersion() + " zookeeper-client "
                + org.apache.zookeeper.Version.getFullVersion().split("[ ,]")[0]);
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            String reply;
            try {
                reply = handle(line.split("\\s+"));
            } catch (Throwable e) {
                reply = "error " + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(reply);
            System.out.flush();
        }
        for (Lock l : uncontended.values()) {
            l.close();
        }
        client.close();
    }

    // ------------------------------------------------------------------
    // worker
    // ------------------------------------------------------------------

    static void worker(String connect, String path) throws Exception {
        CuratorFramework client = curatorClient(connect);
        InterProcessMutex lock = new InterProcessMutex(client, path);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f[0].equals("warm") && f.length == 3) {
                InterProcessMutex warm = new InterProcessMutex(client, f[1]);
                int cycles = Integer.parseInt(f[2]);
                long started = System.nanoTime();
                for (int i = 0; i < cycles; i++) {
                    warm.acquire();
                    warm.release();
                }
                System.out.println("done grants " + cycles + " elapsed_ns " + (System.nanoTime() - started));
                System.out.flush();
                continue;
            }
            if (!f[0].equals("go") || f.length != 2) {
                break;
            }
            long ms = Long.parseLong(f[1]);
            long started = System.nanoTime();
            long deadline = started + ms * 1_000_000L;
            long grants = 0;
            while (System.nanoTime() < deadline) {
                lock.acquire();
                grants++;
                lock.release();
            }
            System.out.println("done grants " + grants + " elapsed_ns " + (System.nanoTime() - started));
            System.out.flush();
        }
        client.close();
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 3 && args[0].equals("serve")) {
            new CuratorLockBench(args[1], args[2]).serve();
        } else if (args.length == 3 && args[0].equals("worker")) {
            worker(args[1], args[2]);
        } else {
            System.err.println("usage: CuratorLockBench serve <connect> <root> | worker <connect> <lock znode>");
            System.exit(2);
        }
    }
}
