// The Java side of benches/semaphore.rs: Apache Curator's
// InterProcessSemaphoreV2 and InterProcessMutex under the same scenarios as
// zklock's semaphore and dialect mutex.
//
//   java CuratorSemaphoreBench <connect string>
//     Two CuratorFrameworks (session timeout 30 s). First line "ready"; then
//     one answer line per stdin command:
//     <kind> is "semaphore" (InterProcessSemaphoreV2, <max> leases) or
//     "mutex" (InterProcessMutex, <max> ignored).
//       uncontended <kind> <path> <max> <cycles>   one thread, acquire + release
//           -> ok cycles N elapsed_ns E p50_ns P p99_ns Q
//       contended <kind> <path> <max> <holders> <grants>  <holders> threads (own
//           instances, on the two clients alternately), <grants> acquire +
//           release each -> ok grants G elapsed_ns E most M
//     Exits when stdin closes.
import java.io.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorSemaphoreBench {
    /** What one holder's acquire hands back: its release. */
    interface Held {
        void release() throws Exception;
    }

    /** One holder: a semaphore or a mutex instance. */
    interface Holder {
        Held acquire() throws Exception;
    }

    static Holder holder(String kind, CuratorFramework client, String path, int max) {
        if (kind.equals("mutex")) {
            InterProcessMutex m = new InterProcessMutex(client, path);
            return () -> {
                m.acquire();
                return m::release;
            };
        }
        InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, path, max);
        return () -> {
            Lease l = s.acquire();
            return () -> s.returnLease(l);
        };
    }

    public static void main(String[] a) throws Exception {
        CuratorFramework[] clients = new CuratorFramework[2];
        for (int i = 0; i < 2; i++) {
            clients[i] = CuratorFrameworkFactory.newClient(
                    a[0], 30000, 15000, new ExponentialBackoffRetry(50, 10));
            clients[i].start();
            clients[i].blockUntilConnected(30, TimeUnit.SECONDS);
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            try {
                if (w[0].equals("uncontended")) {
                    int max = Integer.parseInt(w[3]), n = Integer.parseInt(w[4]);
                    Holder s = holder(w[1], clients[0], w[2], max);
                    long[] t = new long[n];
                    long start = System.nanoTime();
                    for (int i = 0; i < n; i++) {
                        long c = System.nanoTime();
                        s.acquire().release();
                        t[i] = System.nanoTime() - c;
                    }
                    long elapsed = System.nanoTime() - start;
                    Arrays.sort(t);
                    System.out.println("ok cycles " + n + " elapsed_ns " + elapsed + " p50_ns "
                            + t[n / 2] + " p99_ns " + t[Math.min(n - 1, n * 99 / 100)]);
                } else if (w[0].equals("contended")) {
                    int max = Integer.parseInt(w[3]), holders = Integer.parseInt(w[4]);
                    int grants = Integer.parseInt(w[5]);
                    AtomicInteger holding = new AtomicInteger(), most = new AtomicInteger();
                    CyclicBarrier go = new CyclicBarrier(holders + 1);
                    List<Thread> threads = new ArrayList<>();
                    List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
                    for (int h = 0; h < holders; h++) {
                        Holder s = holder(w[1], clients[h % 2], w[2], max);
                        Thread th = new Thread(() -> {
                            try {
                                go.await();
                                for (int g = 0; g < grants; g++) {
                                    Held l = s.acquire();
                                    most.accumulateAndGet(holding.incrementAndGet(), Math::max);
                                    holding.decrementAndGet();
                                    l.release();
                                }
                            } catch (Throwable e) {
                                errors.add(e);
                            }
                        });
                        th.start();
                        threads.add(th);
                    }
                    long start = System.nanoTime();
                    go.await();
                    for (Thread th : threads) th.join();
                    long elapsed = System.nanoTime() - start;
                    if (!errors.isEmpty()) throw new Exception(errors.get(0));
                    System.out.println("ok grants " + (holders * grants) + " elapsed_ns " + elapsed
                            + " most " + most.get());
                } else {
                    System.out.println("error unknown " + w[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            System.out.flush();
        }
        for (CuratorFramework c : clients) c.close();
    }
}
