// The Java client's side of benches/security.rs: the cost of opening an
// authenticated session (SASL from a JAAS `Client` section; over TLS when the
// zookeeper.ssl.* / client.secure system properties are set).
//
// Usage: java [-D...] -cp <classes>:zookeeper.jar:slf4j SaslConnectBench <connect string>
// Prints "ready"; then for each stdin line N opens and closes N sessions one
// after another and answers one line: "done us <t1> <t2> ..." with each
// session's time from `new ZooKeeper` to the SaslAuthenticated event, in
// microseconds ("err <what>" on a failure). Exits when stdin closes.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;

public class SaslConnectBench {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            int n = Integer.parseInt(line.trim());
            StringBuilder out = new StringBuilder("done us");
            for (int i = 0; i < n; i++) {
                CountDownLatch authenticated = new CountDownLatch(1);
                CountDownLatch failed = new CountDownLatch(1);
                long t0 = System.nanoTime();
                ZooKeeper zk = new ZooKeeper(connect, 30000, e -> {
                    if (e.getState() == Watcher.Event.KeeperState.SaslAuthenticated) {
                        authenticated.countDown();
                    } else if (e.getState() == Watcher.Event.KeeperState.AuthFailed) {
                        failed.countDown();
                    }
                });
                boolean ok = authenticated.await(30, TimeUnit.SECONDS);
                long took = (System.nanoTime() - t0) / 1000;
                zk.close();
                if (!ok || failed.getCount() == 0) {
                    out = new StringBuilder("err not authenticated");
                    break;
                }
                out.append(' ').append(took);
            }
            System.out.println(out);
            System.out.flush();
        }
    }
}
