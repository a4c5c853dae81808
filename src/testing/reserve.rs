//! Names held machine-wide: the one way the harness keeps a server id or a
//! port of its servers from every other test process on the machine.
//!
//! Test servers of several processes (`make test`'s lanes) share the
//! loopback ports. A port or id a server lets go of for a moment (a member
//! stopped, a server restarted) could be taken by another process's server,
//! and the clients and peers that still name it would reach a foreign
//! server: a client told its session expired by a server that never knew
//! it, a peer counting a stranger's votes. So whatever the harness picks, it
//! reserves for as long as its owner lives, by binding a name only one
//! socket of the machine's network namespace (the scope of the loopback
//! ports it guards) can hold: on Linux an abstract Unix socket
//! (`zklock-zk-server-id-<id>`, `zklock-zk-port-<port>`), elsewhere a
//! loopback UDP port. The kernel frees the name when the [`Hold`] is
//! dropped or the process dies, however it dies: no file to clean, no stale
//! lock, no user that cannot take another user's freed name.

use std::io;

/// A name held machine-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    /// A ZooKeeper server id (`myid`).
    ServerId(u64),
    /// A TCP port of 127.0.0.1 a test server listens on.
    Port(u16),
}

/// What holds a name: a socket bound to it, until dropped.
#[derive(Debug)]
pub(crate) struct Hold {
    _socket: Socket,
}

#[cfg(target_os = "linux")]
type Socket = std::os::unix::net::UnixDatagram;

#[cfg(not(target_os = "linux"))]
type Socket = std::net::UdpSocket;

/// The first UDP port minus one of the server ids' names where there are
/// no abstract Unix sockets (below the usual ephemeral ranges).
#[cfg(not(target_os = "linux"))]
const ID_PORT_BASE: u16 = 29_000;

/// Takes `name`: `Ok(None)` when another socket (of this process or
/// another) holds it.
///
/// # Errors
/// The operating system's, when the name cannot be bound for another reason.
pub(crate) fn hold(name: Name) -> io::Result<Option<Hold>> {
    match bind(name) {
        Ok(socket) => Ok(Some(Hold { _socket: socket })),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(target_os = "linux")]
fn bind(name: Name) -> io::Result<Socket> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    let name = match name {
        Name::ServerId(id) => format!("zklock-zk-server-id-{id}"),
        Name::Port(port) => format!("zklock-zk-port-{port}"),
    };
    Socket::bind_addr(&SocketAddr::from_abstract_name(name)?)
}

#[cfg(not(target_os = "linux"))]
fn bind(name: Name) -> io::Result<Socket> {
    let port = match name {
        Name::ServerId(id) => u16::try_from(id)
            .ok()
            .and_then(|id| ID_PORT_BASE.checked_add(id))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "server id out of range"))?,
        // The same number over UDP: held as long as the TCP port is meant to be.
        Name::Port(port) => port,
    };
    Socket::bind(("127.0.0.1", port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name held is refused to a second holder until the first is dropped;
    /// the two kinds of names are apart.
    #[test]
    fn a_held_name_is_refused_until_dropped() {
        // A port below any ephemeral range no test server is given.
        let name = Name::Port(1_023);
        let first = hold(name).unwrap().expect("free");
        assert!(hold(name).unwrap().is_none());
        let id = hold(Name::ServerId(1_023)).unwrap();
        assert!(cfg!(not(target_os = "linux")) || id.is_some());
        drop(first);
        assert!(hold(name).unwrap().is_some());
    }
}
