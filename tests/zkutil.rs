//! `zkutil` against a real ZooKeeper server: HBase's ZKUtil conventions (missing
//! nodes are values), watches reaching the watcher's listeners, creation with
//! parents, deletes, ACLs, and `multi_or_sequential`.

mod common;

use std::time::Duration;

use common::{node_recorder, raw_session, setup, watcher};
use zklock::client::{Acl, CreateMode, EventType, Op};
use zklock::testing::test_servers;
use zklock::zkutil::{self, ZkUtilOp};
use zklock::{Error, ZkError, ZooKeeperWatcher};

/// The session timeout of the tests' plain clients.
const SESSION: Duration = Duration::from_secs(4);

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

// ---------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------

#[test]
fn create_with_parents_five_levels_deep() {
    let (zkw, root) = setup("zkutil-parents");
    let leaf = format!("{root}/a/b/c/d/e");
    zkutil::create_with_parents_data(&zkw, &leaf, b"leaf").unwrap();
    for level in ["a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e"] {
        let p = format!("{root}/{level}");
        assert!(
            zkutil::check_exists(&zkw, &p).unwrap().is_some(),
            "{p} missing"
        );
    }
    assert_eq!(
        zkutil::get_data(&zkw, &leaf).unwrap().as_deref(),
        Some(&b"leaf"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/a/b/c/d"))
            .unwrap()
            .as_deref(),
        Some(&b""[..]),
        "parents are created empty"
    );
    // Existing nodes are fine, and keep their data.
    zkutil::create_with_parents_data(&zkw, &leaf, b"other").unwrap();
    zkutil::create_with_parents(&zkw, &leaf).unwrap();
    assert_eq!(
        zkutil::get_data(&zkw, &leaf).unwrap().as_deref(),
        Some(&b"leaf"[..])
    );
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

/// A chroot that does not exist: creating under it fails with `NoNode` for
/// `/` (the chroot itself), at once; HBase's recursion (create `/`, "fine",
/// retry, `NoNode` again...) overflowed the stack.
#[test]
fn create_with_parents_under_a_missing_chroot_fails_with_no_node() {
    let chroot = zklock::testing::unique_root("zkutil-no-chroot");
    let servers = format!("{}{chroot}", test_servers());
    let zkw = ZooKeeperWatcher::builder(&servers)
        .with_session_timeout(SESSION)
        .connect()
        .unwrap();
    for node in ["/a", "/a/b/c"] {
        match zkutil::create_with_parents_data(&zkw, node, b"x") {
            Err(Error::Zk {
                code: ZkError::NoNode,
                path,
            }) => assert_eq!(path.as_deref(), Some("/"), "{node}"),
            other => panic!("{node}: expected NoNode for /, got {other:?}"),
        }
    }
    zkw.close().unwrap();
    // Nothing was created outside the chroot either.
    let zk = raw_session(&test_servers(), SESSION);
    assert!(zk.exists(&chroot, false).unwrap().is_none());
}

#[test]
fn create_and_fail_silent_ignores_an_existing_node_the_caller_may_not_write() {
    let (zkw, root) = setup("zkutil-acl");
    let owner = raw_session(&test_servers(), SESSION);
    owner.add_auth("digest", b"u:p").unwrap();
    let locked = format!("{root}/locked");
    let child = format!("{locked}/child");
    // Readable by anyone (exists checks READ since ZOOKEEPER-2590, 3.8.4 and
    // 3.9.2), writable by the owner only.
    let owned: Vec<Acl> = Acl::creator_all()
        .iter()
        .chain(Acl::read_unsafe())
        .cloned()
        .collect();
    owner
        .create(&locked, b"owned", &owned, CreateMode::Persistent)
        .unwrap();
    owner
        .create(&child, b"owned", &owned, CreateMode::Persistent)
        .unwrap();
    // One the caller may not even read: found by exists before
    // ZOOKEEPER-2590; since, exists answers NoAuth (HBase's createAndFailSilent
    // then throws it), and zklock's goes on to the create, whose NodeExists
    // tells the node is there: Ok on every version (documented difference).
    let hidden = format!("{root}/hidden");
    owner
        .create(&hidden, b"", Acl::creator_all(), CreateMode::Persistent)
        .unwrap();
    zkutil::create_and_fail_silent(&zkw, &hidden).unwrap();
    owner.delete(&hidden, None).unwrap();

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
    zkutil::create_and_fail_silent(&zkw, &locked).unwrap();
    zkutil::create_and_fail_silent_data(&zkw, &child, b"mine").unwrap();
    // A node that does not exist and may not be created: the error is not hidden.
    let e = zkutil::create_and_fail_silent(&zkw, &format!("{locked}/new")).unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e}");

    // Where it may create, it creates (once).
    let open = format!("{root}/open");
    zkutil::create_and_fail_silent_data(&zkw, &open, b"first").unwrap();
    zkutil::create_and_fail_silent_data(&zkw, &open, b"second").unwrap();
    assert_eq!(
        zkutil::get_data(&zkw, &open).unwrap().as_deref(),
        Some(&b"first"[..])
    );

    owner.delete(&child, None).unwrap();
    owner.delete(&locked, None).unwrap();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    owner.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn create_variants_report_whether_they_created() {
    let (zkw, root) = setup("zkutil-create");
    let rec = node_recorder(&zkw);

    // createNodeIfNotExistsNoWatch: Some(path) when created, None when it existed.
    let p = format!("{root}/nowatch");
    assert_eq!(
        zkutil::create_node_if_not_exists_no_watch(&zkw, &p, b"1", CreateMode::Persistent).unwrap(),
        Some(p.clone())
    );
    assert_eq!(
        zkutil::create_node_if_not_exists_no_watch(&zkw, &p, b"2", CreateMode::Persistent).unwrap(),
        None
    );
    assert_eq!(
        zkutil::get_data(&zkw, &p).unwrap().as_deref(),
        Some(&b"1"[..])
    );
    let seq = zkutil::create_node_if_not_exists_no_watch(
        &zkw,
        &format!("{root}/seq-"),
        b"",
        CreateMode::PersistentSequential,
    )
    .unwrap()
    .expect("a sequential create always creates");
    assert!(
        seq.starts_with(&format!("{root}/seq-")) && seq.len() > root.len() + 15,
        "{seq}"
    );

    // createNodeIfNotExistsAndWatch: true, then false; a watch in both cases.
    let w = format!("{root}/andwatch");
    assert!(zkutil::create_node_if_not_exists_and_watch(&zkw, &w, b"a").unwrap());
    assert!(!zkutil::create_node_if_not_exists_and_watch(&zkw, &w, b"b").unwrap());
    raw_session(&test_servers(), SESSION)
        .set_data(&w, b"changed", None)
        .unwrap();
    assert!(
        rec.wait_for(EventType::NodeDataChanged, &w, 1),
        "the watch reached the listener"
    );

    // createEphemeralNodeAndWatch: ephemeral of this session, watched.
    let e = format!("{root}/ephemeral");
    assert!(zkutil::create_ephemeral_node_and_watch(&zkw, &e, b"me").unwrap());
    assert!(!zkutil::create_ephemeral_node_and_watch(&zkw, &e, b"again").unwrap());
    let (_, stat) = zkutil::get_data_no_watch(&zkw, &e)
        .unwrap()
        .expect("exists");
    assert_eq!(stat.ephemeral_owner, zkw.zookeeper().session_id());
    raw_session(&test_servers(), SESSION)
        .delete(&e, None)
        .unwrap();
    assert!(rec.wait_for(EventType::NodeDeleted, &e, 1));

    // createAndWatch: the version; NodeExists the second time.
    let c = format!("{root}/createandwatch");
    assert_eq!(zkutil::create_and_watch(&zkw, &c, b"v").unwrap(), 0);
    let err = zkutil::create_and_watch(&zkw, &c, b"v").unwrap_err();
    assert!(err.is(ZkError::NodeExists), "{err}");
    zkutil::delete_node(&zkw, &c, None).unwrap();
    assert!(
        rec.wait_for(EventType::NodeDeleted, &c, 1),
        "createAndWatch set a watch"
    );

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// Reads and watches
// ---------------------------------------------------------------------------

#[test]
fn missing_nodes_are_none_not_errors() {
    let (zkw, root) = setup("zkutil-missing");
    let missing = format!("{root}/missing");
    assert_eq!(zkutil::check_exists(&zkw, &missing).unwrap(), None);
    assert!(!zkutil::watch_and_check_exists(&zkw, &missing).unwrap());
    assert!(!zkutil::set_watch_if_node_exists(&zkw, &missing).unwrap());
    assert_eq!(zkutil::get_data(&zkw, &missing).unwrap(), None);
    assert_eq!(zkutil::get_data_and_watch(&zkw, &missing).unwrap(), None);
    assert_eq!(
        zkutil::get_data_and_watch_stat(&zkw, &missing).unwrap(),
        None
    );
    assert_eq!(zkutil::get_data_no_watch(&zkw, &missing).unwrap(), None);
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &missing).unwrap(),
        None
    );
    assert_eq!(
        zkutil::list_children_and_watch_for_new_children(&zkw, &missing).unwrap(),
        None
    );
    assert_eq!(
        zkutil::list_children_and_watch_them(&zkw, &missing).unwrap(),
        None
    );
    // Where HBase throws, so does zklock.
    let e = zkutil::set_data(&zkw, &missing, b"x", None).unwrap_err();
    assert!(e.is(ZkError::NoNode), "{e}");
    let e = zkutil::delete_node(&zkw, &missing, None).unwrap_err();
    assert!(e.is(ZkError::NoNode), "{e}");
    zkutil::delete_node_fail_silent(&zkw, &missing).unwrap();
    zkutil::delete_node_recursively(&zkw, &missing).unwrap();
    zkutil::delete_children_recursively(&zkw, &missing).unwrap();
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn reads_return_data_versions_and_children() {
    let (zkw, root) = setup("zkutil-reads");
    let n = format!("{root}/n");
    zkutil::create_and_fail_silent_data(&zkw, &n, b"one").unwrap();
    assert_eq!(zkutil::check_exists(&zkw, &n).unwrap(), Some(0));
    let stat = zkutil::set_data(&zkw, &n, b"two", Some(0)).unwrap();
    assert_eq!(stat.version, 1);
    assert_eq!(zkutil::check_exists(&zkw, &n).unwrap(), Some(1));
    let e = zkutil::set_data(&zkw, &n, b"three", Some(0)).unwrap_err();
    assert!(e.is(ZkError::BadVersion), "{e}");
    let (data, stat) = zkutil::get_data_no_watch(&zkw, &n)
        .unwrap()
        .expect("exists");
    assert_eq!((data.as_slice(), stat.version), (&b"two"[..], 1));
    let (data, stat) = zkutil::get_data_and_watch_stat(&zkw, &n)
        .unwrap()
        .expect("exists");
    assert_eq!((data.as_slice(), stat.version), (&b"two"[..], 1));
    assert_eq!(
        zkutil::get_data_and_watch(&zkw, &n).unwrap().as_deref(),
        Some(&b"two"[..])
    );

    for c in ["x", "y", "z"] {
        zkutil::create_and_fail_silent(&zkw, &format!("{n}/{c}")).unwrap();
    }
    let expect = vec!["x".to_string(), "y".into(), "z".into()];
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &n)
            .unwrap()
            .map(sorted),
        Some(expect.clone())
    );
    assert_eq!(
        zkutil::list_children_and_watch_for_new_children(&zkw, &n)
            .unwrap()
            .map(sorted),
        Some(expect.clone())
    );
    assert_eq!(
        zkutil::list_children_and_watch_them(&zkw, &n)
            .unwrap()
            .map(sorted),
        Some(expect)
    );
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &format!("{n}/x")).unwrap(),
        Some(vec![])
    );
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn watches_reach_the_watchers_listeners() {
    let (zkw, root) = setup("zkutil-watches");
    let rec = node_recorder(&zkw);
    let other = raw_session(&test_servers(), SESSION);
    let data = format!("{root}/data");
    let kids = format!("{root}/kids");
    let later = format!("{root}/later");
    zkutil::create_and_fail_silent(&zkw, &data).unwrap();
    zkutil::create_and_fail_silent(&zkw, &kids).unwrap();
    zkutil::create_and_fail_silent(&zkw, &format!("{kids}/k1")).unwrap();

    zkutil::get_data_and_watch(&zkw, &data).unwrap();
    other.set_data(&data, b"new", None).unwrap();
    assert!(rec.wait_for(EventType::NodeDataChanged, &data, 1));

    assert!(!zkutil::watch_and_check_exists(&zkw, &later).unwrap());
    other
        .create(&later, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(rec.wait_for(EventType::NodeCreated, &later, 1));

    zkutil::list_children_and_watch_them(&zkw, &kids).unwrap();
    other
        .create(
            &format!("{kids}/k2"),
            b"",
            Acl::open_unsafe(),
            CreateMode::Persistent,
        )
        .unwrap();
    assert!(rec.wait_for(EventType::NodeChildrenChanged, &kids, 1));
    other.delete(&format!("{kids}/k1"), None).unwrap();
    assert!(
        rec.wait_for(EventType::NodeDeleted, &format!("{kids}/k1"), 1),
        "each child is watched"
    );

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// A lock waiter relies on this: `set_watch_if_node_exists` on a missing node
/// must not leave an exists watch that fires when someone re-creates the path.
#[test]
fn set_watch_if_node_exists_leaves_no_watch_on_a_missing_node() {
    let (zkw, root) = setup("zkutil-setwatch");
    let rec = node_recorder(&zkw);
    let other = raw_session(&test_servers(), SESSION);
    let unwatched = format!("{root}/unwatched");
    let watched = format!("{root}/watched");

    let before = zkw.zookeeper().watch_count();
    assert!(!zkutil::set_watch_if_node_exists(&zkw, &unwatched).unwrap());
    assert_eq!(zkw.zookeeper().watch_count(), before, "no watch registered");
    assert!(!zkutil::watch_and_check_exists(&zkw, &watched).unwrap());
    assert_eq!(zkw.zookeeper().watch_count(), before + 1);

    // Created in this order: an event for `unwatched` would arrive first.
    other
        .create(&unwatched, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    other
        .create(&watched, b"", Acl::open_unsafe(), CreateMode::Persistent)
        .unwrap();
    assert!(rec.wait_for(EventType::NodeCreated, &watched, 1));
    assert!(
        !rec.has(EventType::NodeCreated, &unwatched),
        "a stray exists watch fired"
    );

    // On an existing node it sets a data watch: deletion is heard.
    assert!(zkutil::set_watch_if_node_exists(&zkw, &unwatched).unwrap());
    other.delete(&unwatched, None).unwrap();
    assert!(rec.wait_for(EventType::NodeDeleted, &unwatched, 1));

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

#[test]
fn bad_paths_are_bad_arguments() {
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
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// Deletes
// ---------------------------------------------------------------------------

#[test]
fn delete_node_with_children_is_not_empty_and_the_node_stays() {
    let (zkw, root) = setup("zkutil-notempty");
    let parent = format!("{root}/parent");
    zkutil::create_with_parents(&zkw, &format!("{parent}/child")).unwrap();
    let e = zkutil::delete_node(&zkw, &parent, None).unwrap_err();
    assert!(e.is(ZkError::NotEmpty), "{e}");
    assert!(
        zkutil::check_exists(&zkw, &parent).unwrap().is_some(),
        "the node stays"
    );
    let e = zkutil::delete_node_fail_silent(&zkw, &parent).unwrap_err();
    assert!(
        e.is(ZkError::NotEmpty),
        "fail-silent only hides NoNode: {e}"
    );

    // Versions: a mismatch is `false` and the node stays.
    let leaf = format!("{parent}/child");
    zkutil::set_data(&zkw, &leaf, b"v1", None).unwrap();
    assert!(!zkutil::delete_node(&zkw, &leaf, Some(0)).unwrap());
    assert!(zkutil::check_exists(&zkw, &leaf).unwrap().is_some());
    assert!(zkutil::delete_node(&zkw, &leaf, Some(1)).unwrap());
    assert!(zkutil::check_exists(&zkw, &leaf).unwrap().is_none());
    assert!(zkutil::delete_node(&zkw, &parent, None).unwrap());
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn delete_node_recursively_removes_the_subtree_and_is_idempotent() {
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
        zkutil::create_with_parents(&zkw, &p).unwrap();
    }
    zkutil::delete_node_recursively(&zkw, &sub).unwrap();
    assert_eq!(zkutil::check_exists(&zkw, &sub).unwrap(), None);
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &root).unwrap(),
        Some(vec!["keep".to_string()]),
        "only the subtree is gone"
    );
    assert!(zkutil::check_exists(&zkw, &format!("{keep}/k"))
        .unwrap()
        .is_some());
    zkutil::delete_node_recursively(&zkw, &sub).unwrap();
    zkutil::delete_node_recursively(&zkw, &sub).unwrap();

    // deleteChildrenRecursively keeps the node itself.
    zkutil::create_with_parents(&zkw, &format!("{keep}/k/l/m")).unwrap();
    zkutil::delete_children_recursively(&zkw, &keep).unwrap();
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &keep).unwrap(),
        Some(vec![])
    );
    zkutil::delete_children_recursively(&zkw, &keep).unwrap();

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    assert_eq!(zkutil::check_exists(&zkw, &root).unwrap(), None);
    zkw.close().unwrap();
}

#[test]
fn delete_node_recursively_handles_a_tree_larger_than_one_request() {
    let (zkw, root) = setup("zkutil-rmr-big");
    let sub = format!("{root}/big");
    // 2 x 2 000 children with 250-byte names: ~1.2 MB of deletes, more than
    // ZooKeeper's 1 MB request limit, so one multi cannot carry them.
    let long = "n".repeat(240);
    let other = raw_session(&test_servers(), SESSION);
    for half in ["p1", "p2"] {
        let parent = format!("{sub}/{half}");
        zkutil::create_with_parents(&zkw, &parent).unwrap();
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
            other.multi(chunk).unwrap();
        }
        assert_eq!(
            zkutil::list_children_no_watch(&zkw, &parent)
                .unwrap()
                .map(|c| c.len()),
            Some(2_000)
        );
    }
    zkutil::delete_node_recursively(&zkw, &sub).unwrap();
    assert_eq!(zkutil::check_exists(&zkw, &sub).unwrap(), None);
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    other.close().unwrap();
    zkw.close().unwrap();
}

/// Creates `root/a/x/deep`, `root/a/y` and `root/b` (with their parents).
fn small_tree(zkw: &ZooKeeperWatcher, root: &str) {
    for p in ["a/x/deep", "a/y", "b"] {
        zkutil::create_with_parents(zkw, &format!("{root}/{p}")).unwrap();
    }
}

fn children(zkw: &ZooKeeperWatcher, node: &str) -> Option<Vec<String>> {
    zkutil::list_children_no_watch(zkw, node)
        .unwrap()
        .map(sorted)
}

#[test]
fn multi_root_deletes_take_several_roots_and_a_missing_one() {
    let (zkw, root) = setup("zkutil-multi-roots");
    let roots: Vec<String> = ["r1", "r2", "r3"]
        .iter()
        .map(|r| format!("{root}/{r}"))
        .collect();
    for r in &roots {
        small_tree(&zkw, r);
    }
    let missing = format!("{root}/missing");

    // Bad input: a typed error, and nothing is deleted.
    let e = zkutil::delete_children_recursively_multi_or_sequential(
        &zkw,
        true,
        &[roots[0].as_str(), "no-slash"],
    )
    .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e}");
    let e = zkutil::delete_node_recursively_multi_or_sequential(
        &zkw,
        true,
        &[roots[0].as_str(), "/a/"],
    )
    .unwrap_err();
    assert!(matches!(e, Error::BadArguments(_)), "{e}");
    assert_eq!(
        children(&zkw, &roots[0]),
        Some(vec!["a".into(), "b".into()])
    );
    // No roots: nothing to do (HBase logs and returns).
    zkutil::delete_children_recursively_multi_or_sequential::<&str>(&zkw, false, &[]).unwrap();
    zkutil::delete_node_recursively_multi_or_sequential::<String>(&zkw, false, &[]).unwrap();

    // The children of r1 and r2 (a missing root among them has none); the
    // roots stay, r3 is not touched.
    zkutil::delete_children_recursively_multi_or_sequential(
        &zkw,
        false,
        &[&roots[0], &missing, &roots[1]],
    )
    .unwrap();
    assert_eq!(children(&zkw, &roots[0]), Some(vec![]));
    assert_eq!(children(&zkw, &roots[1]), Some(vec![]));
    assert_eq!(children(&zkw, &missing), None);
    assert_eq!(
        children(&zkw, &roots[2]),
        Some(vec!["a".into(), "b".into()])
    );

    // The nodes themselves, with their subtrees; a missing root is fine.
    zkutil::delete_node_recursively_multi_or_sequential(
        &zkw,
        false,
        &[roots[1].clone(), missing.clone(), roots[2].clone()],
    )
    .unwrap();
    assert_eq!(children(&zkw, &root), Some(vec!["r1".into()]));
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn a_multi_root_delete_is_one_multi_and_falls_back_to_one_delete_at_a_time() {
    let (zkw, root) = setup("zkutil-multi-roots-fallback");
    let (r1, r2) = (format!("{root}/r1"), format!("{root}/r2"));
    small_tree(&zkw, &r1);
    // r2/locked lets nobody delete its children: its child's delete is
    // refused (`NoAuth`), after r1's deletes in the list.
    let locked = format!("{r2}/locked");
    zkutil::create_with_parents(&zkw, &locked).unwrap();
    zkutil::create_with_parents(&zkw, &format!("{locked}/c")).unwrap();
    let zk = zkw.zookeeper();
    let no_delete = zklock::client::Perms::READ
        | zklock::client::Perms::WRITE
        | zklock::client::Perms::CREATE
        | zklock::client::Perms::ADMIN;
    let world = zklock::client::Id::new("world", "anyone");
    zk.set_acl(&locked, &[Acl::new(no_delete, world.clone())], None)
        .unwrap();

    // One multi: refused as a whole, nothing deleted.
    let e = zkutil::delete_children_recursively_multi_or_sequential(&zkw, false, &[&r1, &r2])
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Multi {
                code: ZkError::NoAuth,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(children(&zkw, &r1), Some(vec!["a".into(), "b".into()]));

    // With the fallback: the same deletes one at a time; r1's go, the
    // refused one ends the run with its error.
    let e = zkutil::delete_children_recursively_multi_or_sequential(&zkw, true, &[&r1, &r2])
        .unwrap_err();
    assert!(e.is(ZkError::NoAuth), "{e:?}");
    assert_eq!(children(&zkw, &r1), Some(vec![]));
    assert_eq!(children(&zkw, &locked), Some(vec!["c".into()]));
    zk.set_acl(&locked, Acl::open_unsafe(), None).unwrap();

    // A multi whose reply is lost is applied; its retry finds the nodes
    // gone (`NoNode`): without the fallback that is the error...
    small_tree(&zkw, &r1);
    zk.lose_next_reply(zklock::client::ReplyKind::Multi);
    let e =
        zkutil::delete_node_recursively_multi_or_sequential(&zkw, false, &[&r1, &r2]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Multi {
                code: ZkError::NoNode,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(children(&zkw, &root), Some(vec![]));
    // ...and with it, the deletes one at a time find nothing left: done.
    small_tree(&zkw, &r1);
    small_tree(&zkw, &r2);
    zk.lose_next_reply(zklock::client::ReplyKind::Multi);
    zkutil::delete_node_recursively_multi_or_sequential(&zkw, true, &[&r1, &r2]).unwrap();
    assert_eq!(children(&zkw, &root), Some(vec![]));

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

// ---------------------------------------------------------------------------
// multi_or_sequential
// ---------------------------------------------------------------------------

/// `root/exists` ("old") and `root/d` ("d0") exist; `root/new` and
/// `root/missing` do not.
fn multi_fixture(zkw: &ZooKeeperWatcher, root: &str) -> Vec<ZkUtilOp> {
    zkutil::create_and_fail_silent_data(zkw, &format!("{root}/exists"), b"old").unwrap();
    zkutil::create_and_fail_silent_data(zkw, &format!("{root}/d"), b"d0").unwrap();
    vec![
        ZkUtilOp::create_and_fail_silent(format!("{root}/new"), b"n".to_vec()),
        ZkUtilOp::create_and_fail_silent(format!("{root}/exists"), b"clobber".to_vec()),
        ZkUtilOp::delete_node_fail_silent(format!("{root}/missing")),
        ZkUtilOp::set_data(format!("{root}/d"), b"d1".to_vec()),
    ]
}

#[test]
fn multi_failure_returns_the_first_failing_op_and_applies_nothing() {
    let (zkw, root) = setup("zkutil-multi-atomic");
    let ops = multi_fixture(&zkw, &root);
    let e = zkutil::multi_or_sequential(&zkw, &ops, false).unwrap_err();
    match &e {
        Error::Multi { index, code, .. } => {
            assert_eq!((*index, *code), (1, ZkError::NodeExists), "{e}");
        }
        other => panic!("expected Error::Multi, got {other:?}"),
    }
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/new")).unwrap(),
        None
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))
            .unwrap()
            .as_deref(),
        Some(&b"d0"[..]),
        "nothing applied"
    );

    // A failure the fallback does not cover (NotEmpty) is returned even with it.
    zkutil::create_with_parents(&zkw, &format!("{root}/full/child")).unwrap();
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
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/new")).unwrap(),
        None
    );

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
    )
    .unwrap();
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/m1"))
            .unwrap()
            .as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))
            .unwrap()
            .as_deref(),
        Some(&b"d2"[..])
    );
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/exists")).unwrap(),
        None
    );

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn multi_with_sequential_fallback_applies_what_can_pass() {
    let (zkw, root) = setup("zkutil-multi-fallback");
    let ops = multi_fixture(&zkw, &root);
    zkutil::multi_or_sequential(&zkw, &ops, true).unwrap();
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/new"))
            .unwrap()
            .as_deref(),
        Some(&b"n"[..])
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/exists"))
            .unwrap()
            .as_deref(),
        Some(&b"old"[..]),
        "an existing node is left alone"
    );
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/missing")).unwrap(),
        None
    );
    assert_eq!(
        zkutil::get_data(&zkw, &format!("{root}/d"))
            .unwrap()
            .as_deref(),
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
    assert!(zkutil::check_exists(&zkw, &format!("{root}/before"))
        .unwrap()
        .is_some());
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/after")).unwrap(),
        None
    );

    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}

#[test]
fn multi_with_an_empty_op_list_is_a_no_op() {
    let (zkw, root) = setup("zkutil-multi-empty");
    zkutil::multi_or_sequential(&zkw, &[], false).unwrap();
    zkutil::multi_or_sequential(&zkw, &[], true).unwrap();
    assert_eq!(
        zkutil::list_children_no_watch(&zkw, &root).unwrap(),
        Some(vec![])
    );
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
    // No request is made: even a closed watcher accepts it.
    zkutil::multi_or_sequential(&zkw, &[], true).unwrap();
}

#[test]
fn multi_with_a_bad_path_sends_nothing() {
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
    assert_eq!(
        zkutil::check_exists(&zkw, &format!("{root}/good")).unwrap(),
        None
    );
    zkutil::delete_node_recursively(&zkw, &root).unwrap();
    zkw.close().unwrap();
}
