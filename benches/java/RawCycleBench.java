// The perfect client of the uncontended lock cycle, for benches/lock.rs: the
// Java ZooKeeper client (3.8) making a lock's three requests with no lock logic.
//
// Usage: java -cp <classes>:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:\
//            /usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar \
//            RawCycleBench <connect string> <lock znode> <node name> <data bytes>
// Prints "ready" once connected. Then reads commands on stdin, one a line:
//   run <form> <cycles>   runs <cycles> cycles of <form> and prints
//                         "done <elapsed ns> <cycle ns>,<cycle ns>,..." (each cycle timed)
// Forms (each an acquire + release of a free lock's requests, one thread):
//   lock  the requests zklock's lock sends, in the same two round trips: an
//         asynchronous create2 (EPHEMERAL_SEQUENTIAL) of <lock znode>/<node name>
//         with <data bytes> bytes of data, getChildren(<lock znode>) right behind
//         it, then delete of the created node once both are answered;
//   plain the same with a create (opcode 1) of <lock znode>/n- with no data;
//   sync  the lock's requests one at a time (create2, getChildren, delete, each
//         waited for: three round trips, but no hand-off to the client's event
//         thread for the create's callback).
// The listing is not looked at: no lock logic at all.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Arrays;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public class RawCycleBench {
    static ZooKeeper zk;
    static String dir;
    static String lockName;
    static String plainName;
    static byte[] data;
    static final ArrayBlockingQueue<Object> created = new ArrayBlockingQueue<>(1);

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        dir = args[1];
        lockName = dir + "/" + args[2];
        plainName = dir + "/n-";
        data = new byte[Integer.parseInt(args[3])];
        Arrays.fill(data, (byte) 'x');

        CountDownLatch connected = new CountDownLatch(1);
        zk = new ZooKeeper(connect, 30000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect);
        }
        System.out.println("ready");
        System.out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 3 && w[0].equals("run")) {
                String form = w[1];
                int n = Integer.parseInt(w[2]);
                long[] t = new long[n];
                long started = System.nanoTime();
                for (int i = 0; i < n; i++) {
                    long s = System.nanoTime();
                    cycle(form);
                    t[i] = System.nanoTime() - s;
                }
                long elapsed = System.nanoTime() - started;
                StringBuilder out = new StringBuilder("done ").append(elapsed).append(' ');
                for (int i = 0; i < n; i++) {
                    out.append(i == 0 ? "" : ",").append(t[i]);
                }
                System.out.println(out);
            } else {
                System.out.println("error unknown command: " + line);
            }
            System.out.flush();
        }
        zk.close();
    }

    /// create (asynchronous) + getChildren right behind it, then delete.
    static void cycle(String form) throws Exception {
        if (form.equals("sync")) {
            String node = zk.create(lockName, data, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    CreateMode.EPHEMERAL_SEQUENTIAL, new Stat());
            zk.getChildren(dir, false);
            zk.delete(node, -1);
            return;
        }
        if (form.equals("lock")) {
            zk.create(lockName, data, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL,
                    (rc, path, ctx, name, stat) -> created.add(rc == 0 ? name
                            : KeeperException.create(KeeperException.Code.get(rc), path)),
                    null);
        } else {
            zk.create(plainName, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    CreateMode.EPHEMERAL_SEQUENTIAL,
                    (rc, path, ctx, name) -> created.add(rc == 0 ? name
                            : KeeperException.create(KeeperException.Code.get(rc), path)),
                    null);
        }
        zk.getChildren(dir, false);
        Object r = created.poll(30, TimeUnit.SECONDS);
        if (r instanceof Exception) {
            throw (Exception) r;
        }
        if (r == null) {
            throw new IllegalStateException("create not answered");
        }
        zk.delete((String) r, -1);
    }
}
