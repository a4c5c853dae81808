//! `multi`: several operations applied atomically (Java's `ZooKeeper.multi`),
//! and `multiRead`: several reads in one request (ZooKeeper 3.6).

use super::*;

/// One read of a [`ZooKeeper::multi_read`]: Java's `Op.getData(path)` and
/// `Op.getChildren(path)`. Neither sets a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadOp {
    /// The node's data and `Stat`.
    GetData {
        /// The node.
        path: String,
    },
    /// The node's children (unordered).
    GetChildren {
        /// The node.
        path: String,
    },
}

impl ReadOp {
    /// `Op.getData(path)`.
    pub fn get_data(path: impl Into<String>) -> ReadOp {
        ReadOp::GetData { path: path.into() }
    }

    /// `Op.getChildren(path)`.
    pub fn get_children(path: impl Into<String>) -> ReadOp {
        ReadOp::GetChildren { path: path.into() }
    }

    /// The path read.
    pub fn path(&self) -> &str {
        match self {
            ReadOp::GetData { path } | ReadOp::GetChildren { path } => path,
        }
    }
}

/// The answer to one [`ReadOp`]: Java's `OpResult.GetDataResult`,
/// `GetChildrenResult`, `ErrorResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadResult {
    /// A `GetData`'s answer.
    Data {
        /// The data as stored.
        data: Vec<u8>,
        /// The node's `Stat`.
        stat: Stat,
    },
    /// A `GetChildren`'s answer.
    Children {
        /// The children's names.
        children: Vec<String>,
    },
    /// This read failed (`NoNode`, `NoAuth`, ...); the others are answered
    /// all the same.
    Error {
        /// Why.
        code: ZkError,
    },
}

impl ZooKeeper {
    /// Runs `ops` atomically: all apply or none does. Returns one result per op.
    ///
    /// # Errors
    /// [`Error::Multi`] with the index and code of the first failing op and the
    /// server's per-op results (nothing was applied); `ConnectionLoss` and the
    /// other session errors as any call. An empty `ops` is a no-op.
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut w = Writer::request(0, op::MULTI);
        for o in ops {
            match o {
                Op::Create {
                    path,
                    data,
                    acl,
                    mode,
                } => {
                    validate_path(path, mode.is_sequential())?;
                    if mode.is_ttl() {
                        return Err(Error::BadArguments(format!(
                            "{mode:?} is not supported in multi"
                        )));
                    }
                    if acl.is_empty() {
                        return Err(Error::zk(ZkError::InvalidAcl, path.as_str()));
                    }
                    let t = if *mode == CreateMode::Container {
                        op::CREATE_CONTAINER
                    } else {
                        op::CREATE2
                    };
                    w.i32(t).bool(false).i32(-1);
                    w.string(&self.server_path(path))
                        .buffer(data)
                        .acl(acl)
                        .i32(mode.flags());
                }
                Op::Delete { path, version } => {
                    validate_path(path, false)?;
                    w.i32(op::DELETE).bool(false).i32(-1);
                    w.string(&self.server_path(path)).i32(version.unwrap_or(-1));
                }
                Op::SetData {
                    path,
                    data,
                    version,
                } => {
                    validate_path(path, false)?;
                    w.i32(op::SET_DATA).bool(false).i32(-1);
                    w.string(&self.server_path(path))
                        .buffer(data)
                        .i32(version.unwrap_or(-1));
                }
                Op::Check { path, version } => {
                    validate_path(path, false)?;
                    w.i32(op::CHECK).bool(false).i32(-1);
                    w.string(&self.server_path(path)).i32(version.unwrap_or(-1));
                }
            }
        }
        w.i32(-1).bool(true).i32(-1);
        let first = ops[0].path().to_string();
        let body = self.call(op::MULTI, w, None, &first)?;
        let results = self.read_multi(&body).map_err(|_| marshalling(&first))?;
        let failed = results
            .iter()
            .position(|r| matches!(r, OpResult::Error { code } if *code != 0 && *code != ZkError::RuntimeInconsistency.code()))
            .or_else(|| results.iter().position(|r| matches!(r, OpResult::Error { code } if *code != 0)));
        match failed {
            Some(index) => {
                let OpResult::Error { code } = results[index] else {
                    unreachable!("position found an error")
                };
                Err(Error::Multi {
                    index,
                    code: ZkError::from_code(code),
                    results,
                })
            }
            None => Ok(results),
        }
    }

    /// Several reads in one request and one round trip, answered at one point
    /// of the server's order (no write comes between them): ZooKeeper 3.6's
    /// `multiRead`, Java's `multi` of `Op.getData` / `Op.getChildren`. One
    /// result per op, in order; a read that fails is a [`ReadResult::Error`]
    /// and does not fail the others (the server answers each on its own).
    /// No watch is set. An empty `ops` is a no-op.
    ///
    /// # Errors
    /// `BadArguments` for a bad path; [`Error::Unsupported`] (`code()`
    /// `Unimplemented`) naming ZooKeeper 3.6 from an older server;
    /// `ConnectionLoss` and the other session errors as any call.
    pub fn multi_read(&self, ops: &[ReadOp]) -> Result<Vec<ReadResult>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut w = Writer::request(0, op::MULTI_READ);
        for o in ops {
            validate_path(o.path(), false)?;
            let t = match o {
                ReadOp::GetData { .. } => op::GET_DATA,
                ReadOp::GetChildren { .. } => op::GET_CHILDREN,
            };
            w.i32(t).bool(false).i32(-1);
            w.string(&self.server_path(o.path())).bool(false);
        }
        w.i32(-1).bool(true).i32(-1);
        let first = ops[0].path().to_string();
        self.check_size(&w, &first)?;
        let body = self.call(op::MULTI_READ, w, None, &first)?;
        let results = read_multi_read(&body).map_err(|_| marshalling(&first))?;
        if results.len() != ops.len() {
            return Err(marshalling(&first));
        }
        Ok(results)
    }

    fn read_multi(&self, body: &[u8]) -> std::result::Result<Vec<OpResult>, proto::DecodeError> {
        read_results(body, |t, r| {
            Ok(match t {
                op::CREATE => OpResult::Create {
                    path: self.client_path(&r.string()?),
                    stat: None,
                },
                op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                    let path = self.client_path(&r.string()?);
                    OpResult::Create {
                        path,
                        stat: Some(r.stat()?),
                    }
                }
                op::SET_DATA => OpResult::SetData { stat: r.stat()? },
                op::DELETE => OpResult::Delete,
                op::CHECK => OpResult::Check,
                op::ERROR => OpResult::Error { code: r.i32()? },
                _ => return Err(proto::DecodeError("unknown multi result type")),
            })
        })
    }
}

/// A `multi` or `multiRead` reply: a header per result (type, done, err),
/// then the result's record (read by `result` from its type), until the
/// `done` header.
fn read_results<T>(
    body: &[u8],
    mut result: impl FnMut(i32, &mut Reader<'_>) -> std::result::Result<T, proto::DecodeError>,
) -> std::result::Result<Vec<T>, proto::DecodeError> {
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    loop {
        let t = r.i32()?;
        let done = r.bool()?;
        let _err = r.i32()?;
        if done {
            break;
        }
        out.push(result(t, &mut r)?);
    }
    Ok(out)
}

/// A `multiRead` reply's results.
fn read_multi_read(body: &[u8]) -> std::result::Result<Vec<ReadResult>, proto::DecodeError> {
    read_results(body, |t, r| {
        Ok(match t {
            op::GET_DATA => {
                let data = r.buffer()?;
                ReadResult::Data {
                    data,
                    stat: r.stat()?,
                }
            }
            op::GET_CHILDREN => ReadResult::Children {
                children: r.strings()?,
            },
            op::ERROR => ReadResult::Error {
                code: ZkError::from_code(r.i32()?),
            },
            _ => return Err(proto::DecodeError("unknown multiRead result type")),
        })
    })
}
