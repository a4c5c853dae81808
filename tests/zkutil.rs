//! `zkutil` against a real ZooKeeper server: HBase's ZKUtil conventions (missing
//! nodes are values), watches reaching the watcher's listeners, creation with
//! parents, deletes, ACLs, and `multi_or_sequential`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zklock::client::{Acl, CreateMode, Op, WatchedEvent, ZooKeeper};
use zklock::testing::{test_servers, unique_root};
use zklock::zkutil::{self, ZkUtilOp};
use zklock::{Error, ZkError, ZooKeeperListener, ZooKeeperWatcher};

type TestResult = Result<(), Error>;

const WAIT: Duration = Duration::from_secs(10);

fn watcher() -> ZooKeeperWatcher {
    ZooKeeperWatcher::builder(&test_servers())
        .with_session_timeout(Duration::from_secs(4))
        .connect()
        .expect("connect a ZooKeeperWatcher")
}

/// A second, raw session: what "another process" does.
fn raw() -> ZooKeeper {
    ZooKeeper::connect(
        &test_servers(),
        Duration::from_secs(4),
        |_e: WatchedEvent| {},
    )
    .expect("connect a raw session")
}

/// A watcher and a fresh root znode for one test.
fn setup(name: &str) -> (ZooKeeperWatcher, String) {
    let zkw = watcher();
    let root = unique_root(name);
    zkutil::create_with_parents(&zkw, &root).expect("create the test root");
    (zkw, root)
}

/// Records every node event it is given (a general listener: sees all paths).
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<(&'static str, String)>>,
    cv: Condvar,
}

impl Recorder {
    fn push(&self, kind: &'static str, path: &str) {
        self.events.lock().push((kind, path.to_string()));
        self.cv.notify_all();
    }

    fn has(&self, kind: &str, path: &str) -> bool {
        self.events
            .lock()
            .iter()
            .any(|(k, p)| *k == kind && p == path)
    }

    /// Waits (bounded) until an event `kind` on `path` was recorded.
    fn wait_for(&self, kind: &str, path: &str) -> bool {
        let deadline = Instant::now() + WAIT;
        let mut events = self.events.lock();
        loop {
            if events.iter().any(|(k, p)| *k == kind && p == path) {
                return true;
            }
            if self.cv.wait_until(&mut events, deadline).timed_out() {
                return events.iter().any(|(k, p)| *k == kind && p == path);
            }
        }
    }
}

impl ZooKeeperListener for Recorder {
    fn node_created(&self, path: &str) {
        self.push("created", path);
    }
    fn node_deleted(&self, path: &str) {
        self.push("deleted", path);
    }
    fn node_data_changed(&self, path: &str) {
        self.push("changed", path);
    }
    fn node_children_changed(&self, path: &str) {
        self.push("children", path);
    }
}

fn recorder(zkw: &ZooKeeperWatcher) -> Arc<Recorder> {
    let r = Arc::new(Recorder::default());
    zkw.register_listener(r.clone());
    r
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

// ---------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------

#[test]
fn create_with_parents_five_levels_deep() -> TestResult {
    let (zkw, root) = setup("zkutil-parents");
    let leaf = format!("{root}/a/b/c/d/e");
    zkutil::create_with_parents_data(&zkw, &leaf, b"leaf")?;
    for level in ["a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e"] {
        let p = format!("{root}/{level}");
        assert!(zkutil::check_exists(&zkw, &p)?.is_some(), "{p} missing");
    }
    assert_eq!(
        zkutil::get_data(&zkw, &leaf)?.as_deref(),
        Some(&b"leaf"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/a/b/c/d"))?.as_deref(),
        Some(&b""[..]),
        "parents are created empty"
    );
    // Existing nodes are fine, and keep their data.
    zkutil::create_with_parents_data(&zkw, &leaf, b"other")?;
    zkutil::create_with_parents(&zkw, &leaf)?;
    assert_eq!(
        zkutil::get_data(&zkw, &leaf)?.as_deref(),
        Some(&b"leaf"[..])
    );
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn create_and_fail_silent_ignores_an_existing_node_the_caller_may_not_write() -> TestResult {
    let (zkw, root) = setup("zkutil-acl");
    let owner = raw();
    owner.add_auth("digest", b"u:p")?;
    let locked = format!("{root}/locked");
    let child = format!("{locked}/child");
    owner.create(
        &locked,
        b"owned",
        Acl::creator_all(),
        CreateMode::Persistent,
    )?;
    owner.create(&child, b"owned", Acl::creator_all(), CreateMode::Persistent)?;

    // The watcher's session is not authenticated: it may not write there.
    let e = zkutil::set_data(&zkw, &locked, b"x", None).unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");
    let e = zkutil::create_node_if_not_exists_no_watch(
        &zkw,
        &format!("{locked}/probe"),
        b"",
        CreateMode::Persistent,
    )
    .unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");

    // Existing nodes: no error, whether or not the parent lets us create.
    zkutil::create_and_fail_silent(&zkw, &locked)?;
    zkutil::create_and_fail_silent_data(&zkw, &child, b"mine")?;
    // A node that does not exist and may not be created: the error is not hidden.
    let e = zkutil::create_and_fail_silent(&zkw, &format!("{locked}/new")).unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");

    // Where it may create, it creates (once).
    let open = format!("{root}/open");
    zkutil::create_and_fail_silent_data(&zkw, &open, b"first")?;
    zkutil::create_and_fail_silent_data(&zkw, &open, b"second")?;
    assert_eq!(
        zkutil::get_data(&zkw, &open)?.as_deref(),
        Some(&b"first"[..])
    );

    owner.delete(&child, None)?;
    owner.delete(&locked, None)?;
    zkutil::delete_node_recursively(&zkw, &root)?;
    owner.close()?;
    zkw.close()
}

#[test]
fn create_variants_report_whether_they_created() -> TestResult {
    let (zkw, root) = setup("zkutil-create");
    let rec = recorder(&zkw);

    // createNodeIfNotExistsNoWatch: Some(path) when created, None when it existed.
    let p = format!("{root}/nowatch");
    assert_eq!(
        zkutil::create_node_if_not_exists_no_watch(&zkw, &p, b"1", CreateMode::Persistent)?,
        Some(p.clone())
    );
    assert_eq!(
        zkutil::create_node_if_not_exists_no_watch(&zkw, &p, b"2", CreateMode::Persistent)?,
        None
    );
    assert_eq!(zkutil::get_data(&zkw, &p)?.as_deref(), Some(&b"1"[..]));
    let seq = zkutil::create_node_if_not_exists_no_watch(
        &zkw,
        &format!("{root}/seq-"),
        b"",
        CreateMode::PersistentSequential,
    )?
    .expect("a sequential create always creates");
    assert!(
        seq.starts_with(&format!("{root}/seq-")) && seq.len() > root.len() + 15,
        "{seq}"
    );

    // createNodeIfNotExistsAndWatch: true, then false; a watch in both cases.
    let w = format!("{root}/andwatch");
    assert!(zkutil::create_node_if_not_exists_and_watch(&zkw, &w, b"a")?);
    assert!(!zkutil::create_node_if_not_exists_and_watch(
        &zkw, &w, b"b"
    )?);
    raw().set_data(&w, b"changed", None)?;
    assert!(
        rec.wait_for("changed", &w),
        "the watch reached the listener"
    );

    // createEphemeralNodeAndWatch: ephemeral of this session, watched.
    let e = format!("{root}/ephemeral");
    assert!(zkutil::create_ephemeral_node_and_watch(&zkw, &e, b"me")?);
    assert!(!zkutil::create_ephemeral_node_and_watch(
        &zkw, &e, b"again"
    )?);
    let (_, stat) = zkutil::get_data_no_watch(&zkw, &e)?.expect("exists");
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    raw().delete(&e, None)?;
    assert!(rec.wait_for("deleted", &e));

    // createAndWatch: the version; NodeExists the second time.
    let c = format!("{root}/createandwatch");
    assert_eq!(zkutil::create_and_watch(&zkw, &c, b"v")?, 0);
    let err = zkutil::create_and_watch(&zkw, &c, b"v").unwrap_err();
    assert!(err.is(ZkError::NodeExists), "{err}");
    zkutil::delete_node(&zkw, &c, None)?;
    assert!(rec.wait_for("deleted", &c), "createAndWatch set a watch");

    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

// ---------------------------------------------------------------------------
// Reads and watches
// ---------------------------------------------------------------------------

#[test]
fn missing_nodes_are_none_not_errors() -> TestResult {
    let (zkw, root) = setup("zkutil-missing");
    let missing = format!("{root}/missing");
    assert_eq!(zkutil::check_exists(&zkw, &missing)?, None);
    assert!(!zkutil::watch_and_check_exists(&zkw, &missing)?);
    assert!(!zkutil::set_watch_if_node_exists(&zkw, &missing)?);
    assert_eq!(zkutil::get_data(&zkw, &missing)?, None);
    assert_eq!(zkutil::get_data_and_watch(&zkw, &missing)?, None);
    assert_eq!(zkutil::get_data_and_watch_stat(&zkw, &missing)?, None);
    assert_eq!(zkutil::get_data_no_watch(&zkw, &missing)?, None);
    assert_eq!(zkutil::list_children_no_watch(&zkw, &missing)?, None);
    assert_eq!(
        zkutil::list_children_and_watch_for_new_children(&zkw, &missing)?,
        None
    );
    assert_eq!(zkutil::list_children_and_watch_them(&zkw, &missing)?, None);
    // Where HBase throws, so does zklock.
    let e = zkutil::set_data(&zkw, &missing, b"x", None).unwrap_err();
    assert!(e.is(ZkError::NoNode), "{e}");
    let e = zkutil::delete_node(&zkw, &missing, None).unwrap_err();
    assert!(e.is(ZkError::NoNode), "{e}");
    zkutil::delete_node_fail_silent(&zkw, &missing)?;
    zkutil::delete_node_recursively(&zkw, &missing)?;
    zkutil::delete_children_recursively(&zkw, &missing)?;
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn reads_return_data_versions_and_children() -> TestResult {
    let (zkw, root) = setup("zkutil-reads");
    let n = format!("{root}/n");
    zkutil::create_and_fail_silent_data(&zkw, &n, b"one")?;
    assert_eq!(zkutil::check_exists(&zkw, &n)?, Some(0));
    let stat = zkutil::set_data(&zkw, &n, b"two", Some(0))?;
    assert_eq!(stat.version, 1);
    assert_eq!(zkutil::check_exists(&zkw, &n)?, Some(1));
    let e = zkutil::set_data(&zkw, &n, b"three", Some(0)).unwrap_err();
    assert!(e.is(ZkError::BadVersion), "{e}");
    let (data, stat) = zkutil::get_data_no_watch(&zkw, &n)?.expect("exists");
    assert_eq!((data.as_slice(), stat.version), (&b"two"[..], 1));
    let (data, stat) = zkutil::get_data_and_watch_stat(&zkw, &n)?.expect("exists");
    assert_eq!((data.as_slice(), stat.version), (&b"two"[..], 1));
    assert_eq!(
        zkutil::get_data_and_watch(&zkw, &n)?.as_deref(),
        Some(&b"two"[..])
    );

    for c in ["x", "y", "z"] {
        zkutil::create_and_fail_silent(&zkw, &format!("{n}/{c}"))?;
    }
    let expect = vec!["x".to_string(), "y".into(), "z".into()];
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &n)?.map(sorted),
        Some(expect.clone())
    );
    assert_eq!(
        zkutil::list_children_and_watch_for_new_children(&zkw, &n)?.map(sorted),
        Some(expect.clone())
    );
    assert_eq!(
        zkutil::list_children_and_watch_them(&zkw, &n)?.map(sorted),
        Some(expect)
    );
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &format!("{n}/x"))?,
        Some(vec![])
    );
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn watches_reach_the_watchers_listeners() -> TestResult {
    let (zkw, root) = setup("zkutil-watches");
    let rec = recorder(&zkw);
    let other = raw();
    let data = format!("{root}/data");
    let kids = format!("{root}/kids");
    let later = format!("{root}/later");
    zkutil::create_and_fail_silent(&zkw, &data)?;
    zkutil::create_and_fail_silent(&zkw, &kids)?;
    zkutil::create_and_fail_silent(&zkw, &format!("{kids}/k1"))?;

    zkutil::get_data_and_watch(&zkw, &data)?;
    other.set_data(&data, b"new", None)?;
    assert!(rec.wait_for("changed", &data));

    assert!(!zkutil::watch_and_check_exists(&zkw, &later)?);
    other.create(&later, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
    assert!(rec.wait_for("created", &later));

    zkutil::list_children_and_watch_them(&zkw, &kids)?;
    other.create(
        &format!("{kids}/k2"),
        b"",
        Acl::open_unsafe(),
        CreateMode::Persistent,
    )?;
    assert!(rec.wait_for("children", &kids));
    other.delete(&format!("{kids}/k1"), None)?;
    assert!(
        rec.wait_for("deleted", &format!("{kids}/k1")),
        "each child is watched"
    );

    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

/// A lock waiter relies on this: `set_watch_if_node_exists` on a missing node
/// must not leave an exists watch that fires when someone re-creates the path.
#[test]
fn set_watch_if_node_exists_leaves_no_watch_on_a_missing_node() -> TestResult {
    let (zkw, root) = setup("zkutil-setwatch");
    let rec = recorder(&zkw);
    let other = raw();
    let unwatched = format!("{root}/unwatched");
    let watched = format!("{root}/watched");

    let before = zkw.zookeeper().watch_count();
    assert!(!zkutil::set_watch_if_node_exists(&zkw, &unwatched)?);
    assert_eq!(zkw.zookeeper().watch_count(), before, "no watch registered");
    assert!(!zkutil::watch_and_check_exists(&zkw, &watched)?);
    assert_eq!(zkw.zookeeper().watch_count(), before + 1);

    // Created in this order: an event for `unwatched` would arrive first.
    other.create(&unwatched, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
    other.create(&watched, b"", Acl::open_unsafe(), CreateMode::Persistent)?;
    assert!(rec.wait_for("created", &watched));
    assert!(
        !rec.has("created", &unwatched),
        "a stray exists watch fired"
    );

    // On an existing node it sets a data watch: deletion is heard.
    assert!(zkutil::set_watch_if_node_exists(&zkw, &unwatched)?);
    other.delete(&unwatched, None)?;
    assert!(rec.wait_for("deleted", &unwatched));

    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

#[test]
fn bad_paths_are_bad_arguments() -> TestResult {
    let zkw = watcher();
    for bad in [
        "",
        "relative",
        "/trailing/",
        "/double//slash",
        "/dot/./x",
        "/nul\0",
    ] {
        let checks: Vec<(&str, Result<(), Error>)> = vec![
            ("check_exists", zkutil::check_exists(&zkw, bad).map(drop)),
            (
                "watch_and_check_exists",
                zkutil::watch_and_check_exists(&zkw, bad).map(drop),
            ),
            (
                "set_watch_if_node_exists",
                zkutil::set_watch_if_node_exists(&zkw, bad).map(drop),
            ),
            ("get_data", zkutil::get_data(&zkw, bad).map(drop)),
            (
                "get_data_and_watch",
                zkutil::get_data_and_watch(&zkw, bad).map(drop),
            ),
            (
                "get_data_no_watch",
                zkutil::get_data_no_watch(&zkw, bad).map(drop),
            ),
            (
                "list_children_no_watch",
                zkutil::list_children_no_watch(&zkw, bad).map(drop),
            ),
            (
                "list_children_and_watch_them",
                zkutil::list_children_and_watch_them(&zkw, bad).map(drop),
            ),
            (
                "create_and_fail_silent",
                zkutil::create_and_fail_silent(&zkw, bad),
            ),
            (
                "create_with_parents",
                zkutil::create_with_parents(&zkw, bad),
            ),
            (
                "create_and_watch",
                zkutil::create_and_watch(&zkw, bad, b"").map(drop),
            ),
            ("set_data", zkutil::set_data(&zkw, bad, b"", None).map(drop)),
            (
                "delete_node",
                zkutil::delete_node(&zkw, bad, None).map(drop),
            ),
            (
                "delete_node_fail_silent",
                zkutil::delete_node_fail_silent(&zkw, bad),
            ),
            (
                "delete_node_recursively",
                zkutil::delete_node_recursively(&zkw, bad),
            ),
            (
                "delete_children_recursively",
                zkutil::delete_children_recursively(&zkw, bad),
            ),
            (
                "multi_or_sequential",
                zkutil::multi_or_sequential(&zkw, &[ZkUtilOp::delete_node_fail_silent(bad)], true),
            ),
        ];
        for (what, r) in checks {
            assert!(
                matches!(r, Err(Error::BadArguments(_))),
                "{what}({bad:?}) gave {r:?}"
            );
        }
    }
    zkw.close()
}

// ---------------------------------------------------------------------------
// Deletes
// ---------------------------------------------------------------------------

#[test]
fn delete_node_with_children_is_not_empty_and_the_node_stays() -> TestResult {
    let (zkw, root) = setup("zkutil-notempty");
    let parent = format!("{root}/parent");
    zkutil::create_with_parents(&zkw, &format!("{parent}/child"))?;
    let e = zkutil::delete_node(&zkw, &parent, None).unwrap_err();
    assert!(e.is(ZkError::NotEmpty), "{e}");
    assert!(
        zkutil::check_exists(&zkw, &parent)?.is_some(),
        "the node stays"
    );
    let e = zkutil::delete_node_fail_silent(&zkw, &parent).unwrap_err();
    assert!(
        e.is(ZkError::NotEmpty),
        "fail-silent only hides NoNode: {e}"
    );

    // Versions: a mismatch is `false` and the node stays.
    let leaf = format!("{parent}/child");
    zkutil::set_data(&zkw, &leaf, b"v1", None)?;
    assert!(!zkutil::delete_node(&zkw, &leaf, Some(0))?);
    assert!(zkutil::check_exists(&zkw, &leaf)?.is_some());
    assert!(zkutil::delete_node(&zkw, &leaf, Some(1))?);
    assert!(zkutil::check_exists(&zkw, &leaf)?.is_none());
    assert!(zkutil::delete_node(&zkw, &parent, None)?);
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn delete_node_recursively_removes_the_subtree_and_is_idempotent() -> TestResult {
    let (zkw, root) = setup("zkutil-rmr");
    let sub = format!("{root}/sub");
    let keep = format!("{root}/keep");
    for p in [
        format!("{sub}/a/x/deep"),
        format!("{sub}/a/y"),
        format!("{sub}/b"),
        format!("{sub}/c/z"),
        format!("{keep}/k"),
    ] {
        zkutil::create_with_parents(&zkw, &p)?;
    }
    zkutil::delete_node_recursively(&zkw, &sub)?;
    assert_eq!(zkutil::check_exists(&zkw, &sub)?, None);
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &root)?,
        Some(vec!["keep".to_string()]),
        "only the subtree is gone"
    );
    assert!(zkutil::check_exists(&zkw, &format!("{keep}/k"))?.is_some());
    zkutil::delete_node_recursively(&zkw, &sub)?;
    zkutil::delete_node_recursively(&zkw, &sub)?;

    // deleteChildrenRecursively keeps the node itself.
    zkutil::create_with_parents(&zkw, &format!("{keep}/k/l/m"))?;
    zkutil::delete_children_recursively(&zkw, &keep)?;
    assert_eq!(zkutil::list_children_no_watch(&zkw, &keep)?, Some(vec![]));
    zkutil::delete_children_recursively(&zkw, &keep)?;

    zkutil::delete_node_recursively(&zkw, &root)?;
    assert_eq!(zkutil::check_exists(&zkw, &root)?, None);
    zkw.close()
}

#[test]
fn delete_node_recursively_handles_a_tree_larger_than_one_request() -> TestResult {
    let (zkw, root) = setup("zkutil-rmr-big");
    let sub = format!("{root}/big");
    // 2 x 2 000 children with 250-byte names: ~1.2 MB of deletes, more than
    // ZooKeeper's 1 MB request limit, so one multi cannot carry them.
    let long = "n".repeat(240);
    let other = raw();
    for half in ["p1", "p2"] {
        let parent = format!("{sub}/{half}");
        zkutil::create_with_parents(&zkw, &parent)?;
        let ops: Vec<Op> = (0..2_000)
            .map(|i| {
                Op::create(
                    format!("{parent}/{long}{i:05}"),
                    Vec::new(),
                    CreateMode::Persistent,
                )
            })
            .collect();
        for chunk in ops.chunks(500) {
            other.multi(chunk)?;
        }
        assert_eq!(
            zkutil::list_children_no_watch(&zkw, &parent)?.map(|c| c.len()),
            Some(2_000)
        );
    }
    zkutil::delete_node_recursively(&zkw, &sub)?;
    assert_eq!(zkutil::check_exists(&zkw, &sub)?, None);
    zkutil::delete_node_recursively(&zkw, &root)?;
    other.close()?;
    zkw.close()
}

// ---------------------------------------------------------------------------
// multi_or_sequential
// ---------------------------------------------------------------------------

/// `root/exists` ("old") and `root/d` ("d0") exist; `root/new` and
/// `root/missing` do not.
fn multi_fixture(zkw: &ZooKeeperWatcher, root: &str) -> Result<Vec<ZkUtilOp>, Error> {
    zkutil::create_and_fail_silent_data(zkw, &format!("{root}/exists"), b"old")?;
    zkutil::create_and_fail_silent_data(zkw, &format!("{root}/d"), b"d0")?;
    Ok(vec![
        ZkUtilOp::create_and_fail_silent(format!("{root}/new"), b"n".to_vec()),
        ZkUtilOp::create_and_fail_silent(format!("{root}/exists"), b"clobber".to_vec()),
        ZkUtilOp::delete_node_fail_silent(format!("{root}/missing")),
        ZkUtilOp::set_data(format!("{root}/d"), b"d1".to_vec()),
    ])
}

#[test]
fn multi_failure_returns_the_first_failing_op_and_applies_nothing() -> TestResult {
    let (zkw, root) = setup("zkutil-multi-atomic");
    let ops = multi_fixture(&zkw, &root)?;
    let e = zkutil::multi_or_sequential(&zkw, &ops, false).unwrap_err();
    match &e {
        Error::Multi { index, code, .. } => {
            assert_eq!((*index, *code), (1, ZkError::NodeExists), "{e}");
        }
        other => panic!("expected Error::Multi, got {other:?}"),
    }
    assert_eq!(zkutil::check_exists(&zkw, &format!("{root}/new"))?, None);
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))?.as_deref(),
        Some(&b"d0"[..]),
        "nothing applied"
    );

    // A failure the fallback does not cover (NotEmpty) is returned even with it.
    zkutil::create_with_parents(&zkw, &format!("{root}/full/child"))?;
    let e = zkutil::multi_or_sequential(
        &zkw,
        &[
            ZkUtilOp::create_and_fail_silent(format!("{root}/new"), b"n".to_vec()),
            ZkUtilOp::delete_node_fail_silent(format!("{root}/full")),
        ],
        true,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Multi {
                index: 1,
                code: ZkError::NotEmpty,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(zkutil::check_exists(&zkw, &format!("{root}/new"))?, None);

    // All ops passing: applied atomically.
    zkutil::multi_or_sequential(
        &zkw,
        &[
            ZkUtilOp::create_and_fail_silent(format!("{root}/m1"), b"1".to_vec()),
            ZkUtilOp::SetData {
                path: format!("{root}/d"),
                data: b"d2".to_vec(),
                version: Some(0),
            },
            ZkUtilOp::delete_node_fail_silent(format!("{root}/exists")),
        ],
        false,
    )?;
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/m1"))?.as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))?.as_deref(),
        Some(&b"d2"[..])
    );
    assert_eq!(zkutil::check_exists(&zkw, &format!("{root}/exists"))?, None);

    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn multi_with_sequential_fallback_applies_what_can_pass() -> TestResult {
    let (zkw, root) = setup("zkutil-multi-fallback");
    let ops = multi_fixture(&zkw, &root)?;
    zkutil::multi_or_sequential(&zkw, &ops, true)?;
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/new"))?.as_deref(),
        Some(&b"n"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/exists"))?.as_deref(),
        Some(&b"old"[..]),
        "an existing node is left alone"
    );
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/missing"))?,
        None
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))?.as_deref(),
        Some(&b"d1"[..])
    );

    // Sequentially, a set-data is not silent: its error comes back, and the ops
    // before it are applied (not atomic).
    let e = zkutil::multi_or_sequential(
        &zkw,
        &[
            ZkUtilOp::create_and_fail_silent(format!("{root}/before"), b"".to_vec()),
            ZkUtilOp::set_data(format!("{root}/missing"), b"x".to_vec()),
            ZkUtilOp::create_and_fail_silent(format!("{root}/after"), b"".to_vec()),
        ],
        true,
    )
    .unwrap_err();
    assert!(
        e.is(ZkError::NoNode) && !matches!(e, Error::Multi { .. }),
        "{e:?}"
    );
    assert!(zkutil::check_exists(&zkw, &format!("{root}/before"))?.is_some());
    assert_eq!(zkutil::check_exists(&zkw, &format!("{root}/after"))?, None);

    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}

#[test]
fn multi_with_an_empty_op_list_is_a_no_op() -> TestResult {
    let (zkw, root) = setup("zkutil-multi-empty");
    zkutil::multi_or_sequential(&zkw, &[], false)?;
    zkutil::multi_or_sequential(&zkw, &[], true)?;
    assert_eq!(zkutil::list_children_no_watch(&zkw, &root)?, Some(vec![]));
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()?;
    // No request is made: even a closed watcher accepts it.
    zkutil::multi_or_sequential(&zkw, &[], true)?;
    Ok(())
}

#[test]
fn multi_with_a_bad_path_sends_nothing() -> TestResult {
    let (zkw, root) = setup("zkutil-multi-badpath");
    let e = zkutil::multi_or_sequential(
        &zkw,
        &[
            ZkUtilOp::create_and_fail_silent(format!("{root}/good"), b"".to_vec()),
            ZkUtilOp::create_and_fail_silent("no-slash", b"".to_vec()),
        ],
        true,
    )
    .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e:?}");
    assert_eq!(zkutil::check_exists(&zkw, &format!("{root}/good"))?, None);
    zkutil::delete_node_recursively(&zkw, &root)?;
    zkw.close()
}
