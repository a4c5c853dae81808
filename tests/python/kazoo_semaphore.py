"""A kazoo 2.11 participant for tests/lock_semaphore.rs: one KazooClient on
argv[1], driven by stdin commands. Prints `ready`, then one answer per
command (as tests/java/CuratorSemaphore.java):
  acquire PATH MAX MS        -> acquired | timeout     (holds one lease)
  release                    -> released
  ring PATH MAX ROUNDS DIR   -> ringdone ROUNDS VIOLATIONS MOST
`ring` takes a lease of Semaphore(PATH, max_leases=MAX) ROUNDS times; holding
it, creates a file of its own in DIR and counts DIR's files: more than MAX is
a violation. Exits when stdin closes.
"""
import os
import sys
import time
import uuid

from kazoo.client import KazooClient


def out(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


def main():
    client = KazooClient(hosts=sys.argv[1], timeout=20)
    client.start(timeout=30)
    out("ready")
    held = None
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        try:
            if w[0] == "acquire":
                s = client.Semaphore(w[1], "kazoo", max_leases=int(w[2]))
                if s.acquire(timeout=int(w[3]) / 1000.0):
                    held = s
                    out("acquired")
                else:
                    out("timeout")
            elif w[0] == "release":
                held.release()
                held = None
                out("released")
            elif w[0] == "ring":
                path, most_allowed, rounds, flags = w[1], int(w[2]), int(w[3]), w[4]
                s = client.Semaphore(path, "kazoo", max_leases=most_allowed)
                violations = most = 0
                for _ in range(rounds):
                    s.acquire()
                    mine = os.path.join(flags, "kazoo-" + uuid.uuid4().hex)
                    open(mine, "x").close()
                    n = len(os.listdir(flags))
                    most = max(most, n)
                    if n > most_allowed:
                        violations += 1
                    time.sleep(0.002)
                    os.unlink(mine)
                    s.release()
                out("ringdone %d %d %d" % (rounds, violations, most))
            else:
                out("error unknown %s" % w[0])
        except Exception as e:  # noqa: BLE001 - reported to the test
            if w[0] == "acquire" and "LockTimeout" in type(e).__name__:
                out("timeout")
            else:
                out("error %r" % (e,))
    client.stop()


if __name__ == "__main__":
    main()
