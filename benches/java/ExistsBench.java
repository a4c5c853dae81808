// Sequential `exists` latency of the Java ZooKeeper client, for benches/client.rs.
//
// Usage: java -cp <classes>:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-nop.jar \
//            ExistsBench <connect string> <path> <warm-up ops> <ops> <rounds>
// Prints one line per round: "round <i> median_ns <m> p99_ns <p> mean_ns <a>".

import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public class ExistsBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        int warm = Integer.parseInt(args[2]);
        int ops = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);

        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, 10000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect);
        }
        for (int i = 0; i < warm; i++) {
            zk.exists(path, false);
        }
        long[] t = new long[ops];
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < ops; i++) {
                long start = System.nanoTime();
                zk.exists(path, false);
                t[i] = System.nanoTime() - start;
            }
            long sum = 0;
            for (long v : t) {
                sum += v;
            }
            Arrays.sort(t);
            System.out.println("round " + r + " median_ns " + t[ops / 2] + " p99_ns "
                    + t[(int) (ops * 0.99)] + " mean_ns " + (sum / ops));
            System.out.flush();
            if (r + 1 < rounds) {
                // Wait for the Rust side's round (a line on stdin) to alternate.
                if (System.in.read() < 0) {
                    break;
                }
            }
        }
        zk.close();
    }
}
