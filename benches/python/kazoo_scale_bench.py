# The Python side of benches/scale.rs's side-by-side parts (issue 49): kazoo
# doing the work zklock does there, one job per process, speaking the protocol
# of benches/java/CuratorScaleBench.java (see there):
#
#   python kazoo_scale_bench.py <connect string> sessions <n>
#   python kazoo_scale_bench.py <connect string> held <n> <root>
#   python kazoo_scale_bench.py <connect string> directory <waiters> <handoffs> <lock znode>
#
# kazoo's default (threading) handler; one KazooClient per session, each with a
# 30 s timeout; kazoo.recipe.lock.Lock for the locks (each Lock checks once, at
# its first acquire, that its lock znode exists: one `exists`). The waiting
# threads get a 256 KiB stack.

import os
import sys
import threading
import time

SESSION_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 60.0
# Waiters started at once: the next ones start once these are queued.
QUEUE_BATCH = 250


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def expect(word):
    line = sys.stdin.readline()
    if line.strip() != word:
        raise RuntimeError("expected %s, got %r" % (word, line))


try:
    from kazoo.client import KazooClient
    from kazoo.recipe.lock import Lock
except Exception as e:  # ImportError, or a broken install
    say("error kazoo cannot be imported by %s: %r" % (sys.executable, e))
    sys.exit(1)


def client(connect):
    c = KazooClient(hosts=connect, timeout=SESSION_TIMEOUT_S)
    c.start(timeout=CONNECT_TIMEOUT_S)
    return c


def ms(since):
    return (time.monotonic() - since) * 1e3


def sessions(connect, n):
    t = time.monotonic()
    cs = [client(connect) for _ in range(n)]
    say("ok ms %.1f" % ms(t))
    expect("close")
    t = time.monotonic()
    for c in cs:
        c.stop()
        c.close()
    say("closed ms %.1f" % ms(t))


def held(connect, n, root):
    c = client(connect)
    say("connected")
    expect("acquire")
    locks = []
    t = time.monotonic()
    for i in range(n):
        lock = Lock(c, "%s/h-%d" % (root, i))
        lock.acquire()
        locks.append(lock)
    say("ok ms %.1f" % ms(t))
    expect("release")
    t = time.monotonic()
    for lock in locks:
        lock.release()
    say("released ms %.1f" % ms(t))
    c.stop()
    c.close()


def directory(connect, waiters, handoffs, znode):
    c = client(connect)
    say("connected")
    expect("queue")
    holder = Lock(c, znode)
    holder.acquire()
    at = [0.0] * (handoffs + 1)
    granted = [0]
    guard = threading.Lock()
    done = threading.Event()

    def wait(lock):
        try:
            lock.acquire()
        except Exception:
            return  # the session's end, at exit
        now = time.monotonic()
        with guard:
            granted[0] += 1
            k = granted[0]
        if k <= handoffs:
            at[k] = now
        if k < handoffs:
            lock.release()
        elif k == handoffs:
            done.set()

    threading.stack_size(256 * 1024)
    t = time.monotonic()
    for i in range(waiters):
        th = threading.Thread(target=wait, args=(Lock(c, znode),))
        th.daemon = True
        th.start()
        if (i + 1) % QUEUE_BATCH == 0 or i + 1 == waiters:
            while len(c.get_children(znode)) < i + 2:
                time.sleep(0.02)
    say("queued ms %.1f" % ms(t))
    expect("run")
    start = time.monotonic()
    at[0] = start
    holder.release()
    if not done.wait(600):
        raise RuntimeError("only %d of %d grants" % (granted[0], handoffs))
    total = ms(start)
    d = sorted(at[k] - at[k - 1] for k in range(1, handoffs + 1))
    p99 = d[min(handoffs - 1, -(-handoffs * 99 // 100) - 1)]
    say(
        "done handoffs %d p50_us %.1f p99_us %.1f mean_us %.1f total_ms %.1f"
        % (handoffs, d[(handoffs - 1) // 2] * 1e6, p99 * 1e6, sum(d) / handoffs * 1e6, total)
    )
    expect("exit")
    c.stop()
    c.close()


def main():
    connect, job = sys.argv[1], sys.argv[2]
    say("base")
    expect("go")
    if job == "sessions":
        sessions(connect, int(sys.argv[3]))
    elif job == "held":
        held(connect, int(sys.argv[3]), sys.argv[4])
    elif job == "directory":
        directory(connect, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        raise RuntimeError("unknown job " + job)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        say("error %r" % (e,))
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)
