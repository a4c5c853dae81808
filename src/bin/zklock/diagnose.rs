//! Why the servers of a connect string cannot be reached, for the message of
//! a failed connection: each host is resolved and dialled once more.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `": host:port: connection refused; other:2181: cannot resolve the host
/// name"`, or `""` when no cause is found (a server that accepts TCP but did
/// not answer as ZooKeeper is "no ZooKeeper answer").
pub(crate) fn why_unreachable(servers: &str, timeout: Duration) -> String {
    let hosts = servers.split('/').next().unwrap_or("");
    let per_try = timeout.clamp(Duration::from_millis(200), Duration::from_secs(2));
    let causes: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{h}: {}", cause(h, per_try)))
        .collect();
    if causes.is_empty() {
        String::new()
    } else {
        format!(" ({})", causes.join("; "))
    }
}

/// One host's cause.
fn cause(host: &str, timeout: Duration) -> String {
    let with_port = if host.starts_with('[') {
        if host.contains("]:") {
            host.to_string()
        } else {
            format!("{host}:2181")
        }
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:2181")
    };
    let addrs: Vec<SocketAddr> = match with_port.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return format!("cannot resolve the host name ({e})"),
    };
    let Some(addr) = addrs.first() else {
        return "cannot resolve the host name (no address)".to_string();
    };
    match TcpStream::connect_timeout(addr, timeout) {
        Ok(_) => "accepts connections but gave no ZooKeeper answer in time (not ZooKeeper, or \
                  overloaded)"
            .to_string(),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            "connection refused (nothing listens there)".to_string()
        }
        Err(e) if e.kind() == ErrorKind::TimedOut || e.kind() == ErrorKind::WouldBlock => {
            "connection timed out (no answer: firewall or host down?)".to_string()
        }
        Err(e) => e.to_string(),
    }
}
