// A Curator 5.4 participant for tests/recipes_dialects.rs: a LeaderLatch, a
// LeaderSelector and a SharedCount on one CuratorFramework (4 s session).
//
// argv[0]: the connect string. Prints "ready" once connected, then one answer
// per stdin command (each starts with a word the test expects), plus event
// lines "leader ID" / "notleader ID" (latch and selector) and "released ID"
// (selector). Exits when stdin closes.
//
// Commands:
//   latch PATH ID      start a LeaderLatch                  -> "started"
//   has                its hasLeadership()                  -> "has true|false"
//   leader             its getLeader().getId()              -> "leaderid ID" (empty when none)
//   participants       its getParticipants() ids, in order  -> "participants a,b,..."
//   close              close the latch                      -> "closed"
//   selector PATH ID   start an auto-requeued LeaderSelector holding
//                      leadership until "release"           -> "started"
//   release            end the current takeLeadership       -> "releasing"
//   selclose           close the selector                   -> "closed"
//   selparticipants    its getParticipants() ids            -> "participants a,b,..."
//   shared PATH N      N increments of a SharedCount (trySetCount loop) -> "done"
//   sharedget PATH     a SharedCount's value                -> "value V"

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Semaphore;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;

public class CuratorLeader {
    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String ids(Iterable<Participant> ps) {
        List<String> ids = new ArrayList<>();
        for (Participant p : ps) {
            ids.add(p.getId());
        }
        return String.join(",", ids);
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(4000)
                .connectionTimeoutMs(4000)
                .retryPolicy(new RetryNTimes(50, 100))
                .build();
        client.start();
        client.blockUntilConnected();
        out("ready");
        LeaderLatch latch = null;
        LeaderSelector selector = null;
        Semaphore release = new Semaphore(0);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            switch (w[0]) {
                case "latch": {
                    final String id = w[2];
                    latch = new LeaderLatch(client, w[1], id);
                    latch.addListener(new LeaderLatchListener() {
                        public void isLeader() {
                            out("leader " + id);
                        }

                        public void notLeader() {
                            out("notleader " + id);
                        }
                    });
                    latch.start();
                    out("started");
                    break;
                }
                case "has":
                    out("has " + latch.hasLeadership());
                    break;
                case "leader":
                    out("leaderid " + latch.getLeader().getId());
                    break;
                case "participants":
                    out("participants " + ids(latch.getParticipants()));
                    break;
                case "close":
                    latch.close();
                    out("closed");
                    break;
                case "selector": {
                    final String id = w[2];
                    selector = new LeaderSelector(client, w[1], new LeaderSelectorListenerAdapter() {
                        public void takeLeadership(CuratorFramework c) throws Exception {
                            out("leader " + id);
                            try {
                                release.acquire();
                            } finally {
                                out("released " + id);
                            }
                        }
                    });
                    selector.setId(id);
                    selector.autoRequeue();
                    selector.start();
                    out("started");
                    break;
                }
                case "release":
                    release.release();
                    out("releasing");
                    break;
                case "selclose":
                    selector.close();
                    out("closed");
                    break;
                case "selparticipants":
                    out("participants " + ids(selector.getParticipants()));
                    break;
                case "shared": {
                    SharedCount count = new SharedCount(client, w[1], 0);
                    count.start();
                    int n = Integer.parseInt(w[2]);
                    for (int i = 0; i < n; i++) {
                        while (true) {
                            VersionedValue<Integer> v = count.getVersionedValue();
                            if (count.trySetCount(v, v.getValue() + 1)) {
                                break;
                            }
                        }
                    }
                    count.close();
                    out("done");
                    break;
                }
                case "sharedget": {
                    SharedCount count = new SharedCount(client, w[1], 0);
                    count.start();
                    out("value " + count.getCount());
                    count.close();
                    break;
                }
                default:
                    out("error unknown command " + w[0]);
            }
        }
        client.close();
    }
}
