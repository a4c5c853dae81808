// A Curator 5 participant for tests/lock_dialects.rs: one CuratorFramework on
// argv[0], driven by stdin commands, each lock in its own thread (Curator's
// locks are released by the thread that took them). Prints `ready`, then:
//   mutex NAME PATH        -> ok NAME      (InterProcessMutex, default data)
//   rlock NAME PATH        -> ok NAME      (InterProcessReadWriteLock.readLock)
//   wlock NAME PATH        -> ok NAME      (InterProcessReadWriteLock.writeLock)
//   acquire NAME [MS]      -> acquired NAME | timeout NAME | error NAME ...
//   release NAME           -> released NAME | error NAME ...
//   ring NAME ROUNDS FLAG  -> ringdone NAME ROUNDS VIOLATIONS: acquire, create
//                             FLAG with O_EXCL (exists: a second holder), delete
//                             it, release; ROUNDS times
// Answers of lock commands come when done (possibly after later commands').
// Exits when stdin closes.
import java.io.*;
import java.nio.file.*;
import java.util.Map;
import java.util.concurrent.*;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.*;
import org.apache.curator.retry.RetryNTimes;

public class CuratorLocks {
    static final Map<String, InterProcessLock> locks = new ConcurrentHashMap<>();
    static final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();

    static synchronized void out(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static void on(String name, Callable<String> task) {
        threads.computeIfAbsent(name, n -> Executors.newSingleThreadExecutor()).submit(() -> {
            try {
                out(task.call());
            } catch (Throwable e) {
                out("error " + name + " " + e.toString().replace('\n', ' '));
            }
            return null;
        });
    }

    public static void main(String[] a) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(a[0], 20000, 10000, new RetryNTimes(5, 200));
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            out("noconnect");
            System.exit(3);
        }
        out("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            String name = w.length > 1 ? w[1] : "";
            switch (w[0]) {
                case "mutex":
                    locks.put(name, new InterProcessMutex(c, w[2]));
                    out("ok " + name);
                    break;
                case "rlock":
                    locks.put(name, new InterProcessReadWriteLock(c, w[2]).readLock());
                    out("ok " + name);
                    break;
                case "wlock":
                    locks.put(name, new InterProcessReadWriteLock(c, w[2]).writeLock());
                    out("ok " + name);
                    break;
                case "acquire": {
                    InterProcessLock l = locks.get(name);
                    long ms = w.length > 2 ? Long.parseLong(w[2]) : -1;
                    on(name, () -> {
                        if (ms < 0) {
                            l.acquire();
                            return "acquired " + name;
                        }
                        return (l.acquire(ms, TimeUnit.MILLISECONDS) ? "acquired " : "timeout ") + name;
                    });
                    break;
                }
                case "release": {
                    InterProcessLock l = locks.get(name);
                    on(name, () -> {
                        l.release();
                        return "released " + name;
                    });
                    break;
                }
                case "ring": {
                    InterProcessLock l = locks.get(name);
                    int rounds = Integer.parseInt(w[2]);
                    Path flag = Paths.get(w[3]);
                    on(name, () -> {
                        int violations = 0;
                        for (int i = 0; i < rounds; i++) {
                            l.acquire();
                            boolean mine = true;
                            try {
                                Files.createFile(flag);
                            } catch (FileAlreadyExistsException e) {
                                violations++;
                                mine = false;
                            }
                            Thread.sleep(1);
                            if (mine) Files.delete(flag);
                            l.release();
                        }
                        return "ringdone " + name + " " + rounds + " " + violations;
                    });
                    break;
                }
                default:
                    out("error " + name + " unknown command " + w[0]);
            }
        }
        for (ExecutorService e : threads.values()) e.shutdownNow();
        c.close();
        System.exit(0);
    }
}
