// The Java side of benches/recipes.rs: Apache Curator's DistributedQueue and
// LeaderLatch, and ZooKeeper's own recipes (DistributedQueue,
// LeaderElectionSupport), under the same scenarios as zklock's queue and
// election, on the same server. Protocol as benches/java/CuratorLockBench.java.
//
// Classpath: the compiled class, curator-recipes/-framework/-client, guava,
// zookeeper, zookeeper-jute, zookeeper-recipes-queue, zookeeper-recipes-election,
// slf4j-api and slf4j-nop (Debian's packages under /usr/share/java).
//
//   java RecipesBench serve <connect string>
//     First line: "ready curator <version> zookeeper-client <version>". Then
//     one command a line, one answer a line ("ok key value ..." or "error ...").
//     Every session has a 30 s timeout; each producer, consumer and candidate
//     has a session of its own. <impl> is curator or zk.
//       queue <impl> <dir> offer <n>       one producer offers n items
//                                          (Curator: put, then flushPuts)
//                                          -> ok items N elapsed_ns E
//       queue <impl> <dir> take <n>        one consumer takes n items already
//                                          there -> ok items N elapsed_ns E
//       queue <impl> <dir> mixed <p> <c> <n>
//                                          p producers offer n items in all
//                                          while c consumers take them
//                                          -> ok items N elapsed_ns E (until
//                                          the last item was taken)
//       succession <impl> <dir> <k>        k + 1 candidates (a session each) offer
//                                          in turn; then k times the leader
//                                          stops and the next is elected (Curator:
//                                          LeaderLatch.close, next await; zk:
//                                          LeaderElectionSupport.stop, next's
//                                          ELECTED_COMPLETE) -> ok successions K
//                                          elapsed_ns E p50_ns P
//       quit

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.leader.LeaderElectionAware;
import org.apache.zookeeper.recipes.leader.LeaderElectionSupport;

public class RecipesBench {
    static final int SESSION_TIMEOUT_MS = 30_000;
    static final int CONNECTION_TIMEOUT_MS = 15_000;
    static final long WAIT_S = 120;
    /** When the last item was taken (System.nanoTime()): a mixed run ends there. */
    static final java.util.concurrent.atomic.AtomicLong LAST_TAKE =
            new java.util.concurrent.atomic.AtomicLong();

    static int took(AtomicInteger taken) {
        int t = taken.incrementAndGet();
        LAST_TAKE.set(System.nanoTime());
        return t;
    }

    final String connect;

    RecipesBench(String connect) {
        this.connect = connect;
    }

    CuratorFramework curator() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, SESSION_TIMEOUT_MS,
                CONNECTION_TIMEOUT_MS, new RetryOneTime(100));
        c.start();
        if (!c.blockUntilConnected(CONNECTION_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("Curator did not connect");
        }
        return c;
    }

    ZooKeeper zookeeper() throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, SESSION_TIMEOUT_MS, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(CONNECTION_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("ZooKeeper did not connect");
        }
        return zk;
    }

    static final QueueSerializer<byte[]> BYTES = new QueueSerializer<byte[]>() {
        public byte[] serialize(byte[] item) {
            return item;
        }

        public byte[] deserialize(byte[] bytes) {
            return bytes;
        }
    };

    static byte[] item(int producer, int i) {
        return ("p" + producer + "-" + i).getBytes(StandardCharsets.UTF_8);
    }

    /** A producer or a consumer with a session of its own. */
    interface Role extends AutoCloseable {
        /** Offers items [from, to) of producer p. */
        default void offer(int p, int from, int to) throws Exception {
            throw new UnsupportedOperationException();
        }

        /** Takes items until `taken` reaches n (shared by every consumer). */
        default void take(AtomicInteger taken, int n) throws Exception {
            throw new UnsupportedOperationException();
        }
    }

    Role curatorProducer(String dir) throws Exception {
        CuratorFramework c = curator();
        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> q =
                QueueBuilder.builder(c, null, BYTES, dir).buildQueue();
        q.start();
        return new Role() {
            public void offer(int p, int from, int to) throws Exception {
                for (int i = from; i < to; i++) {
                    q.put(item(p, i));
                }
                q.flushPuts(WAIT_S, TimeUnit.SECONDS);
            }

            public void close() throws Exception {
                q.close();
                c.close();
            }
        };
    }

    /**
     * Curator's consumer is pushed items by the queue's own thread: take()
     * starts the queue and waits until n items were taken (by all consumers).
     */
    Role curatorConsumer(String dir, AtomicInteger taken, int n, CountDownLatch done)
            throws Exception {
        CuratorFramework c = curator();
        QueueConsumer<byte[]> consumer = new QueueConsumer<byte[]>() {
            public void consumeMessage(byte[] message) {
                if (took(taken) >= n) {
                    done.countDown();
                }
            }

            public void stateChanged(CuratorFramework client, ConnectionState state) {}
        };
        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> q =
                QueueBuilder.builder(c, consumer, BYTES, dir).buildQueue();
        return new Role() {
            public void take(AtomicInteger t, int m) throws Exception {
                q.start();
                if (!done.await(WAIT_S, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("Curator consumers took " + taken.get());
                }
            }

            public void close() throws Exception {
                q.close();
                c.close();
            }
        };
    }

    Role zkRole(String dir) throws Exception {
        ZooKeeper zk = zookeeper();
        org.apache.zookeeper.recipes.queue.DistributedQueue q =
                new org.apache.zookeeper.recipes.queue.DistributedQueue(zk, dir,
                        ZooDefs.Ids.OPEN_ACL_UNSAFE);
        return new Role() {
            public void offer(int p, int from, int to) throws Exception {
                for (int i = from; i < to; i++) {
                    q.offer(item(p, i));
                }
            }

            public void take(AtomicInteger taken, int n) throws Exception {
                // take() blocks without bound: poll, and take() only while
                // items are still due (a consumer left blocked is ended by
                // closing its session).
                while (taken.get() < n) {
                    if (q.poll() != null) {
                        took(taken);
                    } else if (taken.get() < n) {
                        byte[] got = takeBounded(q, taken, n);
                        if (got != null) {
                            took(taken);
                        }
                    }
                }
            }

            public void close() throws Exception {
                zk.close();
            }
        };
    }

    /** The recipe's take(), ended (null) once n items were taken by others. */
    static byte[] takeBounded(org.apache.zookeeper.recipes.queue.DistributedQueue q,
            AtomicInteger taken, int n) throws Exception {
        final byte[][] out = new byte[1][];
        final Exception[] err = new Exception[1];
        Thread t = new Thread(() -> {
            try {
                out[0] = q.take();
            } catch (InterruptedException e) {
                // ended below
            } catch (Exception e) {
                err[0] = e;
            }
        });
        t.setDaemon(true);
        t.start();
        while (t.isAlive()) {
            t.join(50);
            if (taken.get() >= n && t.isAlive()) {
                t.interrupt();
                t.join(1000);
                return out[0];
            }
        }
        if (err[0] != null) {
            throw err[0];
        }
        return out[0];
    }

    String queue(String impl, String dir, String what, String[] f) throws Exception {
        boolean curator = impl.equals("curator");
        switch (what) {
            case "offer": {
                int n = Integer.parseInt(f[4]);
                try (Role r = curator ? curatorProducer(dir) : zkRole(dir)) {
                    long t0 = System.nanoTime();
                    r.offer(0, 0, n);
                    return "ok items " + n + " elapsed_ns " + (System.nanoTime() - t0);
                }
            }
            case "take": {
                int n = Integer.parseInt(f[4]);
                AtomicInteger taken = new AtomicInteger();
                CountDownLatch done = new CountDownLatch(1);
                try (Role r = curator ? curatorConsumer(dir, taken, n, done) : zkRole(dir)) {
                    long t0 = System.nanoTime();
                    r.take(taken, n);
                    return "ok items " + taken.get() + " elapsed_ns " + (System.nanoTime() - t0);
                }
            }
            case "mixed": {
                int p = Integer.parseInt(f[4]);
                int c = Integer.parseInt(f[5]);
                int n = Integer.parseInt(f[6]);
                AtomicInteger taken = new AtomicInteger();
                CountDownLatch done = new CountDownLatch(1);
                List<Role> producers = new ArrayList<>();
                List<Role> consumers = new ArrayList<>();
                try {
                    for (int i = 0; i < p; i++) {
                        producers.add(curator ? curatorProducer(dir) : zkRole(dir));
                    }
                    for (int i = 0; i < c; i++) {
                        consumers.add(curator ? curatorConsumer(dir, taken, n, done) : zkRole(dir));
                    }
                    List<Thread> threads = new ArrayList<>();
                    List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
                    long t0 = System.nanoTime();
                    for (int i = 0; i < c; i++) {
                        Role r = consumers.get(i);
                        threads.add(new Thread(() -> {
                            try {
                                r.take(taken, n);
                            } catch (Exception e) {
                                errors.add(e);
                            }
                        }));
                    }
                    for (int i = 0; i < p; i++) {
                        Role r = producers.get(i);
                        int id = i;
                        int from = n * i / p;
                        int to = n * (i + 1) / p;
                        threads.add(new Thread(() -> {
                            try {
                                r.offer(id, from, to);
                            } catch (Exception e) {
                                errors.add(e);
                            }
                        }));
                    }
                    for (Thread t : threads) {
                        t.start();
                    }
                    for (Thread t : threads) {
                        t.join();
                    }
                    long elapsed = LAST_TAKE.get() - t0;
                    if (!errors.isEmpty()) {
                        throw errors.get(0);
                    }
                    return "ok items " + taken.get() + " elapsed_ns " + elapsed;
                } finally {
                    for (Role r : producers) {
                        r.close();
                    }
                    for (Role r : consumers) {
                        r.close();
                    }
                }
            }
            default:
                throw new IllegalArgumentException("queue " + what + "?");
        }
    }

    String succession(String impl, String dir, int k) throws Exception {
        long[] times = new long[k];
        List<AutoCloseable> sessions = new ArrayList<>();
        try {
            if (impl.equals("curator")) {
                List<LeaderLatch> latches = new ArrayList<>();
                for (int i = 0; i <= k; i++) {
                    CuratorFramework c = curator();
                    sessions.add(c);
                    LeaderLatch l = new LeaderLatch(c, dir, "c" + i);
                    l.start();
                    long end = System.nanoTime() + WAIT_S * 1_000_000_000L;
                    while (l.getOurPath() == null && System.nanoTime() < end) {
                        Thread.sleep(1);
                    }
                    latches.add(l);
                }
                if (!latches.get(0).await(WAIT_S, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("no first leader");
                }
                long t0 = System.nanoTime();
                for (int i = 0; i < k; i++) {
                    long s = System.nanoTime();
                    latches.get(i).close();
                    if (!latches.get(i + 1).await(WAIT_S, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("candidate " + (i + 1) + " not elected");
                    }
                    times[i] = System.nanoTime() - s;
                }
                long elapsed = System.nanoTime() - t0;
                latches.get(k).close();
                return done(k, elapsed, times);
            }
            List<LeaderElectionSupport> cands = new ArrayList<>();
            List<CountDownLatch> elected = new ArrayList<>();
            for (int i = 0; i <= k; i++) {
                ZooKeeper zk = zookeeper();
                sessions.add(zk);
                LeaderElectionSupport s = new LeaderElectionSupport();
                s.setZooKeeper(zk);
                s.setRootNodeName(dir);
                s.setHostName("c" + i);
                CountDownLatch e = new CountDownLatch(1);
                s.addListener(new LeaderElectionAware() {
                    public void onElectionEvent(LeaderElectionSupport.EventType ev) {
                        if (ev == LeaderElectionSupport.EventType.ELECTED_COMPLETE) {
                            e.countDown();
                        }
                    }
                });
                s.start(); // determines its place before returning
                cands.add(s);
                elected.add(e);
            }
            if (!elected.get(0).await(WAIT_S, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no first leader");
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < k; i++) {
                long s = System.nanoTime();
                cands.get(i).stop();
                if (!elected.get(i + 1).await(WAIT_S, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("candidate " + (i + 1) + " not elected");
                }
                times[i] = System.nanoTime() - s;
            }
            long elapsed = System.nanoTime() - t0;
            cands.get(k).stop();
            return done(k, elapsed, times);
        } finally {
            for (AutoCloseable c : sessions) {
                c.close();
            }
        }
    }

    static String done(int k, long elapsed, long[] times) {
        long[] sorted = times.clone();
        java.util.Arrays.sort(sorted);
        return "ok successions " + k + " elapsed_ns " + elapsed + " p50_ns " + sorted[k / 2];
    }

    String handle(String[] f) throws Exception {
        switch (f[0]) {
            case "queue":
                return queue(f[1], f[2], f[3], f);
            case "succession":
                return succession(f[1], f[2], Integer.parseInt(f[3]));
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    static String curatorVersion() {
        try (java.io.InputStream in = LeaderLatch.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            java.util.Properties p = new java.util.Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2 || !args[0].equals("serve")) {
            System.err.println("usage: RecipesBench serve <connect string>");
            System.exit(2);
        }
        RecipesBench b = new RecipesBench(args[1]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
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
                reply = b.handle(line.split("\\s+"));
            } catch (Throwable e) {
                reply = "error " + String.valueOf(e).replace('\n', ' ');
            }
            System.out.println(reply);
            System.out.flush();
        }
        System.exit(0);
    }
}
