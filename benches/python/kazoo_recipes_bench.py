# The Python side of benches/recipes.rs: kazoo's Queue and Election under the
# same scenarios as zklock's queue and election, Curator's and ZooKeeper's
# recipes, on the same server. It speaks the protocol of
# benches/java/RecipesBench.java (<impl> is kazoo):
#
#   python kazoo_recipes_bench.py serve <connect string>
#     First line: "ready kazoo <version> python <version>" (or "error ..." and
#     exit status 1 when kazoo cannot be imported). Every session has a 30 s
#     timeout; each producer, consumer and the candidates' group has its own.
#       queue kazoo <dir> offer <n>          one producer: Queue.put n times
#       queue kazoo <dir> take <n>           one consumer: Queue.get n times
#       queue kazoo <dir> mixed <p> <c> <n>  p producers, c consumers
#         -> ok items N elapsed_ns E (mixed: until the last item was taken)
#       succession kazoo <dir> <k>           k + 1 Election contenders (a
#         session each), each in a thread running Election.run(leader); the leader
#         returns from its function when told, the next is elected
#         -> ok successions K elapsed_ns E p50_ns P
#       quit
#
# kazoo's Queue.get() does not wait: when it finds nothing, a consumer here sets
# a children watch on the queue and waits for it (as kazoo's LockingQueue
# does), then tries again.

import platform
import sys
import threading
import time

# The lock bench's helpers (its directory is on sys.path when run as a
# script); importing it reports and exits when kazoo cannot be imported.
from kazoo_lock_bench import KAZOO_VERSION, client, say

WAIT_S = 120.0


def close(c):
    c.stop()
    c.close()


def item(p, i):
    return ("p%d-%d" % (p, i)).encode()


def offer(connect, d, p, lo, hi):
    c = client(connect)
    try:
        q = c.Queue(d)
        for i in range(lo, hi):
            q.put(item(p, i))
    finally:
        close(c)


def take(connect, d, taken, n):
    """Takes items until taken[0] reaches n (shared, under taken[1]; the time
    of the last in taken[2])."""
    c = client(connect)
    try:
        q = c.Queue(d)
        while True:
            with taken[1]:
                if taken[0] >= n:
                    return
            got = q.get()
            if got is not None:
                with taken[1]:
                    taken[0] += 1
                    taken[2] = time.monotonic_ns()
                continue
            ev = threading.Event()
            if not c.get_children(d, watch=lambda _e: ev.set()):
                ev.wait(0.2)
    finally:
        close(c)


def run_threads(targets):
    errors = []

    def wrap(f, args):
        try:
            f(*args)
        except Exception as e:  # reported as the command's error
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(f, a)) for f, a in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def queue(connect, d, what, f):
    # [items taken, its lock, when the last was taken]
    taken = [0, threading.Lock(), 0]
    t0 = time.monotonic_ns()
    if what == "offer":
        n = int(f[4])
        offer(connect, d, 0, 0, n)
        items = n
    elif what == "take":
        n = int(f[4])
        take(connect, d, taken, n)
        items = taken[0]
    elif what == "mixed":
        p, c, n = int(f[4]), int(f[5]), int(f[6])
        targets = [(take, (connect, d, taken, n)) for _ in range(c)]
        targets += [
            (offer, (connect, d, i, n * i // p, n * (i + 1) // p)) for i in range(p)
        ]
        run_threads(targets)
        return "ok items %d elapsed_ns %d" % (taken[0], taken[2] - t0)
    else:
        raise ValueError("queue %s?" % what)
    return "ok items %d elapsed_ns %d" % (items, time.monotonic_ns() - t0)


def succession(connect, d, k):
    clients = []
    try:
        elected = [threading.Event() for _ in range(k + 1)]
        release = [threading.Event() for _ in range(k + 1)]
        threads = []
        for i in range(k + 1):
            c = client(connect)
            clients.append(c)
            e = c.Election(d, "c%d" % i)

            def lead(i=i):
                elected[i].set()
                release[i].wait(WAIT_S)

            t = threading.Thread(target=e.run, args=(lead,))
            t.daemon = True
            t.start()
            threads.append(t)
            # In turn: the next contender only once this one's node is there.
            end = time.monotonic() + WAIT_S
            while len(e.contenders()) < i + 1 and time.monotonic() < end:
                time.sleep(0.001)
        if not elected[0].wait(WAIT_S):
            raise RuntimeError("no first leader")
        times = []
        t0 = time.monotonic_ns()
        for i in range(k):
            s = time.monotonic_ns()
            release[i].set()
            if not elected[i + 1].wait(WAIT_S):
                raise RuntimeError("contender %d not elected" % (i + 1))
            times.append(time.monotonic_ns() - s)
        elapsed = time.monotonic_ns() - t0
        release[k].set()
        for t in threads:
            t.join(WAIT_S)
        times.sort()
        return "ok successions %d elapsed_ns %d p50_ns %d" % (k, elapsed, times[k // 2])
    finally:
        for c in clients:
            close(c)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        sys.stderr.write("usage: kazoo_recipes_bench.py serve <connect string>\n")
        sys.exit(2)
    connect = sys.argv[2]
    say("ready kazoo %s python %s" % (KAZOO_VERSION, platform.python_version()))
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "quit":
            break
        try:
            if f[0] == "queue":
                reply = queue(connect, f[2], f[3], f)
            elif f[0] == "succession":
                reply = succession(connect, f[2], int(f[3]))
            else:
                raise ValueError("unknown command %s" % f[0])
        except Exception as e:
            reply = "error %r" % (e,)
        say(reply.replace("\n", " "))


if __name__ == "__main__":
    main()
