"""A kazoo 2.11 participant for tests/lock_dialects.rs: one KazooClient on
argv[1], driven by stdin commands, each lock in its own thread. Prints
`ready`, then (as tests/java/CuratorLocks.java):
  mutex NAME PATH [ID]   -> ok NAME      (Lock, identifier ID)
  rlock NAME PATH [ID]   -> ok NAME      (ReadLock)
  wlock NAME PATH [ID]   -> ok NAME      (WriteLock)
  acquire NAME [MS]      -> acquired NAME | timeout NAME | error NAME ...
  release NAME           -> released NAME | error NAME ...
  ring NAME ROUNDS FLAG  -> ringdone NAME ROUNDS VIOLATIONS
Answers of lock commands come when done. Exits when stdin closes.
"""
import os
import queue
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

out_lock = threading.Lock()


def out(s):
    with out_lock:
        sys.stdout.write(s + "\n")
        sys.stdout.flush()


locks = {}
workers = {}


def on(name, task):
    if name not in workers:
        q = queue.Queue()

        def run():
            while True:
                t = q.get()
                if t is None:
                    return
                try:
                    out(t())
                except Exception as e:  # noqa: BLE001 - reported to the test
                    out("error %s %r" % (name, e))

        threading.Thread(target=run, daemon=True).start()
        workers[name] = q
    workers[name].put(task)


def main():
    client = KazooClient(hosts=sys.argv[1], timeout=20)
    client.start(timeout=30)
    out("ready")
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        name = w[1] if len(w) > 1 else ""
        ident = w[3] if len(w) > 3 else None
        if w[0] == "mutex":
            locks[name] = client.Lock(w[2], ident)
            out("ok " + name)
        elif w[0] == "rlock":
            locks[name] = client.ReadLock(w[2], ident)
            out("ok " + name)
        elif w[0] == "wlock":
            locks[name] = client.WriteLock(w[2], ident)
            out("ok " + name)
        elif w[0] == "acquire":
            lock = locks[name]
            ms = int(w[2]) if len(w) > 2 else None

            def acquire(lock=lock, ms=ms, name=name):
                try:
                    ok = lock.acquire(timeout=None if ms is None else ms / 1000.0)
                except LockTimeout:
                    ok = False
                return ("acquired " if ok else "timeout ") + name

            on(name, acquire)
        elif w[0] == "release":
            lock = locks[name]
            on(name, lambda lock=lock, name=name: (lock.release(), "released " + name)[1])
        elif w[0] == "ring":
            lock, rounds, flag = locks[name], int(w[2]), w[3]

            def ring(lock=lock, rounds=rounds, flag=flag, name=name):
                violations = 0
                for _ in range(rounds):
                    lock.acquire()
                    try:
                        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                        os.close(fd)
                        mine = True
                    except FileExistsError:
                        violations += 1
                        mine = False
                    time.sleep(0.001)
                    if mine:
                        os.unlink(flag)
                    lock.release()
                return "ringdone %s %d %d" % (name, rounds, violations)

            on(name, ring)
        else:
            out("error %s unknown command %s" % (name, w[0]))
    client.stop()
    client.close()
    os._exit(0)


if __name__ == "__main__":
    main()
