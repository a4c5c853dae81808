// The Curator side of benches/storm.rs: a fleet of CuratorFramework clients in
// one JVM, each holding or waiting on a write lock (InterProcessReadWriteLock's
// writeLock), with a CuratorCache of the tree and a single-node CuratorCache of
// the tracked node (Curator 5's replacement for NodeCache), through a leader kill
// or a cut of one member's clients.
//
// Classpath: the compiled class, curator-recipes/-framework/-client, guava,
// zookeeper, zookeeper-jute, slf4j-api and slf4j-nop (Debian's packages under
// /usr/share/java).
//
//   java CuratorStormFleet <connect string> <root> <marker dir>
//
// The storm fleet's line protocol (the same for benches/python/kazoo_storm_fleet.py
// and for zklock's fleet inside benches/storm.rs). Times <t> are wall-clock
// nanoseconds since the epoch (comparable across the processes of one machine).
// Commands on stdin, one a line:
//   start <n> <clients per lock>
//       connects n clients (session timeout 30 s); client i starts a cache of
//       <root>/tree and a tracker of <root>/tracked, then (once every cache is
//       loaded) a thread that acquires the write lock <root>/locks/l<i / per-lock>.
//       Answers "ready" once every cache and tracker is loaded and every lock
//       thread runs (the caller sees the lock nodes on the server).
//   expect <stamp> <created> <deleted>
//       from now on a client is current when its cache has <root>/tree/d0/n0 with
//       data <stamp>, has <created>, lacks <deleted>, and its tracker has <stamp>;
//       each client says so once ("current").
//   release
//       every holder releases, every waiter releases as soon as it is granted;
//       "released" when every client had the lock once and released it.
//   quit (or end of input): closes everything and exits.
// Lines it prints besides "ready" and "released":
//   conn <i> down|up|lost <t>       client i's connection state (SUSPENDED,
//                                   RECONNECTED, LOST)
//   lock <i> acquired|indoubt|restored|lost|released <t>
//                                   what client i's holder is told (Curator's lock
//                                   has no events of its own: a holder learns from
//                                   the connection state); a holder told lost
//                                   removes its marker file
//   current <i> <t>                 client i's cache and tracker are current
//   overlap <i> <lock>              client i was granted a lock whose marker file
//                                   another holder still had (mutual exclusion broken)
//   error <message>

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;

public class CuratorStormFleet {
    static final Object OUT = new Object();

    static void say(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static long now() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static volatile String[] expected = null; // stamp, created, deleted
    static volatile boolean releasing = false;

    static class Member {
        final int i;
        final CuratorFramework client;
        final CuratorCache cache;
        final CuratorCache tracker;
        final AtomicBoolean holding = new AtomicBoolean();
        volatile File marker;
        volatile String[] reportedFor = null;
        Thread thread;

        Member(int i, CuratorFramework client, CuratorCache cache, CuratorCache tracker) {
            this.i = i;
            this.client = client;
            this.cache = cache;
            this.tracker = tracker;
        }
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String root = args[1];
        File markers = new File(args[2]);
        List<Member> members = new ArrayList<>();
        AtomicInteger released = new AtomicInteger();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Thread checker = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w[0].equals("start")) {
                int n = Integer.parseInt(w[1]);
                int perLock = Integer.parseInt(w[2]);
                CountDownLatch loaded = new CountDownLatch(2 * n);
                for (int i = 0; i < n; i++) {
                    final int id = i;
                    CuratorFramework client = CuratorFrameworkFactory.builder()
                        .connectString(connect).sessionTimeoutMs(30000).connectionTimeoutMs(15000)
                        .retryPolicy(new RetryNTimes(100, 100)).build();
                    CuratorCache cache = CuratorCache.build(client, root + "/tree");
                    CuratorCache tracker = CuratorCache.build(client, root + "/tracked",
                        CuratorCache.Options.SINGLE_NODE_CACHE);
                    Member m = new Member(id, client, cache, tracker);
                    members.add(m);
                    client.getConnectionStateListenable().addListener((c, state) -> {
                        String s = state == ConnectionState.SUSPENDED ? "down"
                            : state == ConnectionState.RECONNECTED ? "up"
                            : state == ConnectionState.LOST ? "lost" : null;
                        if (s == null) return;
                        long t = now();
                        say("conn " + id + " " + s + " " + t);
                        if (m.holding.get()) {
                            String e = s.equals("down") ? "indoubt" : s.equals("up") ? "restored" : "lost";
                            if (e.equals("lost") && m.marker != null) {
                                // No longer the holder: the next one may be granted.
                                m.marker.delete();
                            }
                            say("lock " + id + " " + e + " " + t);
                        }
                    });
                    cache.listenable().addListener(CuratorCacheListener.builder()
                        .forInitialized(loaded::countDown).build());
                    tracker.listenable().addListener(CuratorCacheListener.builder()
                        .forInitialized(loaded::countDown).build());
                    client.start();
                    cache.start();
                    tracker.start();
                }
                loaded.await();
                for (Member m : members) {
                    String lockPath = root + "/locks/l" + (m.i / perLock);
                    File marker = new File(markers, "l" + (m.i / perLock));
                    m.thread = new Thread(() -> hold(m, lockPath, marker, released, members.size()),
                        "holder-" + m.i);
                    m.thread.setDaemon(true);
                    m.thread.start();
                }
                checker = new Thread(() -> check(members, root), "checker");
                checker.setDaemon(true);
                checker.start();
                say("ready");
            } else if (w[0].equals("expect")) {
                expected = new String[] {w[1], w[2], w[3]};
            } else if (w[0].equals("release")) {
                releasing = true;
            } else {
                break;
            }
        }
        for (Member m : members) {
            m.tracker.close();
            m.cache.close();
            m.client.close();
        }
    }

    static void hold(Member m, String lockPath, File marker, AtomicInteger released, int n) {
        try {
            m.marker = marker;
            InterProcessMutex lock = new InterProcessReadWriteLock(m.client, lockPath).writeLock();
            lock.acquire();
            m.holding.set(true);
            say("lock " + m.i + " acquired " + now());
            try {
                Files.createFile(marker.toPath());
            } catch (FileAlreadyExistsException e) {
                say("overlap " + m.i + " " + marker.getName());
            }
            while (!releasing) {
                Thread.sleep(5);
            }
            Files.deleteIfExists(marker.toPath());
            m.holding.set(false);
            say("lock " + m.i + " released " + now());
            lock.release();
            if (released.incrementAndGet() == n) {
                say("released");
            }
        } catch (Exception e) {
            say("error client " + m.i + ": " + e.toString().replace('\n', ' '));
        }
    }

    static boolean has(CuratorCache cache, String path, String data) {
        Optional<ChildData> d = cache.get(path);
        if (!d.isPresent()) return false;
        return data == null || (d.get().getData() != null && new String(d.get().getData()).equals(data));
    }

    static void check(List<Member> members, String root) {
        try {
            while (true) {
                String[] e = expected;
                if (e != null) {
                    for (Member m : members) {
                        if (m.reportedFor == e) continue;
                        if (has(m.cache, root + "/tree/d0/n0", e[0]) && has(m.cache, e[1], null)
                            && !has(m.cache, e[2], null) && has(m.tracker, root + "/tracked", e[0])) {
                            m.reportedFor = e;
                            say("current " + m.i + " " + now());
                        }
                    }
                }
                Thread.sleep(5);
            }
        } catch (InterruptedException e) {
            // ends with the JVM
        }
    }
}
