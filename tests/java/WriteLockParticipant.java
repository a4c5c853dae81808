// A Java contender for tests/recipes_lock_election.rs (a participant of
// tests/common/participant.rs: prints "ready" once connected): takes
// ZooKeeper's recipe WriteLock on <dir> <grants> times. Inside, it creates <flag> with
// O_EXCL (a second owner, Rust or Java, finds it there: VIOLATION) and deletes
// it before unlock. Workaround for the recipe's lost wake-up: while not owner it
// re-calls lock() every 20 ms (a poll), so it never waits for a watch it did
// not set.
import java.nio.file.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.*;
import org.apache.zookeeper.recipes.lock.WriteLock;

public class WriteLockParticipant {
    public static void main(String[] a) throws Exception {
        String servers = a[0], dir = a[1];
        int grants = Integer.parseInt(a[2]);
        Path flag = Paths.get(a[3]);
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(servers, 20000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        if (!connected.await(30, TimeUnit.SECONDS)) { System.out.println("NOCONNECT"); System.exit(3); }
        System.out.println("ready");
        System.out.flush();
        // One instance for every grant: the recipe's stale LockWatchers (one per
        // lock() call) re-call lock() after unlock(), which then starts this
        // instance's next attempt (with a fresh instance per grant that node
        // would be orphaned: close() does not unlock, unlock() after close() is
        // a no-op).
        WriteLock lock = new WriteLock(zk, dir, ZooDefs.Ids.OPEN_ACL_UNSAFE);
        for (int i = 0; i < grants; i++) {
            long deadline = System.currentTimeMillis() + 120_000;
            while (!lock.lock()) {
                if (System.currentTimeMillis() > deadline) { System.out.println("HANG"); System.exit(4); }
                Thread.sleep(20);
            }
            try {
                Files.createFile(flag);
            } catch (FileAlreadyExistsException e) {
                System.out.println("VIOLATION " + lock.getId());
                System.out.flush();
                System.exit(2);
            }
            Thread.sleep(2);
            Files.delete(flag);
            lock.unlock();
            System.out.println("GRANT " + i);
            System.out.flush();
        }
        System.out.println("DONE");
        System.out.flush();
        zk.close();
    }
}
