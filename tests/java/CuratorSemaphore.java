// A Curator 5.4 participant for tests/lock_semaphore.rs: one CuratorFramework
// on args[0], driven by stdin commands. Prints `ready`, then one answer per
// command:
//   acquire PATH MAX MS        -> acquired NODE | timeout   (holds one lease)
//   release                    -> released
//   ring PATH MAX ROUNDS DIR   -> ringdone ROUNDS VIOLATIONS MOST
// `ring` takes a lease of InterProcessSemaphoreV2(PATH, MAX) ROUNDS times;
// holding it, creates a file of its own in DIR and counts DIR's files: more
// than MAX is a violation (two many holders across every participant).
// Exits when stdin closes.
import java.io.*;
import java.nio.file.*;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorSemaphore {
    public static void main(String[] a) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(
                a[0], 20000, 15000, new ExponentialBackoffRetry(50, 10));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            System.out.println("noconnect");
            System.exit(3);
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Lease held = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            try {
                switch (w[0]) {
                    case "acquire": {
                        InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(
                                client, w[1], Integer.parseInt(w[2]));
                        Lease l = s.acquire(Long.parseLong(w[3]), TimeUnit.MILLISECONDS);
                        if (l == null) {
                            System.out.println("timeout");
                        } else {
                            held = l;
                            System.out.println("acquired " + l.getNodeName());
                        }
                        break;
                    }
                    case "release":
                        held.close();
                        held = null;
                        System.out.println("released");
                        break;
                    case "ring": {
                        int max = Integer.parseInt(w[2]), rounds = Integer.parseInt(w[3]);
                        InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, w[1], max);
                        int violations = 0, most = 0;
                        for (int i = 0; i < rounds; i++) {
                            Lease l = s.acquire();
                            Path mine = Paths.get(w[4], "curator-" + UUID.randomUUID());
                            Files.createFile(mine);
                            int n;
                            try (DirectoryStream<Path> d = Files.newDirectoryStream(Paths.get(w[4]))) {
                                n = 0;
                                for (Path p : d) n++;
                            }
                            most = Math.max(most, n);
                            if (n > max) violations++;
                            Thread.sleep(2);
                            Files.delete(mine);
                            s.returnLease(l);
                        }
                        System.out.println("ringdone " + rounds + " " + violations + " " + most);
                        break;
                    }
                    default:
                        System.out.println("error unknown " + w[0]);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
            }
            System.out.flush();
        }
        client.close();
    }
}
