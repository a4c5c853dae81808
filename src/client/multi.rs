//! `multi`: several operations applied atomically (Java's `ZooKeeper.multi`).

use super::*;

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

    fn read_multi(&self, body: &[u8]) -> std::result::Result<Vec<OpResult>, proto::DecodeError> {
        let mut r = Reader::new(body);
        let mut out = Vec::new();
        loop {
            let t = r.i32()?;
            let done = r.bool()?;
            let _err = r.i32()?;
            if done {
                break;
            }
            out.push(match t {
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
            });
        }
        Ok(out)
    }
}
