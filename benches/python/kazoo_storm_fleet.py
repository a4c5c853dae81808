# The kazoo side of benches/storm.rs: a fleet of KazooClients in one process,
# each holding or waiting on a write lock (kazoo.recipe.lock.WriteLock), with a
# TreeCache of the tree and a DataWatch on the tracked node, through a leader
# kill or a cut of one member's clients.
#
#   python kazoo_storm_fleet.py <connect string> <root> <marker dir>
#
# It speaks the storm fleet's line protocol, described in
# benches/java/CuratorStormFleet.java (start / expect / release / quit; it prints
# ready, released, conn, lock, current, overlap, error). kazoo's default
# (threading) handler; every session with a 30 s timeout. A holder learns of its
# lock from the connection state (kazoo's lock has no events of its own):
# SUSPENDED -> indoubt, CONNECTED -> restored, LOST -> lost.

import logging
import os
import sys
import threading
import time


def say(line):
    with OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


OUT = threading.Lock()

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.recipe.cache import TreeCache, TreeEvent
    from kazoo.recipe.lock import WriteLock
except Exception as e:  # ImportError, or a broken install
    say("error kazoo cannot be imported by %s: %r" % (sys.executable, e))
    sys.exit(1)

# kazoo logs every dropped connection at WARNING to stderr: quiet for a storm.
logging.getLogger("kazoo").setLevel(logging.CRITICAL)

SESSION_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 120.0


class Member(object):
    def __init__(self, i):
        self.i = i
        self.client = None
        self.cache = None
        self.tracked = None
        self.holding = False
        self.marker = None
        self.reported_for = None


def tracker(m, first):
    # Two parameters: DataWatch passes the event too to a function of three.
    def on_data(data, stat):
        m.tracked = data
        first.set()

    return on_data


class Fleet(object):
    def __init__(self, connect, root, markers):
        self.connect = connect
        self.root = root
        self.markers = markers
        self.members = []
        self.expected = None
        self.releasing = threading.Event()
        self.released = 0
        self.released_lock = threading.Lock()

    def start(self, n, per_lock):
        loaded = threading.Semaphore(0)
        for i in range(n):
            m = Member(i)
            self.members.append(m)
            m.client = KazooClient(hosts=self.connect, timeout=SESSION_TIMEOUT_S)
            m.client.add_listener(self.state_listener(m))
            m.client.start(timeout=CONNECT_TIMEOUT_S)
            m.cache = TreeCache(m.client, self.root + "/tree")

            def on_event(event, loaded=loaded):
                if event.event_type == TreeEvent.INITIALIZED:
                    loaded.release()

            m.cache.listen(on_event)
            m.cache.start()
            first = threading.Event()
            m.client.DataWatch(self.root + "/tracked", tracker(m, first))
            first.wait()
        for _ in range(n):
            loaded.acquire()
        for m in self.members:
            lock = m.i // per_lock
            t = threading.Thread(
                target=self.hold,
                args=(m, "%s/locks/l%d" % (self.root, lock), os.path.join(self.markers, "l%d" % lock)),
            )
            t.daemon = True
            t.start()
        t = threading.Thread(target=self.check)
        t.daemon = True
        t.start()
        say("ready")

    def state_listener(self, m):
        def listener(state):
            s = {KazooState.SUSPENDED: "down", KazooState.CONNECTED: "up", KazooState.LOST: "lost"}.get(state)
            if s is None:
                return
            t = time.time_ns()
            say("conn %d %s %d" % (m.i, s, t))
            if m.holding:
                e = {"down": "indoubt", "up": "restored", "lost": "lost"}[s]
                if e == "lost" and m.marker is not None:
                    # No longer the holder: the next one may be granted.
                    try:
                        os.unlink(m.marker)
                    except OSError:
                        pass
                say("lock %d %s %d" % (m.i, e, t))

        return listener

    def hold(self, m, path, marker):
        try:
            m.marker = marker
            lock = WriteLock(m.client, path, "storm-%d" % m.i)
            lock.acquire()
            m.holding = True
            say("lock %d acquired %d" % (m.i, time.time_ns()))
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                say("overlap %d %s" % (m.i, os.path.basename(marker)))
            self.releasing.wait()
            try:
                os.unlink(marker)
            except FileNotFoundError:
                pass
            m.holding = False
            say("lock %d released %d" % (m.i, time.time_ns()))
            lock.release()
            with self.released_lock:
                self.released += 1
                if self.released == len(self.members):
                    say("released")
        except Exception as e:
            say("error client %d: %r" % (m.i, e))

    def has(self, m, path, data=None):
        node = m.cache.get_data(path)
        if node is None:
            return False
        return data is None or node.data == data

    def check(self):
        while True:
            e = self.expected
            if e is not None:
                stamp = e[0].encode()
                for m in self.members:
                    if m.reported_for is e:
                        continue
                    if (
                        self.has(m, self.root + "/tree/d0/n0", stamp)
                        and self.has(m, e[1])
                        and not self.has(m, e[2])
                        and m.tracked == stamp
                    ):
                        m.reported_for = e
                        say("current %d %d" % (m.i, time.time_ns()))
            time.sleep(0.005)

    def close(self):
        for m in self.members:
            try:
                m.cache.close()
                m.client.stop()
                m.client.close()
            except Exception:
                pass


def main():
    connect, root, markers = sys.argv[1], sys.argv[2], sys.argv[3]
    fleet = Fleet(connect, root, markers)
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "start":
            fleet.start(int(w[1]), int(w[2]))
        elif w[0] == "expect":
            fleet.expected = (w[1], w[2], w[3])
        elif w[0] == "release":
            fleet.releasing.set()
        else:
            break
    fleet.close()


if __name__ == "__main__":
    main()
