//! zklock's error type: every ZooKeeper `KeeperException` code, plus the
//! library's own failures (timeouts, bad arguments, lock state).

use crate::types::{KeeperState, State};
use std::fmt;

/// A ZooKeeper error code: Java's `KeeperException.Code`.
///
/// Every code the server or the Java client defines has a variant; a code this
/// version does not know maps to [`ZkError::Unknown`] with the raw number, never a
/// panic. [`ZkError::from_code`] and [`ZkError::code`] convert to and from the wire
/// value.
///
/// The codes fall in the three classes of ZooKeeper's error-handling guide:
/// normal state (e.g. [`NoNode`](ZkError::NoNode), [`BadVersion`](ZkError::BadVersion)),
/// recoverable ([`is_retryable`](ZkError::is_retryable): `ConnectionLoss`,
/// `OperationTimeout`) and fatal ([`is_fatal`](ZkError::is_fatal): `SessionExpired`,
/// `AuthFailed`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZkError {
    /// `SYSTEMERROR` (-1): a system or server-side error.
    SystemError,
    /// `RUNTIMEINCONSISTENCY` (-2): a runtime inconsistency; in a failed `multi`, an
    /// operation rolled back because another one failed.
    RuntimeInconsistency,
    /// `DATAINCONSISTENCY` (-3).
    DataInconsistency,
    /// `CONNECTIONLOSS` (-4): the connection to the server was lost; the operation may
    /// or may not have been applied.
    ConnectionLoss,
    /// `MARSHALLINGERROR` (-5): a record could not be encoded or decoded.
    MarshallingError,
    /// `UNIMPLEMENTED` (-6): the server does not implement the operation.
    Unimplemented,
    /// `OPERATIONTIMEOUT` (-7): the operation timed out.
    OperationTimeout,
    /// `BADARGUMENTS` (-8): invalid arguments.
    BadArguments,
    /// `UNKNOWNSESSION` (-12).
    UnknownSession,
    /// `NEWCONFIGNOQUORUM` (-13).
    NewConfigNoQuorum,
    /// `RECONFIGINPROGRESS` (-14).
    ReconfigInProgress,
    /// `APIERROR` (-100).
    ApiError,
    /// `NONODE` (-101): the node does not exist.
    NoNode,
    /// `NOAUTH` (-102): not authorized.
    NoAuth,
    /// `BADVERSION` (-103): the expected version does not match.
    BadVersion,
    /// `NOCHILDRENFOREPHEMERALS` (-108): ephemeral nodes may not have children.
    NoChildrenForEphemerals,
    /// `NODEEXISTS` (-110): the node already exists.
    NodeExists,
    /// `NOTEMPTY` (-111): the node has children.
    NotEmpty,
    /// `SESSIONEXPIRED` (-112): the session has expired; fatal for the handle.
    SessionExpired,
    /// `INVALIDCALLBACK` (-113).
    InvalidCallback,
    /// `INVALIDACL` (-114).
    InvalidAcl,
    /// `AUTHFAILED` (-115): authentication failed; fatal for the handle.
    AuthFailed,
    /// `SESSIONMOVED` (-118): the session moved to another server.
    SessionMoved,
    /// `NOTREADONLY` (-119): a write on a read-only server.
    NotReadOnly,
    /// `EPHEMERALONLOCALSESSION` (-120).
    EphemeralOnLocalSession,
    /// `NOWATCHER` (-121): no such watch to remove.
    NoWatcher,
    /// `REQUESTTIMEOUT` (-122).
    RequestTimeout,
    /// `RECONFIGDISABLED` (-123).
    ReconfigDisabled,
    /// `SESSIONCLOSEDREQUIRESASLAUTH` (-124).
    SessionClosedRequireSaslAuth,
    /// `QUOTAEXCEEDED` (-125).
    QuotaExceeded,
    /// `THROTTLEDOP` (-127).
    Throttled,
    /// A code this version of zklock does not know.
    Unknown(i32),
}

impl ZkError {
    /// The error for a wire code. `0` (OK) is not an error; it maps to
    /// `Unknown(0)`.
    pub fn from_code(code: i32) -> ZkError {
        use ZkError::*;
        match code {
            -1 => SystemError,
            -2 => RuntimeInconsistency,
            -3 => DataInconsistency,
            -4 => ConnectionLoss,
            -5 => MarshallingError,
            -6 => Unimplemented,
            -7 => OperationTimeout,
            -8 => BadArguments,
            -12 => UnknownSession,
            -13 => NewConfigNoQuorum,
            -14 => ReconfigInProgress,
            -100 => ApiError,
            -101 => NoNode,
            -102 => NoAuth,
            -103 => BadVersion,
            -108 => NoChildrenForEphemerals,
            -110 => NodeExists,
            -111 => NotEmpty,
            -112 => SessionExpired,
            -113 => InvalidCallback,
            -114 => InvalidAcl,
            -115 => AuthFailed,
            -118 => SessionMoved,
            -119 => NotReadOnly,
            -120 => EphemeralOnLocalSession,
            -121 => NoWatcher,
            -122 => RequestTimeout,
            -123 => ReconfigDisabled,
            -124 => SessionClosedRequireSaslAuth,
            -125 => QuotaExceeded,
            -127 => Throttled,
            other => Unknown(other),
        }
    }

    /// The wire code of this error.
    pub fn code(self) -> i32 {
        use ZkError::*;
        match self {
            SystemError => -1,
            RuntimeInconsistency => -2,
            DataInconsistency => -3,
            ConnectionLoss => -4,
            MarshallingError => -5,
            Unimplemented => -6,
            OperationTimeout => -7,
            BadArguments => -8,
            UnknownSession => -12,
            NewConfigNoQuorum => -13,
            ReconfigInProgress => -14,
            ApiError => -100,
            NoNode => -101,
            NoAuth => -102,
            BadVersion => -103,
            NoChildrenForEphemerals => -108,
            NodeExists => -110,
            NotEmpty => -111,
            SessionExpired => -112,
            InvalidCallback => -113,
            InvalidAcl => -114,
            AuthFailed => -115,
            SessionMoved => -118,
            NotReadOnly => -119,
            EphemeralOnLocalSession => -120,
            NoWatcher => -121,
            RequestTimeout => -122,
            ReconfigDisabled => -123,
            SessionClosedRequireSaslAuth => -124,
            QuotaExceeded => -125,
            Throttled => -127,
            Unknown(code) => code,
        }
    }

    /// Recoverable: `ConnectionLoss` or `OperationTimeout`. The operation may be
    /// retried on the same session (ZooKeeper's error-handling guide).
    pub fn is_retryable(self) -> bool {
        matches!(self, ZkError::ConnectionLoss | ZkError::OperationTimeout)
    }

    /// Fatal for the session: `SessionExpired`, `AuthFailed`,
    /// `SessionClosedRequireSaslAuth`. A new handle is needed.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            ZkError::SessionExpired | ZkError::AuthFailed | ZkError::SessionClosedRequireSaslAuth
        )
    }

    /// The variant's name (`"NoNode"`, `"ConnectionLoss"`, ...; `"Unknown"`
    /// for every code zklock does not know, whatever its number): a static
    /// string, as the metrics' `code` label uses it (no allocation per
    /// failed reply, and a bounded set of label values).
    pub fn name(self) -> &'static str {
        use ZkError::*;
        match self {
            SystemError => "SystemError",
            RuntimeInconsistency => "RuntimeInconsistency",
            DataInconsistency => "DataInconsistency",
            ConnectionLoss => "ConnectionLoss",
            MarshallingError => "MarshallingError",
            Unimplemented => "Unimplemented",
            OperationTimeout => "OperationTimeout",
            BadArguments => "BadArguments",
            UnknownSession => "UnknownSession",
            NewConfigNoQuorum => "NewConfigNoQuorum",
            ReconfigInProgress => "ReconfigInProgress",
            ApiError => "ApiError",
            NoNode => "NoNode",
            NoAuth => "NoAuth",
            BadVersion => "BadVersion",
            NoChildrenForEphemerals => "NoChildrenForEphemerals",
            NodeExists => "NodeExists",
            NotEmpty => "NotEmpty",
            SessionExpired => "SessionExpired",
            InvalidCallback => "InvalidCallback",
            InvalidAcl => "InvalidAcl",
            AuthFailed => "AuthFailed",
            SessionMoved => "SessionMoved",
            NotReadOnly => "NotReadOnly",
            EphemeralOnLocalSession => "EphemeralOnLocalSession",
            NoWatcher => "NoWatcher",
            RequestTimeout => "RequestTimeout",
            ReconfigDisabled => "ReconfigDisabled",
            SessionClosedRequireSaslAuth => "SessionClosedRequireSaslAuth",
            QuotaExceeded => "QuotaExceeded",
            Throttled => "Throttled",
            Unknown(_) => "Unknown",
        }
    }

    fn describe(self) -> &'static str {
        use ZkError::*;
        match self {
            SystemError => "system error",
            RuntimeInconsistency => "runtime inconsistency",
            DataInconsistency => "data inconsistency",
            ConnectionLoss => "connection loss",
            MarshallingError => "marshalling error",
            Unimplemented => "unimplemented",
            OperationTimeout => "operation timeout",
            BadArguments => "bad arguments",
            UnknownSession => "unknown session",
            NewConfigNoQuorum => "new config has no quorum",
            ReconfigInProgress => "reconfig in progress",
            ApiError => "api error",
            NoNode => "no node",
            NoAuth => "not authenticated",
            BadVersion => "bad version",
            NoChildrenForEphemerals => "no children for ephemerals",
            NodeExists => "node exists",
            NotEmpty => "directory not empty",
            SessionExpired => "session expired",
            InvalidCallback => "invalid callback",
            InvalidAcl => "invalid acl",
            AuthFailed => "auth failed",
            SessionMoved => "session moved",
            NotReadOnly => "not a read-only call",
            EphemeralOnLocalSession => "ephemeral on local session",
            NoWatcher => "no watcher",
            RequestTimeout => "request timeout",
            ReconfigDisabled => "reconfig disabled",
            SessionClosedRequireSaslAuth => "session closed: sasl auth required",
            QuotaExceeded => "quota exceeded",
            Throttled => "op throttled",
            Unknown(_) => "unknown error",
        }
    }
}

impl fmt::Display for ZkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkError::Unknown(code) => write!(f, "unknown zookeeper error code {code}"),
            other => f.write_str(other.describe()),
        }
    }
}

impl std::error::Error for ZkError {}

/// zklock's error.
///
/// Match ZooKeeper codes through [`Error::Zk`] (or [`Error::code`]):
///
/// ```
/// use zklock::{Error, ZkError};
/// fn is_missing(e: &Error) -> bool {
///     matches!(e, Error::Zk { code: ZkError::NoNode, .. })
/// }
/// let e = Error::zk(ZkError::NoNode, "/a");
/// assert!(is_missing(&e));
/// assert_eq!(e.code(), Some(ZkError::NoNode));
/// assert_eq!(e.to_string(), "no node: /a");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A ZooKeeper error code, with the path of the operation when there is one.
    /// Returned after `RecoverableZooKeeper`'s retries, unchanged.
    Zk {
        /// The ZooKeeper code.
        code: ZkError,
        /// The path the operation was about, client-side (without chroot).
        path: Option<String>,
    },
    /// A `multi` failed: nothing was applied. `index` is the failing operation,
    /// `code` its error, `results` the per-operation outcome the server reported.
    Multi {
        /// The position of the operation that failed.
        index: usize,
        /// Its error code.
        code: ZkError,
        /// The server's per-operation results (the failing one, the rolled-back ones).
        results: Vec<crate::types::OpResult>,
    },
    /// An argument was rejected before anything was sent (bad path, bad connect
    /// string, data over the size limit, ...).
    BadArguments(String),
    /// `release()` on a lock this instance does not hold.
    LockNotHeld {
        /// The lock's znode.
        lock: String,
    },
    /// The lock's node is gone (session expiry, reaping): the lock was lost.
    LockLost {
        /// The lock node that vanished.
        path: String,
    },
    /// A lock instance is already held or being acquired (locks are not reentrant).
    LockBusy {
        /// The lock's znode.
        lock: String,
    },
    /// A lock's `acquire` was cancelled from another thread (see
    /// [`ZkInterProcessLockBase::cancel`](crate::lock::ZkInterProcessLockBase::cancel));
    /// the attempt left no node behind.
    Cancelled {
        /// The lock's znode.
        lock: String,
    },
    /// A lock participant found a node of another dialect in the lock's
    /// directory (see [`Dialect`](crate::lock::Dialect)): Curator, kazoo and
    /// HBase layouts do not see each other's nodes, so two holders could hold
    /// the lock at once. The attempt's own node was removed; nothing was held.
    MixedDialect {
        /// The foreign node's path (the lock's znode is its parent).
        path: String,
        /// The dialect that node is of.
        found: crate::names::Dialect,
    },
    /// The handle was closed.
    Closed,
    /// An I/O error outside a ZooKeeper session: the client's threads could not
    /// be spawned. (Server I/O is `ConnectionLoss`; the test harness has its own
    /// `std::io::Result`s.)
    Io(std::io::Error),
    /// TLS could not be set up (bad or missing PEM material), or no server could
    /// be reached over TLS (untrusted or misnamed server certificate, the client
    /// certificate refused, not a TLS port). See
    /// [`TlsError`].
    #[cfg(feature = "tls")]
    Tls(TlsError),
    /// The server lacks what the operation needs: it answered `UNIMPLEMENTED`
    /// to an operation that a later ZooKeeper version, or a server setting,
    /// provides (e.g. `whoAmI` before 3.7, persistent watches before 3.6, TTL
    /// nodes without `zookeeper.extendedTypesEnabled=true`). Java throws a
    /// bare `UnimplementedException`; zklock names what is missing.
    /// [`code`](Error::code) is still `Some(ZkError::Unimplemented)`, so
    /// `e.is(ZkError::Unimplemented)` holds; for a `reconfig` refused by
    /// servers without `reconfigEnabled=true` it is
    /// `Some(ZkError::ReconfigDisabled)`, the server's answer.
    ///
    /// A server older than the operation (not merely one with a setting off)
    /// also closes the connection after this answer (its
    /// `UnimplementedRequestProcessor`): the client reconnects and the
    /// session lives on, as with Java's client.
    Unsupported {
        /// The operation, e.g. `"whoAmI"`.
        operation: &'static str,
        /// What it needs, e.g. `"ZooKeeper 3.7 or later"`.
        needs: &'static str,
    },
    /// The server refused a read (`NOAUTH`) because the node's ACL gives the
    /// caller no `READ`: `getData`, `getChildren`, and `exists`, which
    /// ZooKeeper 3.8.4+ and 3.9.2+ check too (ZOOKEEPER-2590; 3.8.0 and
    /// earlier answered `exists` without looking at the ACL). Java throws a
    /// bare `NoAuthException`; zklock names the operation and the missing
    /// permission. [`code`](Error::code) is still `Some(ZkError::NoAuth)`,
    /// so `e.is(ZkError::NoAuth)` holds. See
    /// [`AclPolicy`](crate::client::AclPolicy)
    /// for the policies that give the other participants `READ`.
    NoReadPermission {
        /// The read: `"exists"`, `"getData"` or `"getChildren"`; `"check"`
        /// for a `multi`'s version check of the node (which needs `READ` on
        /// every server version), where a recipe names it.
        operation: &'static str,
        /// The node whose ACL lacks `READ` for the caller (client-side).
        path: String,
    },
    /// Connecting failed with a ZooKeeper code, and the client knows why:
    /// [`code`](Error::code) is the code (so [`Error::is`], `is_retryable`
    /// and `is_fatal` answer as for [`Error::Zk`]), `cause` is the cause as
    /// a value and `reason` says it in words. `AuthFailed`
    /// ([`ConnectCause::AuthFailed`]) with the SASL mechanism's or the
    /// server's reason (a stale keytab, an expired principal, an unknown
    /// service principal, a refused DIGEST-MD5 password); `ConnectionLoss`
    /// when no session was ever established and every server failed in a
    /// way another try within the connect wait would not mend: refused the
    /// TCP connection, has a host name that does not resolve, or answered
    /// with bytes that are not ZooKeeper's (see
    /// [`ZooKeeperBuilder::connect`](crate::client::ZooKeeperBuilder::connect)).
    /// These come at once, not after the connect wait. (A TLS failure is
    /// [`Error::Tls`].) Calls on a dead handle still fail with the bare
    /// [`Error::Zk`] code.
    Connect {
        /// The ZooKeeper code: `AuthFailed` or `ConnectionLoss`.
        code: ZkError,
        /// Why, as a value to match.
        cause: ConnectCause,
        /// Why, in words (a GSSAPI or KDC error, each server and its cause).
        reason: String,
    },
}

/// Why a first connection failed ([`Error::Connect`]'s `cause`), when the
/// client knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectCause {
    /// Every server refused the TCP connection: nothing listens there.
    Refused,
    /// No server's host name resolves to an address.
    Unresolvable,
    /// Every server answered, but not as ZooKeeper does (an HTTP or SSH
    /// server on that port, say).
    NotZooKeeper,
    /// Every server failed in one of the ways above, not all the same one
    /// (`reason` names each server's).
    Several,
    /// The authentication failed (SASL: DIGEST-MD5, Kerberos).
    AuthFailed,
}

impl fmt::Display for ConnectCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnectCause::Refused => "connection refused",
            ConnectCause::Unresolvable => "cannot resolve the host name",
            ConnectCause::NotZooKeeper => "not a ZooKeeper server",
            ConnectCause::Several => "every server failed",
            ConnectCause::AuthFailed => "authentication failed",
        })
    }
}

impl Error {
    /// What every call and wait of a session that ended in `state` fails with:
    /// `Expired` → `SessionExpired`, `AuthFailed` → `AuthFailed`, `Closed` →
    /// [`Error::Closed`]; `None` while the session lives. The one mapping of the
    /// crate (the client, the watcher and the trackers use it).
    pub(crate) fn for_ended_session(state: State) -> Option<Error> {
        match state {
            State::Expired => Some(Error::zk_code(ZkError::SessionExpired)),
            State::AuthFailed => Some(Error::zk_code(ZkError::AuthFailed)),
            State::Closed => Some(Error::Closed),
            _ => None,
        }
    }

    /// [`for_ended_session`](Self::for_ended_session) of a connection-state
    /// event (`Disconnected` is no end: the client reconnects).
    pub(crate) fn for_session_event(state: KeeperState) -> Option<Error> {
        Error::for_ended_session(match state {
            KeeperState::Expired => State::Expired,
            KeeperState::AuthFailed => State::AuthFailed,
            KeeperState::Closed => State::Closed,
            _ => return None,
        })
    }
}

impl Clone for Error {
    /// Clones the error; an `Io` error is cloned as its kind and message.
    fn clone(&self) -> Error {
        match self {
            Error::Zk { code, path } => Error::Zk {
                code: *code,
                path: path.clone(),
            },
            Error::Multi {
                index,
                code,
                results,
            } => Error::Multi {
                index: *index,
                code: *code,
                results: results.clone(),
            },
            Error::BadArguments(s) => Error::BadArguments(s.clone()),
            Error::LockNotHeld { lock } => Error::LockNotHeld { lock: lock.clone() },
            Error::LockLost { path } => Error::LockLost { path: path.clone() },
            Error::LockBusy { lock } => Error::LockBusy { lock: lock.clone() },
            Error::Cancelled { lock } => Error::Cancelled { lock: lock.clone() },
            Error::MixedDialect { path, found } => Error::MixedDialect {
                path: path.clone(),
                found: *found,
            },
            Error::Closed => Error::Closed,
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), e.to_string())),
            #[cfg(feature = "tls")]
            Error::Tls(e) => Error::Tls(e.clone()),
            Error::Unsupported { operation, needs } => Error::Unsupported { operation, needs },
            Error::NoReadPermission { operation, path } => Error::NoReadPermission {
                operation,
                path: path.clone(),
            },
            Error::Connect {
                code,
                cause,
                reason,
            } => Error::Connect {
                code: *code,
                cause: *cause,
                reason: reason.clone(),
            },
        }
    }
}

/// `Result` with zklock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A ZooKeeper error about `path`.
    pub fn zk(code: ZkError, path: impl Into<String>) -> Error {
        Error::Zk {
            code,
            path: Some(path.into()),
        }
    }

    /// A ZooKeeper error with no path.
    pub fn zk_code(code: ZkError) -> Error {
        Error::Zk { code, path: None }
    }

    /// The ZooKeeper code, if this error carries one.
    pub fn code(&self) -> Option<ZkError> {
        match self {
            Error::Zk { code, .. } | Error::Multi { code, .. } | Error::Connect { code, .. } => {
                Some(*code)
            }
            Error::Unsupported { needs, .. }
                if *needs == crate::client::config::NEEDS_RECONFIG_ENABLED =>
            {
                Some(ZkError::ReconfigDisabled)
            }
            Error::Unsupported { .. } => Some(ZkError::Unimplemented),
            Error::NoReadPermission { .. } => Some(ZkError::NoAuth),
            _ => None,
        }
    }

    /// Recoverable: a ZooKeeper `ConnectionLoss` or `OperationTimeout`.
    pub fn is_retryable(&self) -> bool {
        self.code().is_some_and(ZkError::is_retryable)
    }

    /// Fatal for the session: `SessionExpired`, `AuthFailed`, or a closed handle.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::Closed) || self.code().is_some_and(ZkError::is_fatal)
    }

    /// Whether this is the ZooKeeper error `code`.
    pub fn is(&self, code: ZkError) -> bool {
        self.code() == Some(code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Zk {
                code,
                path: Some(path),
            } => write!(f, "{code}: {path}"),
            Error::Zk { code, path: None } => write!(f, "{code}"),
            Error::Multi { index, code, .. } => {
                write!(f, "multi failed at operation {index}: {code}")
            }
            Error::BadArguments(why) => write!(f, "bad arguments: {why}"),
            Error::LockNotHeld { lock } => write!(f, "lock {lock} is not held"),
            Error::LockLost { path } => write!(f, "lock lost: node {path} is gone"),
            Error::LockBusy { lock } => {
                write!(
                    f,
                    "lock {lock} is already held or being acquired by this instance"
                )
            }
            Error::Cancelled { lock } => write!(f, "acquiring lock {lock} was cancelled"),
            Error::MixedDialect { path, found } => write!(
                f,
                "{path} is a lock node of the {found} dialect: refusing to mix dialects in one lock"
            ),
            Error::Closed => f.write_str("the zookeeper handle is closed"),
            Error::Io(e) => write!(f, "i/o error: {e}"),
            #[cfg(feature = "tls")]
            Error::Tls(e) => write!(f, "tls: {e}"),
            Error::Unsupported { operation, needs } => write!(
                f,
                "the server does not support {operation} (it needs {needs})"
            ),
            Error::NoReadPermission {
                operation: "exists",
                path,
            } => write!(
                f,
                "not authorized: exists of {path} needs READ permission on it, which its ACL \
                 does not give this session (ZooKeeper 3.8.4+ and 3.9.2+ check READ on exists, \
                 ZOOKEEPER-2590)"
            ),
            Error::NoReadPermission { operation, path } => write!(
                f,
                "not authorized: {operation} of {path} needs READ permission on it, which its \
                 ACL does not give this session"
            ),
            Error::Connect { code, reason, .. } => write!(f, "{code}: {reason}"),
        }
    }
}

/// Every variant's `Display` says all there is (the ZooKeeper code, the
/// path, the I/O or TLS error's message), so `source()` is `None`: an error
/// reporter that prints the chain (`anyhow`'s `{:#}`, `Caused by:`) prints
/// each fact once (std's guidance: a cause is either in the message or the
/// source, not both). The code stays typed through [`Error::code`] and the
/// variants themselves.
impl std::error::Error for Error {}

impl From<ZkError> for Error {
    fn from(code: ZkError) -> Error {
        Error::zk_code(code)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

/// Maps `NoNode` to `Ok(None)`: rusqlite's `OptionalExtension` for ZooKeeper.
pub trait ZkResultExt<T> {
    /// `Ok(v)` → `Ok(Some(v))`, `NoNode` → `Ok(None)`, any other error unchanged.
    fn optional(self) -> Result<Option<T>>;
}

impl<T> ZkResultExt<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Why TLS could not be set up or a TLS connection failed. Carried by
/// [`Error::Tls`]; never holds key material.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read, or held nothing of what was asked.
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The material was read but rustls refused it (a key that does not
    /// match its certificate, no protocol version, a bad CRL, ...).
    Config(String),
    /// The server's certificate is not issued by a trusted CA (or its chain or
    /// signature is bad).
    UntrustedServer(String),
    /// The server's certificate is valid but for another host
    /// ([`TlsConfigBuilder::with_hostname_verification`](crate::client::TlsConfigBuilder::with_hostname_verification)).
    HostnameMismatch {
        /// The host the client connected to.
        host: String,
    },
    /// The server's certificate has expired or is not yet valid.
    ServerCertificateExpired(String),
    /// The server's certificate is revoked by a configured CRL.
    ServerCertificateRevoked,
    /// The server refused the client's certificate, or that there is none
    /// (a TLS alert: `bad_certificate`, `certificate_required`,
    /// `certificate_expired`, `unknown_ca`, ...).
    ClientCertificateRejected(String),
    /// The server does not speak TLS on this port: it answered the
    /// ClientHello with something that is not TLS. (A server that closes the
    /// connection without a byte, as ZooKeeper's plaintext port does, cannot
    /// be told from one that is not serving: that is a lost connection,
    /// retried, and `ConnectionLoss` after the connect wait.)
    NotTls(String),
    /// The server sent another TLS alert, or the handshake failed otherwise.
    Handshake(String),
}

#[cfg(feature = "tls")]
impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::File { path, reason } => write!(f, "{}: {reason}", path.display()),
            TlsError::Config(why) => write!(f, "TLS configuration refused: {why}"),
            TlsError::UntrustedServer(why) => {
                write!(f, "the server's certificate is not trusted: {why}")
            }
            TlsError::HostnameMismatch { host } => write!(
                f,
                "the server's certificate is not valid for {host} (hostname verification is on)"
            ),
            TlsError::ServerCertificateExpired(why) => {
                write!(f, "the server's certificate is not valid now: {why}")
            }
            TlsError::ServerCertificateRevoked => {
                f.write_str("the server's certificate is revoked")
            }
            TlsError::ClientCertificateRejected(alert) => {
                write!(f, "the server refused the client certificate ({alert})")
            }
            TlsError::NotTls(why) => write!(f, "the server does not speak TLS here: {why}"),
            TlsError::Handshake(why) => write!(f, "TLS handshake failed: {why}"),
        }
    }
}

#[cfg(feature = "tls")]
impl std::error::Error for TlsError {}

#[cfg(feature = "tls")]
impl TlsError {
    /// As an `std::io::Error` (the connection's errors travel as those).
    pub(crate) fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, self)
    }

    /// The `TlsError` an `std::io::Error` carries, if any.
    pub(crate) fn in_io(e: &std::io::Error) -> Option<&TlsError> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsError>())
    }
}

#[cfg(test)]
mod tests {
    /// The chain as an error reporter prints it: each error's message,
    /// then its sources'.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }

    #[test]
    fn a_reported_chain_says_each_fact_once() {
        let e = Error::zk(ZkError::NoNode, "/probe/none");
        assert_eq!(chain(&e), "no node: /probe/none");
        assert_eq!(e.code(), Some(ZkError::NoNode), "the code stays typed");
        let io = Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert_eq!(chain(&io), "i/o error: refused");
        let anyhow = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(anyhow, "no node: /probe/none");
    }

    use super::*;

    /// Every known code's name is its variant's name, as the metrics' `code`
    /// label showed it when it was the `Debug` form; an unknown code's is
    /// `Unknown` (its `Debug` form carries the number).
    #[test]
    fn names_are_the_variants_names() {
        let mut known = 0;
        for code in -200..=0 {
            let e = ZkError::from_code(code);
            match e {
                ZkError::Unknown(n) => {
                    assert_eq!(n, code);
                    assert_eq!(e.name(), "Unknown");
                }
                _ => {
                    known += 1;
                    assert_eq!(e.name(), format!("{e:?}"), "code {code}");
                }
            }
        }
        assert_eq!(known, 31, "every known code was looked at");
    }

    #[test]
    fn codes_round_trip() {
        for code in (-200..=0).chain([i32::MIN, i32::MAX, 5]) {
            assert_eq!(ZkError::from_code(code).code(), code);
        }
        assert_eq!(ZkError::from_code(-101), ZkError::NoNode);
        assert_eq!(ZkError::from_code(-999), ZkError::Unknown(-999));
    }

    #[test]
    fn classes() {
        assert!(ZkError::ConnectionLoss.is_retryable());
        assert!(ZkError::OperationTimeout.is_retryable());
        assert!(!ZkError::SessionExpired.is_retryable());
        assert!(ZkError::SessionExpired.is_fatal());
        assert!(!ZkError::NoNode.is_fatal());
        assert!(Error::Closed.is_fatal());
    }

    #[test]
    fn error_is_send_sync_static_and_small() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<Error>();
        check::<ZkError>();
        assert!(
            std::mem::size_of::<Error>() <= 48,
            "{}",
            std::mem::size_of::<Error>()
        );
    }

    #[test]
    fn clone_keeps_code_and_path() {
        let e = Error::zk(ZkError::BadVersion, "/v").clone();
        assert!(
            matches!(e, Error::Zk { code: ZkError::BadVersion, path: Some(ref p) } if p == "/v")
        );
        let io = Error::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, "slow")).clone();
        assert!(matches!(io, Error::Io(ref e) if e.kind() == std::io::ErrorKind::TimedOut));
    }

    #[test]
    fn optional_maps_no_node() {
        let r: Result<u8> = Err(Error::zk(ZkError::NoNode, "/x"));
        assert!(r.optional().unwrap().is_none());
        let r: Result<u8> = Err(Error::zk(ZkError::NotEmpty, "/x"));
        assert!(r.optional().is_err());
        let r: Result<u8> = Ok(1);
        assert_eq!(r.optional().unwrap(), Some(1));
    }
}
