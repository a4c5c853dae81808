// The Java side of benches/cache.rs: Apache Curator's CuratorCache on the same
// tree and server as zklock's TreeCache.
//
// Classpath: the compiled class, curator-recipes/-framework/-client, guava,
// zookeeper, zookeeper-jute, slf4j-api and slf4j-nop (Debian's packages under
// /usr/share/java).
//
//   java CuratorCacheBench serve <connect string> <root>
//     One CuratorFramework (session timeout 30 s). First line: "ready". Then
//     one command a line on stdin, each answered with one line:
//       start        builds and starts a CuratorCache of <root>, waits for its
//                    initialized event -> ok elapsed_ns E size N
//       quiet <ms>   waits until the cache had no event for <ms>
//                    -> ok events N size S (events since the last quiet)
//       mark         remembers the number of reconnections -> ok reconnects R
//       reconnected <ms>  waits for a reconnection after the mark, then as
//                    quiet <ms> (quiet counted from the reconnection on)
//       quit

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryNTimes;

public class CuratorCacheBench {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[1]).sessionTimeoutMs(30000).connectionTimeoutMs(15000)
            .retryPolicy(new RetryNTimes(100, 100)).build();
        client.start();
        client.blockUntilConnected();
        String root = args[2];
        AtomicLong events = new AtomicLong();
        AtomicLong last = new AtomicLong(System.nanoTime());
        AtomicLong reconnects = new AtomicLong();
        long marked = 0;
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == org.apache.curator.framework.state.ConnectionState.RECONNECTED) {
                last.set(System.nanoTime());
                reconnects.incrementAndGet();
            }
        });
        CuratorCache cache = null;
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w[0].equals("start")) {
                CountDownLatch init = new CountDownLatch(1);
                cache = CuratorCache.build(client, root);
                cache.listenable().addListener(CuratorCacheListener.builder()
                    .forAll((type, old, data) -> { events.incrementAndGet(); last.set(System.nanoTime()); })
                    .forInitialized(init::countDown).build());
                long t = System.nanoTime();
                cache.start();
                init.await();
                System.out.println("ok elapsed_ns " + (System.nanoTime() - t) + " size " + cache.size());
            } else if (w[0].equals("mark")) {
                marked = reconnects.get();
                System.out.println("ok reconnects " + marked);
            } else if (w[0].equals("reconnected") || w[0].equals("quiet")) {
                if (w[0].equals("reconnected")) {
                    while (reconnects.get() <= marked) {
                        Thread.sleep(10);
                    }
                }
                long ms = Long.parseLong(w[1]);
                while ((System.nanoTime() - last.get()) / 1_000_000 < ms) {
                    Thread.sleep(50);
                }
                System.out.println("ok events " + events.getAndSet(0) + " size " + (cache == null ? 0 : cache.size()));
            } else {
                break;
            }
            System.out.flush();
        }
        if (cache != null) cache.close();
        client.close();
    }
}
