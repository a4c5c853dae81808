// The Java side of tests/recipes_coordination.rs: ZooKeeper's own
// org.apache.zookeeper.recipes.queue.DistributedQueue (Debian's
// zookeeper-recipes-queue.jar) as producer or consumer, and a group member that
// only a kill -9 removes.
//
//   produce <servers> <dir> <count> <tag>   offers "<tag>-<i>", i = 0..count
//   consume <servers> <dir> <count>          takes count items, prints each
//   member  <servers> <node>                 creates an ephemeral node, waits
//
// Prints "ready" once connected and "done" at the end; exits 0.
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.queue.DistributedQueue;

public class RecipeClient {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[1], 2000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            System.err.println("cannot connect to " + args[1]);
            System.exit(2);
        }
        System.out.println("ready");
        System.out.flush();
        switch (mode) {
            case "produce": {
                DistributedQueue q = new DistributedQueue(zk, args[2], ZooDefs.Ids.OPEN_ACL_UNSAFE);
                int n = Integer.parseInt(args[3]);
                for (int i = 0; i < n; i++) {
                    q.offer((args[4] + "-" + i).getBytes(StandardCharsets.UTF_8));
                }
                break;
            }
            case "consume": {
                DistributedQueue q = new DistributedQueue(zk, args[2], ZooDefs.Ids.OPEN_ACL_UNSAFE);
                int n = Integer.parseInt(args[3]);
                for (int i = 0; i < n; i++) {
                    System.out.println(new String(q.take(), StandardCharsets.UTF_8));
                }
                break;
            }
            case "member": {
                zk.create(args[2], "java".getBytes(StandardCharsets.UTF_8),
                        ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
                System.out.println("joined");
                System.out.flush();
                Thread.sleep(Long.MAX_VALUE);
                break;
            }
            default:
                System.err.println("unknown mode " + mode);
                System.exit(2);
        }
        System.out.println("done");
        System.out.flush();
        zk.close();
    }
}
