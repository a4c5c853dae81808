"""A kazoo 2.11 participant for tests/recipes_dialects.rs: Counter and Election.

argv[1]: the connect string. Prints "ready" once connected (4 s session), then
one answer per stdin command (each starts with a word the test expects), plus
event lines "leader ID" / "released ID" (election). Exits when stdin closes.

Commands:
  counter PATH N [MODE]     N times `counter += 1` (MODE "curator": support_curator;
                             "float": a float counter, += 0.5) -> "done PRE POST" (the last change)
  value PATH [MODE]          counter.value                   -> "value V"
  election PATH ID           run Election(PATH, ID) in a thread, leading
                             until "release"                 -> "started"
  release                    end the leader function          -> "releasing"
  cancel                     election.cancel()               -> "cancelled"
  contenders PATH            Election(PATH).contenders()     -> "contenders a,b,..."
"""

import sys
import threading

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry


def out(line):
    with LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


LOCK = threading.Lock()


def make_counter(zk, path, mode):
    if mode == "float":
        return zk.Counter(path, default=0.0)
    return zk.Counter(path, support_curator=(mode == "curator"))


def main():
    # Unbounded retries of a counter's compare-and-set (kazoo's default
    # command retry gives up after the second lost race).
    zk = KazooClient(
        hosts=sys.argv[1],
        timeout=4.0,
        command_retry=KazooRetry(max_tries=-1, delay=0.005, max_delay=0.05),
    )
    zk.start(timeout=30)
    out("ready")
    election = None
    release = threading.Event()

    def lead(ident):
        out("leader " + ident)
        release.wait()
        release.clear()
        out("released " + ident)

    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        cmd = w[0]
        if cmd == "counter":
            mode = w[3] if len(w) > 3 else ""
            counter = make_counter(zk, w[1], mode)
            step = 0.5 if mode == "float" else 1
            for _ in range(int(w[2])):
                counter += step
            out("done %r %r" % (counter.pre_value, counter.post_value))
        elif cmd == "value":
            counter = make_counter(zk, w[1], w[2] if len(w) > 2 else "")
            out("value %r" % counter.value)
        elif cmd == "election":
            election = zk.Election(w[1], w[2])
            threading.Thread(
                target=election.run, args=(lead, w[2]), daemon=True
            ).start()
            out("started")
        elif cmd == "release":
            release.set()
            out("releasing")
        elif cmd == "cancel":
            election.cancel()
            out("cancelled")
        elif cmd == "contenders":
            out("contenders " + ",".join(zk.Election(w[1]).contenders()))
        else:
            out("error unknown command " + cmd)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
