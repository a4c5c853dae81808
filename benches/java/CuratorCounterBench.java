// The Java side of benches/counter.rs: Apache Curator's DistributedAtomicLong
// and SharedCount incremented by several threads, each with a session of its
// own, on the same server as zklock's counters.
//
// Classpath: the compiled class, curator-recipes/-framework/-client, guava,
// zookeeper, zookeeper-jute, slf4j-api and slf4j-nop (Debian's packages under
// /usr/share/java).
//
//   java CuratorCounterBench serve <connect string> <root>
//     First line: "ready". Then one command a line on stdin, each answered
//     with one line:
//       dal <threads> <per thread>     DistributedAtomicLong.increment() (the
//                                      optimistic tries retried without sleep,
//                                      RetryNTimes(1000, 0)) on <root>/dal-<threads>
//       shared <threads> <per thread>  SharedCount: getVersionedValue() and
//                                      trySetCount(+1) until it succeeds, on
//                                      <root>/shared-<threads>
//         connects one session a thread and makes the counters -> armed
//       go     runs the armed increments
//         -> ok elapsed_ns E increments N retries R failed F
//       close  closes the sessions -> closed
//       quit

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;

public class CuratorCounterBench {
    static String connect;

    static CuratorFramework client() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(connect).sessionTimeoutMs(30000).connectionTimeoutMs(15000)
            .retryPolicy(new RetryNTimes(100, 100)).build();
        c.start();
        c.blockUntilConnected();
        return c;
    }

    public static void main(String[] args) throws Exception {
        connect = args[1];
        String root = args[2];
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w[0].equals("quit")) {
                break;
            }
            boolean dal = w[0].equals("dal");
            int threads = Integer.parseInt(w[1]);
            int each = Integer.parseInt(w[2]);
            String path = root + "/" + w[0] + "-" + threads;
            AtomicLong retries = new AtomicLong();
            AtomicLong failed = new AtomicLong();
            AtomicLong done = new AtomicLong();
            List<CuratorFramework> clients = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                clients.add(client());
            }
            CyclicBarrier armed = new CyclicBarrier(threads + 1);
            CyclicBarrier go = new CyclicBarrier(threads + 1);
            CyclicBarrier end = new CyclicBarrier(threads + 1);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                CuratorFramework c = clients.get(t);
                Thread th = new Thread(() -> {
                    try {
                        if (dal) {
                            DistributedAtomicLong counter =
                                new DistributedAtomicLong(c, path, new RetryNTimes(1000, 0));
                            armed.await();
                            go.await();
                            for (int i = 0; i < each; i++) {
                                AtomicValue<Long> v = counter.increment();
                                retries.addAndGet(v.getStats().getOptimisticTries() - 1);
                                if (v.succeeded()) {
                                    done.incrementAndGet();
                                } else {
                                    failed.incrementAndGet();
                                }
                            }
                        } else {
                            SharedCount counter = new SharedCount(c, path, 0);
                            counter.start();
                            armed.await();
                            go.await();
                            for (int i = 0; i < each; i++) {
                                while (true) {
                                    VersionedValue<Integer> v = counter.getVersionedValue();
                                    if (counter.trySetCount(v, v.getValue() + 1)) {
                                        break;
                                    }
                                    retries.incrementAndGet();
                                }
                                done.incrementAndGet();
                            }
                            counter.close();
                        }
                        end.await();
                    } catch (Exception e) {
                        e.printStackTrace();
                        System.exit(1);
                    }
                });
                th.start();
                workers.add(th);
            }
            armed.await();
            System.out.println("armed");
            System.out.flush();
            in.readLine(); // go
            go.await();
            long t0 = System.nanoTime();
            end.await();
            long elapsed = System.nanoTime() - t0;
            for (Thread th : workers) {
                th.join();
            }
            System.out.println("ok elapsed_ns " + elapsed + " increments " + done.get()
                + " retries " + retries.get() + " failed " + failed.get());
            System.out.flush();
            in.readLine(); // close
            for (CuratorFramework c : clients) {
                c.close();
            }
            System.out.println("closed");
            System.out.flush();
        }
    }
}
