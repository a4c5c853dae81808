# The Python side of benches/compare.rs: kazoo's lock recipes (Lock,
# WriteLock, ReadLock from kazoo.recipe.lock) under the same scenarios as
# zklock's locks and Curator's, on the same server. It speaks the protocol of
# benches/java/CuratorLockBench.java, so that compare.rs drives both the same
# way (common::LineProcess).
#
# kazoo's default (threading) handler; every session with a 30 s timeout.
#
#   python kazoo_lock_bench.py serve <connect string> <root>
#     One KazooClient. Reads one command a line on stdin and answers each with
#     one line: "ok key value key value ..." or "error <message>". First line:
#     "ready kazoo <version> python <version>" (or "error ..." and exit status 1
#     when kazoo cannot be imported or the client cannot connect). The lock
#     znodes are <root>/uncontended-mutex, uncontended-rw, threads, readers and
#     handoff; the caller makes them beforehand.
#       uncontended <form> <cycles>  one thread, acquire + release in a loop;
#                                    form: mutex (kazoo's exclusive Lock) |
#                                    rw-write (WriteLock) | rw-read (ReadLock)
#                                    -> ok cycles N elapsed_ns E p50_ns P p99_ns Q
#       threads <n> <ms>             n threads, each its own Lock on one lock
#                                    znode, acquire + release until <ms> have
#                                    passed -> ok grants G elapsed_ns E
#       readers <n> <ms>             n threads, each its own ReadLock on one
#                                    znode, in a loop -> ok grants G elapsed_ns E
#       handoff <k>                  two Lock instances (two threads) pass the
#                                    lock back and forth k times each; a holder
#                                    releases only once the other's watch on its
#                                    node is set (seen through a proxy of the
#                                    client that each of the two locks is given:
#                                    its get() with a watcher has returned, so
#                                    the server answered) -> ok handoffs H
#                                    elapsed_ns E
#       quit
#
#   python kazoo_lock_bench.py worker <connect string> <lock znode>
#     One process of the multi-process scenario: its own KazooClient, one Lock.
#     Prints "ready"; then for each "go <ms>" line, acquire + release until <ms>
#     have passed and print "done grants <n> elapsed_ns <ns>"; for "warm <znode>
#     <cycles>", <cycles> cycles of another Lock on <znode> (which one other
#     worker shares), answered the same way. Ends (closing its session) at end
#     of input or on anything else.
#
# Each Lock object checks once, at its first acquire, that its lock znode
# exists (kazoo's ensure_path: one `exists`), and from its second acquire on
# first looks for a node of its own left by an earlier create (`create_tried`
# is never reset: one more getChildren per acquire).

import platform
import queue
import sys
import threading
import time

SESSION_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 60.0
WAKE_BOUND_S = 30.0


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


try:
    from kazoo.client import KazooClient
    from kazoo.recipe.lock import Lock
    from kazoo.version import __version__ as KAZOO_VERSION
except Exception as e:  # ImportError, or a broken install
    say("error kazoo cannot be imported by %s: %r" % (sys.executable, e))
    sys.exit(1)


def client(connect):
    c = KazooClient(hosts=connect, timeout=SESSION_TIMEOUT_S)
    c.start(timeout=CONNECT_TIMEOUT_S)
    return c


class WatchSignal(object):
    """A KazooClient as a lock sees it, but for get() with a watcher: once it
    returned (the server answered, the watch is set), `tell` is called."""

    def __init__(self, real, tell):
        self._real = real
        self._tell = tell

    def __getattr__(self, name):
        return getattr(self._real, name)

    def get(self, path, watch=None):
        result = self._real.get(path, watch)
        if watch is not None:
            self._tell()
        return result


class Bench(object):
    def __init__(self, connect, root):
        self.root = root
        self.client = client(connect)
        # The uncontended lock of each form, kept across rounds (like the others').
        self.uncontended = {}

    def uncontended_lock(self, form):
        lock = self.uncontended.get(form)
        if lock is not None:
            return lock
        if form == "mutex":
            lock = self.client.Lock(self.root + "/uncontended-mutex", "bench writer")
        elif form == "rw-write":
            lock = self.client.WriteLock(self.root + "/uncontended-rw", "bench writer")
        elif form == "rw-read":
            lock = self.client.ReadLock(self.root + "/uncontended-rw", "bench reader")
        else:
            raise ValueError("unknown form " + form)
        self.uncontended[form] = lock
        return lock

    def run_uncontended(self, form, cycles):
        lock = self.uncontended_lock(form)
        t = [0] * cycles
        clock = time.perf_counter_ns
        started = clock()
        for i in range(cycles):
            s = clock()
            lock.acquire()
            lock.release()
            t[i] = clock() - s
        elapsed = clock() - started
        t.sort()
        return "ok cycles %d elapsed_ns %d p50_ns %d p99_ns %d" % (
            cycles,
            elapsed,
            t[int(round((cycles - 1) * 0.5))],
            t[int(round((cycles - 1) * 0.99))],
        )

    @staticmethod
    def loop(locks, ms, exclusive):
        """One thread per lock, acquire + release for ms: grants and elapsed."""
        n = len(locks)
        barrier = threading.Barrier(n + 1)
        counter = threading.Lock()
        state = {"grants": 0, "inside": 0, "failure": None}

        def run(lock):
            try:
                barrier.wait()
                deadline = time.perf_counter_ns() + ms * 1_000_000
                mine = 0
                while time.perf_counter_ns() < deadline:
                    lock.acquire()
                    with counter:
                        state["inside"] += 1
                        two = state["inside"] != 1
                    with counter:
                        state["inside"] -= 1
                    if two and exclusive:
                        raise RuntimeError("two holders of an exclusive lock")
                    mine += 1
                    lock.release()
                with counter:
                    state["grants"] += mine
            except BaseException as e:  # noqa: B902 (reported to the caller)
                state["failure"] = state["failure"] or e
                barrier.abort()

        threads = [threading.Thread(target=run, args=(lock,)) for lock in locks]
        for th in threads:
            th.start()
        barrier.wait()
        started = time.perf_counter_ns()
        for th in threads:
            th.join()
        elapsed = time.perf_counter_ns() - started
        if state["failure"] is not None:
            raise RuntimeError("a bench thread failed: %r" % (state["failure"],))
        return "ok grants %d elapsed_ns %d" % (state["grants"], elapsed)

    def run_threads(self, n, ms):
        path = self.root + "/threads"
        locks = [self.client.Lock(path, "thread %d" % i) for i in range(n)]
        return self.loop(locks, ms, True)

    def run_readers(self, n, ms):
        path = self.root + "/readers"
        locks = [self.client.ReadLock(path, "reader %d" % i) for i in range(n)]
        return self.loop(locks, ms, False)

    def run_handoff(self, k):
        path = self.root + "/handoff"
        # A message to a thread: True = "my watch is set: release", False = "I am done".
        to_a, to_b = queue.Queue(), queue.Queue()
        a = Lock(WatchSignal(self.client, lambda: to_b.put(True)), path, "a")
        b = Lock(WatchSignal(self.client, lambda: to_a.put(True)), path, "b")
        barrier = threading.Barrier(3)
        failure = []

        def run(lock, mine, other):
            try:
                barrier.wait()
                other_done = False
                for _ in range(k):
                    lock.acquire()
                    if not other_done:
                        try:
                            m = mine.get(timeout=WAKE_BOUND_S)
                        except queue.Empty:
                            raise RuntimeError("hand-off: no word from the other thread")
                        other_done = not m
                    lock.release()
            except BaseException as e:  # noqa: B902
                failure.append(e)
            finally:
                other.put(False)

        ta = threading.Thread(target=run, args=(a, to_a, to_b))
        tb = threading.Thread(target=run, args=(b, to_b, to_a))
        ta.start()
        tb.start()
        barrier.wait()
        started = time.perf_counter_ns()
        ta.join()
        tb.join()
        elapsed = time.perf_counter_ns() - started
        if failure:
            raise RuntimeError("a hand-off thread failed: %r" % (failure[0],))
        return "ok handoffs %d elapsed_ns %d" % (2 * k - 1, elapsed)

    def handle(self, f):
        if f[0] == "uncontended":
            return self.run_uncontended(f[1], int(f[2]))
        if f[0] == "threads":
            return self.run_threads(int(f[1]), int(f[2]))
        if f[0] == "readers":
            return self.run_readers(int(f[1]), int(f[2]))
        if f[0] == "handoff":
            return self.run_handoff(int(f[1]))
        raise ValueError("unknown command " + f[0])

    def serve(self):
        # "ready kazoo <version> python <version>" (no spaces inside).
        say("ready kazoo %s python %s" % (KAZOO_VERSION, platform.python_version()))
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            if line == "quit":
                break
            try:
                reply = self.handle(line.split())
            except Exception as e:
                reply = "error " + repr(e).replace("\n", " ")
            say(reply)
        self.client.stop()
        self.client.close()


def cycles_of(lock, cycles):
    for _ in range(cycles):
        lock.acquire()
        lock.release()


def worker(connect, path):
    c = client(connect)
    lock = c.Lock(path, "worker")
    say("ready")
    for line in sys.stdin:
        f = line.split()
        if len(f) == 3 and f[0] == "warm":
            started = time.perf_counter_ns()
            cycles_of(c.Lock(f[1], "warm-up"), int(f[2]))
            say("done grants %s elapsed_ns %d" % (f[2], time.perf_counter_ns() - started))
            continue
        if len(f) != 2 or f[0] != "go":
            break
        started = time.perf_counter_ns()
        deadline = started + int(f[1]) * 1_000_000
        grants = 0
        while time.perf_counter_ns() < deadline:
            lock.acquire()
            grants += 1
            lock.release()
        say("done grants %d elapsed_ns %d" % (grants, time.perf_counter_ns() - started))
    c.stop()
    c.close()


def main(args):
    if len(args) == 3 and args[0] == "serve":
        try:
            bench = Bench(args[1], args[2])
        except Exception as e:
            say("error kazoo cannot connect to %s: %r" % (args[1], e))
            return 1
        bench.serve()
    elif len(args) == 3 and args[0] == "worker":
        worker(args[1], args[2])
    else:
        sys.stderr.write(
            "usage: kazoo_lock_bench.py serve <connect> <root> | worker <connect> <lock znode>\n"
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
