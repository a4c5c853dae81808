//! Benchmark of the secured connection set-up (issue 22, "Measured"): prints
//! figures, asserts nothing.
//!
//! The cost of opening an authenticated session, zklock against the Java
//! client in the same run, on harness servers that require SASL
//! (DIGEST-MD5): one on a plain port, one on a TLS port (client certificate
//! required) with SASL as well. For each client and each server, sessions
//! are opened and closed one after another in alternating rounds (Java's
//! rounds in one JVM, warmed up first); per session:
//!
//! - the time from the start of the connect to an authenticated session
//!   (zklock: `connect` returning, which it does once the SASL exchange is
//!   over; Java: the `SaslAuthenticated` event), median and p90;
//! - the packets the server received for it (`mntr` `zk_packets_received`,
//!   less the `mntr` reads themselves and the closeSession): the
//!   ConnectRequest and the SASL tokens, i.e. the handshake's round trips
//!   (DIGEST-MD5 needs two SASL round trips: the empty initial token that
//!   asks for the challenge, then the response; the server's `rspauth` comes
//!   with the second answer).
//!
//! `cargo bench --bench security` (`make bench` runs it). Sizes:
//! `ZK_BENCH_SASL_SESSIONS` (default 20 per round), `ZK_BENCH_ROUNDS` (5).
//! Every round is printed; the summary gives the median and the range
//! (min–max) of the rounds' medians, beside all sessions pooled.
//! Without a JDK the Java side is skipped with a note.

use std::time::{Duration, Instant};

use zklock::client::{SaslConfig, TlsConfig, WatchedEvent, ZooKeeper};
use zklock::testing::{ScratchDir, TestPki, ZkServer, NETTY_CLASSPATH};

mod common;

use common::{bench_rounds, env_usize, loadavg, percentile, us, LineProcess, Mntr, Spread};

const USERS: [(&str, &str); 1] = [("alice", "alice-secret")];
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
const SLF4J_NOP_JAR: &str = "/usr/share/java/slf4j-nop.jar";

/// One server to measure on: how zklock connects, how Java does.
struct Target {
    name: &'static str,
    connect: String,
    tls: Option<TlsConfig>,
    java_options: Vec<String>,
    /// The server's plain port, for `mntr`.
    mntr: Mntr,
}

fn zklock_round(t: &Target, n: usize) -> (Vec<Duration>, f64) {
    let before = t.mntr.packets();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let mut b = ZooKeeper::builder(&t.connect)
            .with_session_timeout(Duration::from_secs(30))
            .with_sasl(SaslConfig::digest_md5(USERS[0].0, USERS[0].1));
        if let Some(tls) = &t.tls {
            b = b.with_tls(tls.clone());
        }
        let start = Instant::now();
        let zk = b
            .connect(|_e: WatchedEvent| {})
            .unwrap_or_else(|e| panic!("{}: zklock cannot connect: {e}", t.name));
        times.push(start.elapsed());
        zk.close().unwrap();
    }
    let packets = t.mntr.packets() - before - t.mntr.overhead;
    // Less each session's closeSession.
    (times, packets as f64 / n as f64 - 1.0)
}

fn java_round(
    t: &Target,
    java: &mut LineProcess,
    n: usize,
) -> Result<(Vec<Duration>, f64), String> {
    let before = t.mntr.packets();
    let line = java.ask(&n.to_string(), Duration::from_secs(120))?;
    let packets = t.mntr.packets() - before - t.mntr.overhead;
    let Some(rest) = line.strip_prefix("done us") else {
        return Err(format!("Java: {line}"));
    };
    let times = rest
        .split_whitespace()
        .filter_map(|v| v.parse::<u64>().ok())
        .map(Duration::from_micros)
        .collect();
    Ok((times, packets as f64 / n as f64 - 1.0))
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "median {:>7.0} µs, p90 {:>7.0} µs",
        us(percentile(&v, 0.5)),
        us(percentile(&v, 0.9))
    )
}

/// The median of one round's times, µs.
fn median_us(times: &[Duration]) -> f64 {
    let mut v = times.to_vec();
    v.sort();
    us(percentile(&v, 0.5))
}

fn main() {
    let sessions = env_usize("ZK_BENCH_SASL_SESSIONS", 20);
    let rounds = bench_rounds(5);
    println!(
        "security bench: {} (load {}), {rounds} rounds x {sessions} sessions per client",
        common::utc_now(),
        loadavg()
    );
    let pki = TestPki::generate().expect("the test PKI (make zookeeper)");
    let alice = pki.client("alice").expect("a client certificate");
    let sasl = ZkServer::start_sasl(&USERS).expect("a SASL ZooKeeper");
    let both = ZkServer::start_tls_sasl(&pki, &USERS).expect("a TLS + SASL ZooKeeper");
    let jaas_dir = ScratchDir::new("bench-sasl").expect("a scratch directory");
    let jaas = jaas_dir.join("client.jaas");
    std::fs::write(
        &jaas,
        format!(
            "Client {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             username=\"{}\"\n  password=\"{}\";\n}};\n",
            USERS[0].0, USERS[0].1
        ),
    )
    .expect("write the JAAS file");
    let jaas_option = format!("-Djava.security.auth.login.config={}", jaas.display());
    let tls = TlsConfig::builder()
        .with_ca_file(pki.ca_pem())
        .with_client_cert(&alice.cert_pem, &alice.key_pem)
        .build()
        .expect("a TLS config");
    let targets = [
        Target {
            name: "SASL (DIGEST-MD5), plain TCP",
            connect: sasl.connect_string(),
            tls: None,
            java_options: vec![jaas_option.clone()],
            mntr: Mntr::new(&sasl.connect_string()),
        },
        Target {
            name: "TLS 1.2 (client certificate) + SASL (DIGEST-MD5)",
            connect: both.secure_connect_string().expect("a TLS port"),
            tls: Some(tls),
            java_options: {
                let mut o = pki.java_client_options(&alice);
                o.push(jaas_option.clone());
                o
            },
            mntr: Mntr::new(&both.connect_string()),
        },
    ];
    // Netty's codec jars too, for the Java client's TLS socket (see
    // NETTY_CLASSPATH).
    let mut jars = vec![ZOOKEEPER_JAR, SLF4J_NOP_JAR];
    jars.extend(NETTY_CLASSPATH.split(':'));
    let classes = common::compile_java("security", &["benches/java/SaslConnectBench.java"], &jars);
    for t in &targets {
        println!("\n{}:", t.name);
        let mut java = match &classes {
            Ok(c) => {
                let mut options: Vec<&str> = vec!["-XX:+UseSerialGC"];
                options.extend(t.java_options.iter().map(String::as_str));
                let mut cmd = c.java(&options, "SaslConnectBench");
                cmd.arg(&t.connect);
                match LineProcess::spawn("java-sasl", cmd) {
                    Ok(mut p) => match p.recv(Duration::from_secs(60)) {
                        Ok(l) if l == "ready" => {
                            // Warm-up: the JIT, the JAAS login, the TLS context.
                            let _ = java_round(t, &mut p, sessions);
                            Some(p)
                        }
                        other => {
                            println!("  note: the Java side did not start ({other:?}); skipped");
                            None
                        }
                    },
                    Err(e) => {
                        println!("  note: cannot start java ({e}); skipped");
                        None
                    }
                }
            }
            Err(e) => {
                println!("  note: no Java side ({e})");
                None
            }
        };
        let _ = zklock_round(t, sessions.min(5)); // warm-up
        let (mut zt, mut jt) = (Vec::new(), Vec::new());
        let (mut zp, mut jp) = (Vec::new(), Vec::new());
        // Per round: each side's median, µs.
        let (mut zm, mut jm) = (Vec::new(), Vec::new());
        for r in 1..=rounds {
            if let Some(p) = java.as_mut() {
                match java_round(t, p, sessions) {
                    Ok((times, packets)) => {
                        println!(
                            "  round {r}, Java:   {}; {packets:.2} packets per handshake",
                            summary(times.clone())
                        );
                        jm.push(median_us(&times));
                        jt.extend(times);
                        jp.push(packets);
                    }
                    Err(e) => {
                        println!("  note: {e}; Java side stopped");
                        java = None;
                    }
                }
            }
            let (times, packets) = zklock_round(t, sessions);
            println!(
                "  round {r}, zklock: {}; {packets:.2} packets per handshake",
                summary(times.clone())
            );
            zm.push(median_us(&times));
            zt.extend(times);
            zp.push(packets);
        }
        let spread = |v: &[f64], digits: usize| {
            Spread::of(v).map_or_else(|| "–".to_string(), |s| s.text(digits))
        };
        println!(
            "  {rounds} rounds: median (min–max) over the rounds' medians; all sessions pooled"
        );
        println!(
            "  zklock: connect + authenticate {} µs ({} pooled); {} packets to the server per handshake",
            spread(&zm, 0),
            summary(zt.clone()),
            spread(&zp, 2)
        );
        if !jt.is_empty() {
            println!(
                "  Java:   connect + authenticate {} µs ({} pooled); {} packets to the server per handshake",
                spread(&jm, 0),
                summary(jt.clone()),
                spread(&jp, 2)
            );
            let ratios: Vec<f64> = zm.iter().zip(&jm).map(|(z, j)| z / j).collect();
            println!("  zklock/Java, per round: {}x", spread(&ratios, 2));
        }
    }
    drop(jaas_dir);
    println!("\nload at the end: {}", loadavg());
}
