//! Jute encoding of the ZooKeeper records the client sends and receives.
//!
//! Big-endian; `buffer`/`ustring` are an int length (-1 = null) then bytes;
//! `vector` an int count (-1 = null) then elements. Decoding never panics: every
//! read is bounds-checked and a bad record is a [`DecodeError`].

use crate::types::{Acl, ClientInfo, Id, Perms, Stat};

/// Opcodes (`ZooDefs.OpCode`).
pub(crate) mod op {
    pub(crate) const CREATE: i32 = 1;
    pub(crate) const DELETE: i32 = 2;
    pub(crate) const EXISTS: i32 = 3;
    pub(crate) const GET_DATA: i32 = 4;
    pub(crate) const SET_DATA: i32 = 5;
    pub(crate) const GET_ACL: i32 = 6;
    pub(crate) const SET_ACL: i32 = 7;
    pub(crate) const GET_CHILDREN: i32 = 8;
    pub(crate) const SYNC: i32 = 9;
    pub(crate) const PING: i32 = 11;
    pub(crate) const GET_CHILDREN2: i32 = 12;
    pub(crate) const CHECK: i32 = 13;
    pub(crate) const MULTI: i32 = 14;
    pub(crate) const MULTI_READ: i32 = 22;
    pub(crate) const CREATE2: i32 = 15;
    pub(crate) const RECONFIG: i32 = 16;
    pub(crate) const REMOVE_WATCHES: i32 = 18;
    pub(crate) const CREATE_CONTAINER: i32 = 19;
    pub(crate) const CREATE_TTL: i32 = 21;
    pub(crate) const AUTH: i32 = 100;
    pub(crate) const SET_WATCHES: i32 = 101;
    pub(crate) const SASL: i32 = 102;
    pub(crate) const GET_EPHEMERALS: i32 = 103;
    pub(crate) const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub(crate) const SET_WATCHES2: i32 = 105;
    pub(crate) const ADD_WATCH: i32 = 106;
    pub(crate) const WHO_AM_I: i32 = 107;
    pub(crate) const CLOSE_SESSION: i32 = -11;
    pub(crate) const ERROR: i32 = -1;

    /// The operation's name for the `op` label: Java's `ZooDefs.OpCode` names.
    #[cfg(feature = "metrics")]
    pub(crate) fn name(opcode: i32) -> &'static str {
        match opcode {
            CREATE => "create",
            DELETE => "delete",
            EXISTS => "exists",
            GET_DATA => "getData",
            SET_DATA => "setData",
            GET_ACL => "getACL",
            SET_ACL => "setACL",
            GET_CHILDREN => "getChildren",
            SYNC => "sync",
            PING => "ping",
            GET_CHILDREN2 => "getChildren2",
            CHECK => "check",
            MULTI => "multi",
            MULTI_READ => "multiRead",
            CREATE2 => "create2",
            RECONFIG => "reconfig",
            REMOVE_WATCHES => "removeWatches",
            CREATE_CONTAINER => "createContainer",
            CREATE_TTL => "createTTL",
            AUTH => "auth",
            SET_WATCHES => "setWatches",
            SASL => "sasl",
            GET_EPHEMERALS => "getEphemerals",
            GET_ALL_CHILDREN_NUMBER => "getAllChildrenNumber",
            SET_WATCHES2 => "setWatches2",
            ADD_WATCH => "addWatch",
            WHO_AM_I => "whoAmI",
            CLOSE_SESSION => "closeSession",
            _ => "unknown",
        }
    }
}

/// Special xids.
pub(crate) mod xid {
    pub(crate) const NOTIFICATION: i32 = -1;
    pub(crate) const PING: i32 = -2;
    pub(crate) const AUTH: i32 = -4;
    pub(crate) const SET_WATCHES: i32 = -8;
}

/// A record that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError(pub(crate) &'static str);

pub(crate) type DResult<T> = Result<T, DecodeError>;

/// Writes jute records into a frame. The first four bytes are the length,
/// filled in by [`Writer::finish`].
#[derive(Debug)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// A frame with a length placeholder.
    pub(crate) fn frame() -> Writer {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; 4]);
        Writer { buf }
    }

    /// A frame starting with a request header.
    pub(crate) fn request(xid: i32, opcode: i32) -> Writer {
        let mut w = Writer::frame();
        w.i32(xid).i32(opcode);
        w
    }

    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(crate) fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    pub(crate) fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.len(v.len());
        self.buf.extend_from_slice(v);
        self
    }

    pub(crate) fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }

    /// A `ustring` that may be null (length −1): jute's `null`.
    pub(crate) fn opt_string(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.string(v),
            None => self.i32(-1),
        }
    }

    pub(crate) fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.len(v.len());
        for s in v {
            self.string(s.as_ref());
        }
        self
    }

    pub(crate) fn acl(&mut self, acl: &[Acl]) -> &mut Self {
        self.len(acl.len());
        for a in acl {
            self.i32(a.perms.0).string(&a.id.scheme).string(&a.id.id);
        }
        self
    }

    fn len(&mut self, n: usize) {
        // Callers bound sizes far below i32::MAX (paths, 1 MB data); saturate anyway.
        self.i32(i32::try_from(n).unwrap_or(i32::MAX));
    }

    /// Bytes written after the length prefix.
    pub(crate) fn body_len(&self) -> usize {
        self.buf.len() - 4
    }

    /// The finished frame with its length prefix.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let len = i32::try_from(self.buf.len() - 4).unwrap_or(i32::MAX);
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

/// Patches the xid of a finished request frame (bytes 4..8).
pub(crate) fn set_xid(frame: &mut [u8], xid: i32) {
    if frame.len() >= 8 {
        frame[4..8].copy_from_slice(&xid.to_be_bytes());
    }
}

/// Reads jute records from one frame's body.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if self.buf.len() < n {
            return Err(DecodeError("record truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn i32(&mut self) -> DResult<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i64(&mut self) -> DResult<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub(crate) fn bool(&mut self) -> DResult<bool> {
        Ok(self.take(1)?[0] != 0)
    }

    /// A `buffer`; null reads as empty.
    pub(crate) fn buffer(&mut self) -> DResult<Vec<u8>> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(n as usize)?.to_vec())
    }

    /// A `ustring`; null reads as empty. Non-UTF-8 is an error.
    pub(crate) fn string(&mut self) -> DResult<String> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(String::new());
        }
        let b = self.take(n as usize)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError("string is not utf-8"))
    }

    fn count(&mut self) -> DResult<usize> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(0);
        }
        // Each element takes at least 4 bytes: a count beyond that is garbage,
        // refused before allocating.
        if n as usize > self.buf.len() / 4 {
            return Err(DecodeError("vector count exceeds the record"));
        }
        Ok(n as usize)
    }

    pub(crate) fn strings(&mut self) -> DResult<Vec<String>> {
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.string()?);
        }
        Ok(v)
    }

    pub(crate) fn acl(&mut self) -> DResult<Vec<Acl>> {
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let perms = Perms(self.i32()?);
            let scheme = self.string()?;
            let id = self.string()?;
            v.push(Acl::new(perms, Id { scheme, id }));
        }
        Ok(v)
    }

    /// A `WhoAmIResponse`: a vector of `ClientInfo { authScheme, user }`.
    pub(crate) fn client_infos(&mut self) -> DResult<Vec<ClientInfo>> {
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let auth_scheme = self.string()?;
            let user = self.string()?;
            v.push(ClientInfo { auth_scheme, user });
        }
        Ok(v)
    }

    pub(crate) fn stat(&mut self) -> DResult<Stat> {
        Ok(Stat {
            czxid: self.i64()?,
            mzxid: self.i64()?,
            ctime: self.i64()?,
            mtime: self.i64()?,
            version: self.i32()?,
            cversion: self.i32()?,
            aversion: self.i32()?,
            ephemeral_owner: self.i64()?,
            data_length: self.i32()?,
            num_children: self.i32()?,
            pzxid: self.i64()?,
        })
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }
}

/// `ReplyHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyHeader {
    pub(crate) xid: i32,
    pub(crate) zxid: i64,
    pub(crate) err: i32,
}

impl ReplyHeader {
    pub(crate) fn read(r: &mut Reader<'_>) -> DResult<ReplyHeader> {
        Ok(ReplyHeader {
            xid: r.i32()?,
            zxid: r.i64()?,
            err: r.i32()?,
        })
    }
}

/// `ConnectRequest` + the trailing `readOnly` boolean (Java's
/// `canBeReadOnly`: a read-only server may serve this client), as a frame.
pub(crate) fn connect_request(
    last_zxid: i64,
    timeout_ms: i32,
    session_id: i64,
    password: &[u8],
    read_only: bool,
) -> Vec<u8> {
    let mut w = Writer::frame();
    w.i32(0)
        .i64(last_zxid)
        .i32(timeout_ms)
        .i64(session_id)
        .buffer(password)
        .bool(read_only);
    w.finish()
}

/// `ConnectResponse` (the trailing `readOnly` boolean is optional on old servers).
/// `Debug` does not show the session password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    pub(crate) timeout_ms: i32,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
    pub(crate) read_only: bool,
}

impl std::fmt::Debug for ConnectResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectResponse")
            .field("timeout_ms", &self.timeout_ms)
            .field("session_id", &format_args!("{:#x}", self.session_id))
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl ConnectResponse {
    pub(crate) fn read(r: &mut Reader<'_>) -> DResult<ConnectResponse> {
        let _protocol_version = r.i32()?;
        let timeout_ms = r.i32()?;
        let session_id = r.i64()?;
        let password = r.buffer()?;
        let read_only = if r.remaining() > 0 { r.bool()? } else { false };
        Ok(ConnectResponse {
            timeout_ms,
            session_id,
            password,
            read_only,
        })
    }
}

/// `WatcherEvent`: (type, state, server path).
pub(crate) fn read_watcher_event(r: &mut Reader<'_>) -> DResult<(i32, i32, String)> {
    Ok((r.i32()?, r.i32()?, r.string()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session password (it takes the session over) is not in `Debug`.
    #[test]
    fn connect_response_debug_hides_the_password() {
        let r = ConnectResponse {
            timeout_ms: 6000,
            session_id: 0x1234,
            password: vec![0xab; 16],
            read_only: false,
        };
        let dbg = format!("{r:?}");
        assert!(dbg.contains("0x1234") && !dbg.contains("171"), "{dbg}");
    }

    #[test]
    fn frame_round_trip() {
        let mut w = Writer::request(7, op::GET_DATA);
        w.string("/a/b").bool(true).buffer(&[1, 2, 3]).i64(-5);
        let mut f = w.finish();
        assert_eq!(&f[..4], &((f.len() - 4) as i32).to_be_bytes());
        set_xid(&mut f, 9);
        let mut r = Reader::new(&f[4..]);
        assert_eq!(r.i32().unwrap(), 9);
        assert_eq!(r.i32().unwrap(), op::GET_DATA);
        assert_eq!(r.string().unwrap(), "/a/b");
        assert!(r.bool().unwrap());
        assert_eq!(r.buffer().unwrap(), vec![1, 2, 3]);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.remaining(), 0);
        assert!(r.i32().is_err());
    }

    #[test]
    fn garbage_never_panics() {
        // Length prefixes running past the end, huge counts, bad UTF-8.
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0, 0, 0, 9, 1],
            vec![0x7f, 0xff, 0xff, 0xff],
            vec![0, 0, 0, 2, 0xff, 0xfe],
            vec![0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1],
        ];
        for c in &cases {
            let _ = Reader::new(c).string();
            let _ = Reader::new(c).buffer();
            let _ = Reader::new(c).strings();
            let _ = Reader::new(c).acl();
            let _ = Reader::new(c).stat();
            let _ = ConnectResponse::read(&mut Reader::new(c));
            let _ = read_watcher_event(&mut Reader::new(c));
        }
        assert_eq!(
            Reader::new(&[0, 0, 0, 2, 0xff, 0xfe]).string(),
            Err(DecodeError("string is not utf-8"))
        );
        assert!(Reader::new(&[0x7f, 0xff, 0xff, 0xff]).strings().is_err());
    }

    #[test]
    fn null_buffers_read_empty() {
        let mut w = Writer::frame();
        w.i32(-1).i32(-1);
        let f = w.finish();
        let mut r = Reader::new(&f[4..]);
        assert_eq!(r.buffer().unwrap(), Vec::<u8>::new());
        assert_eq!(r.strings().unwrap(), Vec::<String>::new());
    }

    #[test]
    fn acl_and_stat_round_trip() {
        let mut w = Writer::frame();
        w.acl(Acl::open_unsafe());
        let s = Stat {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            data_length: 9,
            num_children: 10,
            pzxid: 11,
        };
        w.i64(s.czxid).i64(s.mzxid).i64(s.ctime).i64(s.mtime);
        w.i32(s.version).i32(s.cversion).i32(s.aversion);
        w.i64(s.ephemeral_owner)
            .i32(s.data_length)
            .i32(s.num_children);
        w.i64(s.pzxid);
        let f = w.finish();
        let mut r = Reader::new(&f[4..]);
        assert_eq!(r.acl().unwrap(), Acl::open_unsafe());
        assert_eq!(r.stat().unwrap(), s);
    }
}
