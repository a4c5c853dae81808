# zklock — build, test and demo targets (run by .ci/run).
#
#   make demo       start a throwaway ZooKeeper, run the zklock CLI showcase, stop it
#   make cli        build the `zklock` command-line tool (target/release/zklock)
#   make test       fmt, clippy, rustdoc, then every test against real ZooKeeper
#   make check      fmt, clippy, rustdoc only
#   make loom       the wait engine's model check (loom; part of make test)
#   make bench      every benchmark, zklock side by side with Curator, kazoo and ZooKeeper's recipe
#   make bench-metrics  the uncontended lock cycle built without and with the feature `metrics`
#   make bench-storm    failover storms: zklock, Curator and kazoo fleets through a leader kill and a cut
#   make chaos      the long chaos runs (CHAOS_SEEDS=1,2,3 CHAOS_SECS=180 by default)
#   make zookeeper  install Apache ZooKeeper and a JRE if missing (Debian, as root)
#   make curator    install Apache Curator if missing (Debian, as root; for make bench)
#   make kazoo      install kazoo (Python) into target/kazoo-venv if missing (for make bench)
#   make kerberos   install MIT Kerberos (KDC, kadmin.local, kinit) and the GSSAPI build deps if missing
#   make zookeeper-versions  ZooKeeper 3.6.3 and 3.9.3 (+ Curator 2.13.0, 5.7.1) from PyPI's pyspark, once
#   make test-versions       every test binary on each server version (3.8, 3.6, 3.9)

SHELL := /bin/bash
CARGO ?= cargo

ZOOKEEPER_JAR := /usr/share/java/zookeeper.jar
SLF4J_JAR     := /usr/share/java/slf4j-simple.jar
# The TLS tests' Netty server factory and Java client (see zklock::testing::NETTY_CLASSPATH).
NETTY_CODEC_JAR := /usr/share/java/netty-codec.jar
CURATOR_JAR   := /usr/share/java/curator-recipes.jar

PYTHON3       ?= python3
KAZOO_VERSION := 2.11.0
KAZOO_VENV    := target/kazoo-venv

.PHONY: help zookeeper curator kazoo kerberos zookeeper-versions test test-versions check fmt clippy doc demo cli bench bench-metrics bench-storm chaos loom loom-build package

help:
	@echo "make demo | make test | make check | make bench | make bench-storm | make chaos | make cli | make zookeeper"

# Debian's `zookeeper` package brings the server jars (libzookeeper-java),
# slf4j (libslf4j-java) and Netty (libnetty-java, for the TLS tests); `openssl`
# and the JDK's `keytool` make the TLS tests' certificates and stores; the tests
# start the servers themselves on free ports.
# Quiet when everything is installed.
zookeeper:
	@missing=""; \
	if [ -z "$${ZK_TEST_CLASSPATH:-}" ]; then \
	  [ -f $(ZOOKEEPER_JAR) ] || missing="$$missing zookeeper"; \
	  [ -f $(SLF4J_JAR) ] || missing="$$missing libslf4j-java"; \
	  [ -f $(NETTY_CODEC_JAR) ] || missing="$$missing libnetty-java"; \
	fi; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	if [ -n "$${JAVA_HOME:-}" ] && [ -x "$$JAVA_HOME/bin/java" ]; then :; \
	elif ! command -v java >/dev/null 2>&1; then missing="$$missing default-jre-headless"; fi; \
	command -v javac >/dev/null 2>&1 || missing="$$missing default-jdk-headless"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make zookeeper: missing Debian packages:$$missing" >&2; \
	    echo "  install them as root:  apt-get update && apt-get install -y$$missing" >&2; \
	    exit 1; \
	  fi; \
	  echo "make zookeeper: installing$$missing"; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null; \
	  [ -f $(ZOOKEEPER_JAR) ] && command -v java >/dev/null 2>&1 || \
	    { echo "make zookeeper: installation failed" >&2; exit 1; }; \
	fi

# The Kerberos tests (tests/kerberos.rs, feature `kerberos`): Debian's MIT
# `krb5-kdc` (krb5kdc, kdb5_util), `krb5-admin-server` (kadmin.local) and
# `krb5-user` (kinit) run a throwaway KDC from files (zklock::testing::TestKdc);
# the `libgssapi` crate's build runs bindgen over the GSSAPI headers
# (`libkrb5-dev`, `libclang-dev`, `pkg-config`). Quiet when installed.
kerberos:
	@missing=""; \
	command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ] || missing="$$missing krb5-kdc"; \
	command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ] || missing="$$missing krb5-admin-server"; \
	command -v kinit >/dev/null 2>&1 || missing="$$missing krb5-user"; \
	command -v krb5-config >/dev/null 2>&1 || missing="$$missing libkrb5-dev"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	ls /usr/lib/*/libclang*.so >/dev/null 2>&1 || ls /usr/lib/llvm-*/lib/libclang*.so >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make kerberos: missing Debian packages:$$missing" >&2; \
	    echo "  install them as root:  apt-get update && apt-get install -y$$missing" >&2; \
	    exit 1; \
	  fi; \
	  echo "make kerberos: installing$$missing"; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null || \
	    { echo "make kerberos: installation failed" >&2; exit 1; }; \
	fi

# Debian's `libcurator-recipes-java` brings Apache Curator 5.4 (recipes,
# framework, client) and Guava, for the Curator comparison (benches/compare.rs).
# `make bench` and the interop tests (tests/common/participant.rs) need it.
# Quiet when installed.
curator: zookeeper
	@if [ ! -f $(CURATOR_JAR) ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make curator: missing Debian package: libcurator-recipes-java" >&2; \
	    echo "  install it as root:  apt-get update && apt-get install -y libcurator-recipes-java" >&2; \
	    exit 1; \
	  fi; \
	  echo "make curator: installing libcurator-recipes-java"; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libcurator-recipes-java >/dev/null; \
	  [ -f $(CURATOR_JAR) ] || { echo "make curator: installation failed" >&2; exit 1; }; \
	fi

# kazoo, the Python ZooKeeper client, for the kazoo column of the comparison
# (benches/compare.rs runs benches/python/kazoo_lock_bench.py with this venv's
# python): a venv under target/kazoo-venv with kazoo $(KAZOO_VERSION) from PyPI.
# `make bench` and the interop tests (tests/common/participant.rs) need it.
# Quiet when installed.
kazoo:
	@if ! $(KAZOO_VENV)/bin/python -c 'import sys; from kazoo.version import __version__ as v; sys.exit(v != "$(KAZOO_VERSION)")' >/dev/null 2>&1; then \
	  echo "make kazoo: installing kazoo $(KAZOO_VERSION) into $(KAZOO_VENV)"; \
	  { $(KAZOO_VENV)/bin/python -c '' 2>/dev/null || $(PYTHON3) -m venv --clear $(KAZOO_VENV); } && \
	  $(KAZOO_VENV)/bin/python -m pip install --quiet --disable-pip-version-check kazoo==$(KAZOO_VERSION) && \
	  $(KAZOO_VENV)/bin/python -c 'import kazoo' || { \
	    echo "make kazoo: installation failed (it needs $(PYTHON3) with its venv module," \
	      "Debian: python3-venv, and PyPI); without it \`cargo bench --bench compare\`" \
	      "runs without its kazoo column" >&2; \
	    exit 1; }; \
	fi

# The other server versions the tests run against (ZK_TEST_VERSION=3.6|3.9,
# see docs/server-versions.md): PyPI's pyspark source packages ship complete
# ZooKeeper server jars with their Netty and logging, and Curator:
#   pyspark 3.5.7: ZooKeeper 3.6.3, Curator 2.13.0;  pyspark 4.0.1: ZooKeeper 3.9.3, Curator 5.7.1.
# `pip download` (the kazoo venv's pip) fetches each source package once per
# machine into $(PYSPARK_CACHE) (317 and 434 MB; outside the checkout, so a fresh
# clone does not download them again; pip's own cache keeps no files this large);
# only the jars the server, the Java clients and Curator need are unpacked, into
# $(ZK_VERSIONS_DIR)/<3.6|3.9>/jars. Written per version:
#   server.classpath   the server (ZooKeeper + jute, Netty's split jars incl.
#                      netty-transport-classes-epoll and this arch's native epoll
#                      jar, not the empty netty-all aggregate; slf4j-api, log4j2
#                      and its binding, commons-io/-cli, metrics, snappy), and
#                      conf/ (log4j2.properties: INFO to stderr)
#   client.classpath   the Java client of that version (the same without log4j:
#                      slf4j then logs nothing, stdout stays the test protocol)
#   curator.classpath  Curator (2.13.0 / 5.7.1) and its Guava
#   version            the ZooKeeper version, e.g. 3.6.3
# Quiet when done. Needs the kazoo venv's pip and PyPI (or PIP_INDEX_URL).
ZK_VERSIONS_DIR := target/zookeeper-versions
PYSPARK_CACHE ?= $(or $(XDG_CACHE_HOME),$(or $(HOME),/tmp)/.cache)/zklock/pyspark
ZK_VERSIONS := 3.6:3.5.7:3.6.3 3.9:4.0.1:3.9.3
zookeeper-versions: kazoo
	@set -e; arch=$$(uname -m); [ "$$arch" != aarch64 ] || arch=aarch_64; \
	for v in $(ZK_VERSIONS); do \
	  IFS=: read -r short pyspark zk <<<"$$v"; dir=$(ZK_VERSIONS_DIR)/$$short; \
	  [ "$$(cat $$dir/version 2>/dev/null)" != "$$zk" ] || continue; \
	  tarball=$(PYSPARK_CACHE)/pyspark-$$pyspark.tar.gz; \
	  if [ ! -s "$$tarball" ]; then \
	    echo "make zookeeper-versions: downloading pyspark $$pyspark (ZooKeeper $$zk) from PyPI"; \
	    $(KAZOO_VENV)/bin/python -m pip download --quiet --disable-pip-version-check \
	      --no-deps --no-binary :all: -d $(PYSPARK_CACHE) pyspark==$$pyspark || \
	      { echo "make zookeeper-versions: pip download pyspark==$$pyspark failed" >&2; exit 1; }; \
	  fi; \
	  echo "make zookeeper-versions: unpacking ZooKeeper $$zk from $$tarball"; \
	  rm -rf $$dir; mkdir -p $$dir/jars $$dir/conf; \
	  tar -xzf $$tarball -C $$dir/jars --strip-components=3 --wildcards --no-anchored \
	    '*/deps/jars/zookeeper-*' '*/deps/jars/netty-*' '*/deps/jars/slf4j-api-*' \
	    '*/deps/jars/log4j-api-*' '*/deps/jars/log4j-core-*' '*/deps/jars/log4j-slf4j2-impl-*' \
	    '*/deps/jars/commons-io-*' '*/deps/jars/commons-cli-*' '*/deps/jars/metrics-core-*' \
	    '*/deps/jars/snappy-java-*' '*/deps/jars/audience-annotations-*' '*/deps/jars/curator-*' \
	    '*/deps/jars/guava-*' '*/deps/jars/failureaccess-*' 2>/dev/null || true; \
	  jars=$$(cd $$dir/jars && pwd); \
	  pick() { for j in "$$@"; do [ -f "$$jars/$$j" ] && printf '%s\n' "$$jars/$$j"; done; true; }; \
	  client=$$(cd $$jars && pick zookeeper-$$zk.jar zookeeper-jute-$$zk.jar \
	    $$(ls | grep -E '^netty-(buffer|codec|common|handler|resolver|transport|transport-classes-epoll|transport-native-unix-common|tcnative-classes)-[0-9]') \
	    $$(ls | grep -E "^netty-(transport-native-epoll|tcnative-boringssl-static)-.*-linux-$$arch\.jar$$") \
	    $$(ls | grep -E '^(slf4j-api|commons-io|commons-cli|metrics-core|snappy-java|audience-annotations)-[0-9]')); \
	  server=$$(cd $$jars && pick $$(ls | grep -E '^log4j-(api|core|slf4j2-impl)-[0-9]')); \
	  curator=$$(cd $$jars && pick $$(ls | grep -E '^(curator-(client|framework|recipes)|guava|failureaccess)-[0-9]')); \
	  [ -n "$$client" ] && [ -n "$$curator" ] && [ -f $$jars/zookeeper-$$zk.jar ] || \
	    { echo "make zookeeper-versions: $$tarball lacks the ZooKeeper $$zk jars (remove it to download it again)" >&2; exit 1; }; \
	  printf 'status = warn\nappender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %%d{HH:mm:ss.SSS} [%%t] %%-5p %%c{1} - %%m%%n\nrootLogger.level = info\nrootLogger.appenderRef.err.ref = err\n' >$$dir/conf/log4j2.properties; \
	  conf=$$(cd $$dir/conf && pwd); \
	  printf '%s\n' $$client | paste -sd: >$$dir/client.classpath; \
	  printf '%s\n' $$conf $$client $$server | paste -sd: >$$dir/server.classpath; \
	  printf '%s\n' $$curator | paste -sd: >$$dir/curator.classpath; \
	  echo $$zk >$$dir/version; \
	done

fmt:
	$(CARGO) fmt --all -- --check

clippy: kerberos
	$(CARGO) clippy --quiet --all-targets --all-features -- -D warnings

# rustdoc as docs.rs builds it ([package.metadata.docs.rs]: every feature,
# `--cfg docsrs`, so each feature-gated item shows its feature through
# `doc_cfg`; RUSTC_BOOTSTRAP lets the stable toolchain take that nightly
# attribute, which docs.rs' nightly has), and a check that it shows. In its own
# target directory: build scripts that read RUSTC_BOOTSTRAP would otherwise be
# run again, and their crates rebuilt, by every build without it.
DOC_TARGET = $${CARGO_TARGET_DIR:-target}/docsrs
doc: kerberos
	CARGO_TARGET_DIR=$(DOC_TARGET) RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="-Dwarnings --cfg docsrs" \
	  $(CARGO) doc --quiet --no-deps --all-features
	@grep -q 'Available on <strong>crate feature <code>tls</code>' \
	  $(DOC_TARGET)/doc/zklock/client/struct.TlsConfig.html || \
	  { echo "make doc: feature-gated items do not show their feature" >&2; exit 1; }
	@echo "make doc: $(DOC_TARGET)/doc/zklock/index.html (as docs.rs renders it)"

check: fmt clippy doc

# Unit, integration and doc tests, against real ZooKeeper servers that the tests
# start themselves (or $ZK_TEST_SERVERS). The test binaries mostly wait on
# servers and sessions, so they run TEST_LANES at a time, the slow ones first,
# each bounded by TEST_BINARY_TIMEOUT seconds (a hang fails with its output);
# each one's output is kept in target/test-logs/<binary>[@<version>].log and
# printed when it fails. `cargo test --all-features` runs them one after another
# instead, on one server version.
#
# Server versions (docs/server-versions.md): every binary runs on Debian's 3.8;
# the VERSION_TESTS binaries run again, the same executables with
# ZK_TEST_VERSION=<v>, on each of OTHER_VERSIONS (3.6.3 and 3.9.3, from
# `make zookeeper-versions`), with their Java clients and Curator (2.13.0 on
# 3.6, 5.7.1 on 3.9). A `binary=arg,arg` entry passes those arguments to the
# binary there (chaos: `--exact short_chaos_run short_chaos_run_reconfig`, the
# locks' short run and the one whose ensemble changes by reconfig: 19 s and
# 24–33 s under a load of 30; the long runs are `make chaos`).
# `make test-versions` runs every binary on every version.
#
# `make zookeeper-versions` (a download of 750 MB on a machine that has not
# cached it yet, network-bound) runs in the background while fmt, clippy,
# rustdoc and the test build (CPU-bound) run; a binary on another version
# waits for it at its start (its log: target/zookeeper-versions.log).
# Likewise rustdoc's check (make doc) and the loom models' release build run
# at low priority beside the test binaries, which leave about a third of the
# two cores idle waiting on servers (vmstat: 40% idle on the slowest six);
# the doc tests and the loom models run after them.
# 3 lanes. 4 lanes were faster (259 s against 301 s), but two cold
# fresh-clone runs at 4 lanes failed in tests that pass at 3 (recipes_cache
# twice, tls's SASL ensemble failover once): races that show under that load
# and are still to be found (2026-11-28).
TEST_LANES ?= 3
TEST_BINARY_TIMEOUT ?= 420
SLOW_TESTS := chaos tls recipes_lock_election client_faults recipes_coordination harness \
  kerberos sasl lock_safety recipes_dialects client_hardening recipes_cache lock_dialects lock cli
OTHER_VERSIONS ?= 3.6 3.9
# On 3.6 and 3.9, make test runs the binaries where the server version shows
# (the client and its typed errors, the locks and their Curator peers, the
# caches on persistent watches, SASL, and TLS's Java client, identities and
# protocol versions), not the whole suite again; make test-versions runs all.
VERSION_TESTS ?= chaos=--exact,short_chaos_run,short_chaos_run_reconfig \
  tls=java_client_connects,x509_identities,tls_12_and_13,client_certificate_refused,a_certificate_holders_lock \
  sasl lock_safety recipes_dialects recipes_cache lock_dialects lock_semaphore lock client server_versions \
  acl_versions ensembles
TEST_BINARIES := import sys, json; \
  arts = [m for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]]; \
  name = lambda m: m["target"]["name"] if m["target"]["kind"] == ["test"] else m["target"]["kind"][0] + "-" + m["target"]["name"]; \
  slow = "$(SLOW_TESTS)".split(); rank = lambda n: slow.index(n) if n in slow else len(slow); \
  wanted = dict((w.split("=") + [""])[:2] for w in sys.argv[2].split()); \
  runs = [(name(m), "-", m["executable"], "") for m in arts]; \
  runs += [(name(m), v, m["executable"], wanted.get(name(m), "").replace(",", " ")) for v in sys.argv[1].split() for m in arts if sys.argv[2] == "all" or name(m) in wanted]; \
  runs.sort(key=lambda r: rank(r[0])); \
  [print(*[x for x in r if x]) for r in runs]
VERSIONS_LOG := target/zookeeper-versions.log
VERSIONS_RC := target/zookeeper-versions.rc
# Starts `make zookeeper-versions` in the background (its exit code lands in
# $(VERSIONS_RC)); nothing when OTHER_VERSIONS is empty.
define versions_in_background
	@mkdir -p target; rm -f $(VERSIONS_RC); \
	if [ -n "$(strip $(OTHER_VERSIONS))" ]; then \
	  echo "make: make zookeeper-versions runs in the background (log: $(VERSIONS_LOG))"; \
	  ( $(MAKE) --no-print-directory zookeeper-versions >$(VERSIONS_LOG) 2>&1 </dev/null; \
	    echo $$? >$(VERSIONS_RC).tmp; mv $(VERSIONS_RC).tmp $(VERSIONS_RC) ) & \
	fi
endef
# $(call run_tests,<other versions>,<their binaries, or all>)
define run_tests
	@set -o pipefail; \
	bins=$$($(CARGO) test --all-features --no-run --message-format=json-render-diagnostics | \
	  $(PYTHON3) -c '$(TEST_BINARIES)' '$(1)' '$(2)') || exit 1; \
	rm -rf target/test-logs; mkdir -p target/test-logs; start=$$(date +%s); \
	( nice -n 10 $(MAKE) --no-print-directory doc loom-build >target/test-logs/side-builds.txt 2>&1 ) & side=$$!; \
	printf '%s\n' "$$bins" | xargs -P $(TEST_LANES) -L 1 bash -c ' \
	  name=$$0; v=$$1; exe=$$2; shift 2; [ "$$v" = - ] || name=$$name@$$v; \
	  log=target/test-logs/$$name.log; t0=$$(date +%s); \
	  if [ "$$v" != - ]; then \
	    while [ ! -e $(VERSIONS_RC) ]; do sleep 1; done; \
	    [ "$$(cat $(VERSIONS_RC))" = 0 ] || { echo "FAILED  $$name: make zookeeper-versions failed:"; \
	      cat $(VERSIONS_LOG); touch target/test-logs/FAILED; exit 0; }; fi; \
	  if ZK_TEST_VERSION=$${v#-} timeout -s KILL $(TEST_BINARY_TIMEOUT) "$$exe" "$$@" >"$$log" 2>&1; then \
	    echo "ok      $$name ($$(( $$(date +%s) - t0 )) s): $$(grep "^test result" "$$log" | tail -1)"; \
	  else \
	    echo "FAILED  $$name ($$(( $$(date +%s) - t0 )) s), its output:"; cat "$$log"; \
	    touch target/test-logs/FAILED; fi'; \
	echo "test binaries: $$(( $$(date +%s) - start )) s in $(TEST_LANES) lanes"; \
	wait $$side && echo "rustdoc and the loom build, beside the binaries: ok" || \
	  { cat target/test-logs/side-builds.txt; echo "make test: rustdoc or the loom build failed (see above)" >&2; exit 1; }; \
	[ ! -e target/test-logs/FAILED ] || { echo "make test: a test binary failed (see above)" >&2; exit 1; }
	$(CARGO) test --all-features --doc
	$(MAKE) --no-print-directory loom
endef

test: zookeeper curator kazoo kerberos
	$(versions_in_background)
	$(MAKE) --no-print-directory fmt clippy
	$(call run_tests,$(OTHER_VERSIONS),$(VERSION_TESTS))
	$(MAKE) --no-print-directory package

# What a user gets from the registry: `cargo package --list` (only the crate's
# sources, README, LICENSE, CHANGELOG) and `cargo publish --dry-run`, which
# builds the packaged crate on its own.
package:
	@files=$$($(CARGO) package --list --allow-dirty 2>/dev/null); \
	bad=$$(printf '%s\n' "$$files" | grep -Ev '^(src/.*\.rs|README\.md|docs/[a-z-]+\.md|LICENSE|CHANGELOG\.md|Cargo\.(toml|toml\.orig|lock)|\.cargo_vcs_info\.json)$$' || true); \
	[ -z "$$bad" ] || { echo "make package: the package holds files a user does not need:" >&2; echo "$$bad" >&2; exit 1; }; \
	echo "make package: $$(printf '%s\n' "$$files" | wc -l) files"
	$(CARGO) publish --dry-run --allow-dirty --quiet
	@# What `cargo install --features cli` builds (the command without the
	@# test harness), and the throwaway server alone, warning-free.
	$(CARGO) clippy --quiet --features cli --lib --bin zklock -- -D warnings
	$(CARGO) clippy --quiet --features server --lib -- -D warnings

# Every test binary on Debian's 3.8, then again on each of OTHER_VERSIONS.
test-versions: zookeeper curator kazoo kerberos
	$(versions_in_background)
	$(MAKE) --no-print-directory fmt clippy
	$(call run_tests,$(OTHER_VERSIONS),all)

# The wait engine's core (src/engine/wait.rs: generation, wake, session end, cancel)
# under every thread interleaving, with loom (a dev-dependency built only
# with --cfg zklock_loom, in its own target directory).
LOOM := RUSTFLAGS="--cfg zklock_loom" CARGO_TARGET_DIR=target/loom $(CARGO) test --release --lib
loom:
	$(LOOM) loom_

# The loom models' build alone (make test runs it beside the test binaries).
loom-build:
	$(LOOM) --no-run --quiet

# The example runs the `zklock` binary built beside it, against its own
# throwaway server unless $ZK_SERVERS names one.
# Cargo's own progress is shown: a first (cold) build compiles every
# dependency in release mode, which takes minutes (see the README).
demo: zookeeper
	@echo "make demo: 1/2 building zklock and the demo (release; the first build takes minutes)"
	$(CARGO) build --release --features cli --bin zklock --example demo
	@echo "make demo: 2/2 running the demo (a throwaway ZooKeeper, then zklock processes)"
	@$(CARGO) run --quiet --release --features cli --example demo

# The command-line tool; `cargo install --path . --features cli` installs it.
cli:
	$(CARGO) build --quiet --release --features cli --bin zklock
	@echo "built target/release/zklock (try: target/release/zklock --help)"

bench: zookeeper curator kazoo
	@if [ -d benches ]; then \
	  $(CARGO) bench --all-features; \
	else \
	  echo "make bench: no benchmarks yet (they land with the benchmark issue)"; \
	fi

# The metrics' cost (benches/metrics.rs, docs/observability.md): the
# uncontended write-lock cycle built without and with the feature `metrics`
# (a recorder installed), run alternately BENCH_METRICS_RUNS times each.
BENCH_METRICS_RUNS ?= 2
bench-metrics: zookeeper
	$(CARGO) bench --no-run --bench metrics
	$(CARGO) bench --no-run --bench metrics --features metrics
	@for i in $$(seq $(BENCH_METRICS_RUNS)); do \
	  $(CARGO) bench -q --bench metrics 2>/dev/null | grep '^metrics'; \
	  $(CARGO) bench -q --bench metrics --features metrics 2>/dev/null | grep '^metrics'; \
	done

# Failover storms (benches/storm.rs, docs/benchmarks.md): a fleet of
# STORM_CLIENTS clients per implementation (zklock, Curator, kazoo), each with a
# write lock, a tree cache of 1,000 nodes and a tracked node, on a three-member
# ensemble, through a leader kill, a cut of one member's clients and, as the
# control, the same changes without a fault; the tables have the median and
# range over STORM_ROUNDS rounds (about 20 minutes for 50 clients, 3 rounds).
STORM_CLIENTS ?= 50
STORM_ROUNDS ?= 3
bench-storm: zookeeper curator kazoo
	ZK_STORM_CLIENTS=$(STORM_CLIENTS) ZK_BENCH_ROUNDS=$(STORM_ROUNDS) $(CARGO) bench --bench storm

# The long chaos runs (tests/chaos.rs, `long_chaos_runs*`: the locks, the
# election, the queue, and the locks with the ensemble changed by reconfig
# twice a round): a three-server ensemble, worker processes and a nemesis
# (every fault, the reconfiguration too: a member removed and stopped, one
# added, a new one or the removed one again); each seed's report is printed. Four runs of CHAOS_SECS each
# per seed, plus about 20 s of start and calm each.
# CHAOS_SEEDS (comma-separated) and CHAOS_SECS (seconds of faults per seed).
# CHAOS_WORKER_LOG: the workers' client log level, kept in memory and written
# beside a failed run's event log (debug, so that a rare failure explains itself).
CHAOS_SEEDS ?= 1,2,3
CHAOS_SECS ?= 180
CHAOS_WORKER_LOG ?= debug
chaos: zookeeper
	CHAOS_SEEDS=$(CHAOS_SEEDS) CHAOS_SECS=$(CHAOS_SECS) CHAOS_WORKER_LOG=$(CHAOS_WORKER_LOG) \
	  $(CARGO) test --release --all-features \
	  --test chaos long_chaos_runs -- --ignored --nocapture
