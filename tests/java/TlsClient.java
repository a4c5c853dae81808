// The Java ZooKeeper client as a reference for tests/tls.rs and tests/sasl.rs
// (tests/common/java.rs): connects (over TLS
// when the system properties of zklock::testing::TestPki::java_client_options
// are set; with SASL when a JAAS `Client` section is), then runs one command per stdin line and answers one line each.
//
// Usage: java -cp <classes>:/usr/share/java/zookeeper.jar[:slf4j] [-D...] TlsClient <connect string>
// Prints "connected" once SyncConnected. Commands:
//   create <path> <data> <creator|open|read>  -> "ok <path>" | "err <CODE>"
//   get <path>                                -> "data <data>" | "err <CODE>"
//   set <path> <data>                         -> "ok" | "err <CODE>"
//   acl <path>                                -> "acl <perms>:<scheme>:<id>[ ...]" | "err <CODE>"
//   delete <path>                             -> "ok" | "err <CODE>"
// Unknown commands answer "err BADARGUMENTS"; EOF closes the session and exits.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;

public class TlsClient {
    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 10000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(30, TimeUnit.SECONDS)) {
            System.out.println("not-connected");
            System.exit(2);
        }
        System.out.println("connected");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            String out;
            try {
                switch (w[0]) {
                    case "create": {
                        List<ACL> acl = w[3].equals("creator") ? ZooDefs.Ids.CREATOR_ALL_ACL
                                : w[3].equals("read") ? ZooDefs.Ids.READ_ACL_UNSAFE
                                : ZooDefs.Ids.OPEN_ACL_UNSAFE;
                        out = "ok " + zk.create(w[1], w[2].getBytes(StandardCharsets.UTF_8), acl,
                                CreateMode.PERSISTENT);
                        break;
                    }
                    case "get":
                        out = "data " + new String(zk.getData(w[1], false, null), StandardCharsets.UTF_8);
                        break;
                    case "set":
                        zk.setData(w[1], w[2].getBytes(StandardCharsets.UTF_8), -1);
                        out = "ok";
                        break;
                    case "delete":
                        zk.delete(w[1], -1);
                        out = "ok";
                        break;
                    case "acl": {
                        StringBuilder b = new StringBuilder("acl");
                        for (ACL a : zk.getACL(w[1], new Stat())) {
                            b.append(' ').append(a.getPerms()).append(':')
                                    .append(a.getId().getScheme()).append(':').append(a.getId().getId());
                        }
                        out = b.toString();
                        break;
                    }
                    default:
                        out = "err BADARGUMENTS";
                }
            } catch (KeeperException e) {
                out = "err " + e.code();
            }
            System.out.println(out);
            System.out.flush();
        }
        zk.close();
    }
}
