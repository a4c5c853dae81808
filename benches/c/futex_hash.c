/*
 * LD_PRELOAD shim for benches/scale.rs: sizes the process's private futex hash
 * before its first thread, which the bench cannot do itself (the crate forbids
 * `unsafe`).
 *
 * Since Linux 6.16 a process's futexes hash into a table of its own, sized
 * 4 x min(threads, CPUs) buckets (at least 16) when threads are made; with
 * 10,000 blocked threads on a 2-CPU machine every futex wake walks a chain of
 * about 600 waiters. prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, n, 0, 0)
 * sets n buckets (a power of two) instead.
 *
 * Slots: $ZK_SCALE_FUTEX_SLOTS, default 16384. Prints one line to stderr,
 * then sets ZK_SCALE_FUTEX_RESULT for the bench to read ("ok <slots>" or
 * "error <ERRNO> <message>") and removes LD_PRELOAD from the environment so
 * that the process's own children (getconf, ...) do not load it again.
 *
 *   gcc -shared -fPIC -O2 -o futex_hash.so futex_hash.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#ifndef PR_FUTEX_HASH
#define PR_FUTEX_HASH 78
#define PR_FUTEX_HASH_SET_SLOTS 1
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif

__attribute__((constructor)) static void zk_scale_futex_hash(void)
{
	const char *env = getenv("ZK_SCALE_FUTEX_SLOTS");
	unsigned long slots = env && *env ? strtoul(env, NULL, 10) : 16384;
	char result[160];

	if (prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, slots, 0, 0) == 0) {
		int now = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0);
		snprintf(result, sizeof result, "ok %d", now < 0 ? (int)slots : now);
		fprintf(stderr,
			"futex_hash.so: prctl(PR_FUTEX_HASH, SET_SLOTS, %lu): ok, "
			"%d slots\n",
			slots, now);
	} else {
		int e = errno;
		const char *name = strerrorname_np(e);
		snprintf(result, sizeof result, "error %s %s",
			 name ? name : "?", strerror(e));
		fprintf(stderr,
			"futex_hash.so: prctl(PR_FUTEX_HASH, SET_SLOTS, %lu) "
			"failed: %s (%s)%s\n",
			slots, name ? name : "?", strerror(e),
			e == EINVAL ? "; a kernel before 6.16, or slots not a "
				      "power of two" : "");
	}
	setenv("ZK_SCALE_FUTEX_RESULT", result, 1);
	unsetenv("LD_PRELOAD");
}
