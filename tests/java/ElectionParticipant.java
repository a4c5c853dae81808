// A Java candidate for tests/recipes_lock_election.rs (a participant of
// tests/common/participant.rs: prints "ready" once connected): ZooKeeper's
// recipe LeaderElectionSupport on <root> as <host>. Prints "EVENT <type>" for each
// election event; reads commands on stdin: "LEADER" prints
// "LEADER <getLeaderHostName()>", "STOP" stops (prints "STOPPED").
import java.io.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.*;
import org.apache.zookeeper.recipes.leader.LeaderElectionSupport;

public class ElectionParticipant {
    static synchronized void say(String s) { System.out.println(s); System.out.flush(); }

    public static void main(String[] a) throws Exception {
        String servers = a[0], root = a[1], host = a[2];
        int timeout = Integer.parseInt(a[3]);
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(servers, timeout, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
        });
        if (!connected.await(30, TimeUnit.SECONDS)) { say("NOCONNECT"); System.exit(3); }
        say("ready");
        LeaderElectionSupport election = new LeaderElectionSupport();
        election.setZooKeeper(zk);
        election.setRootNodeName(root);
        election.setHostName(host);
        election.addListener(t -> say("EVENT " + t));
        election.start();
        say("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("LEADER")) say("LEADER " + election.getLeaderHostName());
            else if (line.equals("STOP")) { election.stop(); say("STOPPED"); }
        }
        zk.close();
    }
}
