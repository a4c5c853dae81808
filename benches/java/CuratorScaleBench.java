// The Java side of benches/scale.rs's side-by-side parts (issue 49): Apache
// Curator 5.4 doing the work zklock does there, one job per process, so that
// the process's memory and threads are the job's (the bench reads
// /proc/<pid>/status between the steps). benches/python/kazoo_scale_bench.py
// speaks the same protocol for kazoo.
//
//   java CuratorScaleBench <connect string> sessions <n>
//   java CuratorScaleBench <connect string> held <n> <root>
//   java CuratorScaleBench <connect string> directory <waiters> <handoffs> <lock znode>
//
// Every job first prints "base" (nothing connected yet) and waits for "go" on
// stdin; then:
//   sessions: opens n CuratorFrameworks (each its own ZooKeeper session, every
//     one connected) -> "ok ms <time to open them all>"; "close" closes them
//     -> "closed ms <time>".
//   held: one CuratorFramework -> "connected heap_kib <live heap after a
//     GC>"; "acquire": it takes n InterProcessMutexes, one on each of
//     <root>/h-0 .. <root>/h-(n-1) (made beforehand), one after the other from
//     one thread -> "ok ms <time> heap_kib <live heap>"; "release" releases
//     them all -> "released ms <time>".
//   directory: one CuratorFramework -> "connected"; "queue": a holder (its
//     own InterProcessMutex) takes the lock znode, then <waiters> threads,
//     each with its own InterProcessMutex on it, queue behind it, started 250
//     at a time (the next 250 once these are queued: each waiter's first
//     listing is of the whole directory, and the server holds every reply of
//     a burst at once) -> "queued ms <time>" once the znode has waiters + 1
//     children; "run": the holder releases and each
//     waiter, as it gets the lock, notes the instant and releases at once,
//     until <handoffs> grants -> "done handoffs <k> p50_us <p> p99_us <q>
//     mean_us <m> total_ms <t>": a hand-off's time is from the previous
//     grant's instant (the holder's release call for the first) to this
//     grant's; the last waiter granted keeps the lock. "exit" closes the
//     session (every waiter's node goes with it) and exits.
// "error <message>" and exit status 1 on failure. Every session has a 30 s
// timeout; the retry policy is ExponentialBackoffRetry(100 ms, 3).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorScaleBench {
    static final int SESSION_MS = 30_000;
    static final int CONNECT_MS = 60_000;
    /** Waiters started at once: the next ones start once these are queued. */
    static final int QUEUE_BATCH = 250;
    static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in));

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void expect(String word) throws Exception {
        String line = IN.readLine();
        if (line == null || !line.trim().equals(word)) {
            throw new IllegalStateException("expected " + word + ", got " + line);
        }
    }

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(SESSION_MS)
            .connectionTimeoutMs(CONNECT_MS)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();
        c.start();
        if (!c.blockUntilConnected(CONNECT_MS, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("no connection to " + connect);
        }
        return c;
    }

    /** The live heap after a GC, in KiB. */
    static long heapKib() {
        Runtime rt = Runtime.getRuntime();
        System.gc();
        return (rt.totalMemory() - rt.freeMemory()) / 1024;
    }

    static double ms(long fromNanos) {
        return (System.nanoTime() - fromNanos) / 1e6;
    }

    public static void main(String[] args) {
        try {
            run(args);
            System.exit(0);
        } catch (Throwable t) {
            say("error " + t);
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        String connect = args[0];
        String job = args[1];
        System.gc();
        say("base");
        expect("go");
        switch (job) {
            case "sessions": {
                int n = Integer.parseInt(args[2]);
                long t = System.nanoTime();
                List<CuratorFramework> cs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    cs.add(client(connect));
                }
                say("ok ms " + ms(t));
                expect("close");
                t = System.nanoTime();
                for (CuratorFramework c : cs) {
                    c.close();
                }
                say("closed ms " + ms(t));
                break;
            }
            case "held": {
                int n = Integer.parseInt(args[2]);
                String root = args[3];
                CuratorFramework c = client(connect);
                say("connected heap_kib " + heapKib());
                expect("acquire");
                List<InterProcessMutex> locks = new ArrayList<>();
                long t = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    InterProcessMutex m = new InterProcessMutex(c, root + "/h-" + i);
                    m.acquire();
                    locks.add(m);
                }
                double took = ms(t);
                say("ok ms " + took + " heap_kib " + heapKib());
                expect("release");
                t = System.nanoTime();
                for (InterProcessMutex m : locks) {
                    m.release();
                }
                say("released ms " + ms(t));
                c.close();
                break;
            }
            case "directory": {
                directory(connect, Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4]);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown job " + job);
        }
    }

    static void directory(String connect, int waiters, int handoffs, String znode) throws Exception {
        CuratorFramework c = client(connect);
        say("connected");
        expect("queue");
        InterProcessMutex holder = new InterProcessMutex(c, znode);
        holder.acquire();
        long[] at = new long[handoffs + 1];
        AtomicInteger granted = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(1);
        long t = System.nanoTime();
        for (int i = 0; i < waiters; i++) {
            InterProcessMutex m = new InterProcessMutex(c, znode);
            Thread th = new Thread(null, () -> {
                try {
                    m.acquire();
                    long now = System.nanoTime();
                    int k = granted.incrementAndGet();
                    if (k <= handoffs) {
                        at[k] = now;
                    }
                    if (k < handoffs) {
                        m.release();
                    } else if (k == handoffs) {
                        done.countDown();
                    }
                } catch (Exception e) {
                    // The session's end, at exit.
                }
            }, "waiter-" + i, 256 * 1024);
            th.setDaemon(true);
            th.start();
            if ((i + 1) % QUEUE_BATCH == 0 || i + 1 == waiters) {
                while (c.getChildren().forPath(znode).size() < i + 2) {
                    Thread.sleep(20);
                }
            }
        }
        say("queued ms " + ms(t));
        expect("run");
        long start = System.nanoTime();
        at[0] = start;
        holder.release();
        if (!done.await(600, TimeUnit.SECONDS)) {
            throw new IllegalStateException("only " + granted.get() + " of " + handoffs + " grants");
        }
        double total = ms(start);
        long[] d = new long[handoffs];
        long sum = 0;
        for (int k = 1; k <= handoffs; k++) {
            d[k - 1] = at[k] - at[k - 1];
            sum += d[k - 1];
        }
        Arrays.sort(d);
        say("done handoffs " + handoffs
            + " p50_us " + d[(handoffs - 1) / 2] / 1e3
            + " p99_us " + d[Math.min(handoffs - 1, (int) Math.ceil(handoffs * 0.99) - 1)] / 1e3
            + " mean_us " + (sum / (double) handoffs) / 1e3
            + " total_ms " + total);
        expect("exit");
        c.close();
    }
}
