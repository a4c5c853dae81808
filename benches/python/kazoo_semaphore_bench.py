"""The Python side of benches/semaphore.rs: kazoo 2.11's Semaphore and Lock
under the same scenarios as zklock's semaphore and dialect mutex (as
benches/java/CuratorSemaphoreBench.java).

    python kazoo_semaphore_bench.py <connect string>
Two KazooClients. First line "ready"; then one answer line per stdin command,
<kind> being "semaphore" (Semaphore, <max> leases) or "mutex" (Lock, <max>
ignored):
    uncontended <kind> <path> <max> <cycles>
        -> ok cycles N elapsed_ns E p50_ns P p99_ns Q
    contended <kind> <path> <max> <holders> <grants>
        -> ok grants G elapsed_ns E most M
Exits when stdin closes.
"""
import sys
import threading
import time

from kazoo.client import KazooClient


def holder(kind, client, path, most_allowed):
    """One holder: a Semaphore or a Lock instance (both acquire() / release())."""
    if kind == "mutex":
        return client.Lock(path, "bench")
    return client.Semaphore(path, "bench", max_leases=most_allowed)


def main():
    clients = [KazooClient(hosts=sys.argv[1], timeout=30) for _ in range(2)]
    for c in clients:
        c.start(timeout=30)
    print("ready", flush=True)
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        try:
            if w[0] == "uncontended":
                kind, path, most_allowed, n = w[1], w[2], int(w[3]), int(w[4])
                s = holder(kind, clients[0], path, most_allowed)
                times = []
                start = time.perf_counter_ns()
                for _ in range(n):
                    c = time.perf_counter_ns()
                    s.acquire()
                    s.release()
                    times.append(time.perf_counter_ns() - c)
                elapsed = time.perf_counter_ns() - start
                times.sort()
                print("ok cycles %d elapsed_ns %d p50_ns %d p99_ns %d"
                      % (n, elapsed, times[n // 2], times[min(n - 1, n * 99 // 100)]),
                      flush=True)
            elif w[0] == "contended":
                kind, path, most_allowed = w[1], w[2], int(w[3])
                holders, grants = int(w[4]), int(w[5])
                state = {"holding": 0, "most": 0}
                guard = threading.Lock()
                go = threading.Barrier(holders + 1)
                errors = []

                def run(s):
                    try:
                        go.wait()
                        for _ in range(grants):
                            s.acquire()
                            with guard:
                                state["holding"] += 1
                                state["most"] = max(state["most"], state["holding"])
                                state["holding"] -= 1
                            s.release()
                    except Exception as e:  # noqa: BLE001 - reported
                        errors.append(e)

                threads = [
                    threading.Thread(
                        target=run,
                        args=(holder(kind, clients[h % 2], path, most_allowed),),
                    )
                    for h in range(holders)
                ]
                for t in threads:
                    t.start()
                start = time.perf_counter_ns()
                go.wait()
                for t in threads:
                    t.join()
                elapsed = time.perf_counter_ns() - start
                if errors:
                    raise errors[0]
                print("ok grants %d elapsed_ns %d most %d"
                      % (holders * grants, elapsed, state["most"]), flush=True)
            else:
                print("error unknown %s" % w[0], flush=True)
        except Exception as e:  # noqa: BLE001 - reported
            print("error %r" % (e,), flush=True)
    for c in clients:
        c.stop()


if __name__ == "__main__":
    main()
