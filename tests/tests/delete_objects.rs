//! The one deletion path (`ObjectStore::delete_targets`, and `delete_keys_each` and
//! `delete_batch` over it) against a real SeaweedFS: more than a thousand keys in one call go
//! in several `DeleteObjects` requests and every one of them is reported deleted; a version
//! under Object Lock refuses inside a 200 answer, and its key is reported failed, never counted
//! as deleted, while the keys sent with it go.

use std::collections::BTreeSet;

use chrono::Utc;
use sexton_retention::lock::LockMode;
use sexton_shared::object_store::{ObjectStore, Requests, Target, DELETE_BATCH};
use sexton_tests::*;

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}k{i:05}")).collect()
}

/// Versions and delete markers left under `prefix`, as (key, version).
async fn versions_under(store: &ObjectStore, prefix: &str) -> BTreeSet<(String, String)> {
    store
        .list_versions(prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.key, v.version_id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_a_thousand_keys_go_in_one_call_and_each_is_reported() {
    let nats = Nats::start();
    let s3 = S3::start();
    let store = object_store(&config(&nats, &s3)).await;
    assert!(!store.is_versioned().await.unwrap());

    // Whole keys: 2,345 objects (three requests) and a key never written, which is gone too.
    let prefix = "backups/c1/f/many/";
    let mut many = keys(prefix, 2 * DELETE_BATCH + 345);
    fixtures::put_objects(&store, &many).await;
    many.push(format!("{prefix}never-written"));
    let report = store.delete_keys_each(&many).await.unwrap();
    assert!(report.failed.is_empty(), "{:?}", &report.failed[..1]);
    assert!(report.request_failed.is_none());
    assert_eq!(report.deleted, many, "every key reported, once, in order");
    assert!(fixtures::keys_under(&store, prefix).await.is_empty());

    // Bare keys: `delete_batch` refused more than 1000 keys before it took the one path.
    let prefix = "backups/c1/f/more/";
    let more = keys(prefix, DELETE_BATCH + 500);
    fixtures::put_objects(&store, &more).await;
    assert!(store.delete_batch(&more).await.unwrap().is_empty());
    assert!(fixtures::keys_under(&store, prefix).await.is_empty());

    // The deleter's way: small requests, several in flight, bounded by shared permits.
    let prefix = "backups/c1/f/spread/";
    let spread = keys(prefix, 1200);
    fixtures::put_objects(&store, &spread).await;
    let targets: Vec<Target> = spread.iter().map(|key| (key.clone(), None)).collect();
    let permits = tokio::sync::Semaphore::new(2);
    let report = store
        .delete_targets(
            &targets,
            Requests {
                per_request: 250,
                in_flight: 3,
                permits: Some(&permits),
            },
        )
        .await;
    assert!(report.failed.is_empty() && report.request_failed.is_none());
    assert_eq!(report.deleted, spread);
    assert!(fixtures::keys_under(&store, prefix).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_version_is_reported_failed_and_its_neighbours_go() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.s3.bucket = "locked".into();
    let store = object_store(&config).await;
    store
        .client()
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    assert!(store.is_versioned().await.unwrap());

    // 1,100 plain keys, and among them one with two versions, the older under a lock: more
    // than one request's worth of versions, the lock inside one of them.
    let prefix = "backups/c1/f/locked/";
    let mut all = keys(prefix, 1100);
    fixtures::put_objects(&store, &all).await;
    let locked = format!("{prefix}k00600-locked");
    store
        .put(&locked, bytes::Bytes::from_static(b"old"))
        .await
        .unwrap();
    let (_, old_version) = store.head_at(&locked, None).await.unwrap().unwrap();
    let old_version = old_version.expect("a versioned bucket names versions");
    store
        .lock_version(
            &locked,
            Some(&old_version),
            LockMode::Governance,
            Utc::now() + chrono::Duration::days(1),
        )
        .await
        .unwrap();
    store
        .put(&locked, bytes::Bytes::from_static(b"new"))
        .await
        .unwrap();
    all.push(locked.clone());
    all.sort();
    assert!(store.targets_of(&all).await.unwrap().len() > DELETE_BATCH);

    let report = store.delete_keys_each(&all).await.unwrap();
    assert!(
        report.request_failed.is_none(),
        "{:?}",
        report.request_failed
    );
    // The lock refused in a 200 answer: the key is failed, with the store's reason, and not
    // deleted, although its newer version went.
    assert!(
        !report.failed.is_empty(),
        "the locked version was not reported"
    );
    for failure in &report.failed {
        assert_eq!(failure.key, locked, "{failure}");
        assert!(failure.permanent, "a lock is not worth retrying: {failure}");
    }
    assert!(
        !report.deleted.contains(&locked),
        "a locked key counted as deleted"
    );
    let others: Vec<String> = all.iter().filter(|k| **k != locked).cloned().collect();
    assert_eq!(report.deleted, others);
    assert_eq!(
        versions_under(&store, prefix).await,
        BTreeSet::from([(locked.clone(), old_version.clone())]),
        "only the locked version is left, and no delete marker"
    );

    // Again, the one version alone through the deleter's way: still refused, still failed.
    let report = store
        .delete_targets(
            &[(locked.clone(), Some(old_version.clone()))],
            Requests {
                per_request: 100,
                in_flight: 2,
                permits: None,
            },
        )
        .await;
    assert!(report.deleted.is_empty(), "{:?}", report.deleted);
    assert_eq!(report.failed.len(), 1);
    assert!(report.request_failed.is_none());
    // And `delete_batch` (bare keys): a delete marker over it, the locked bytes kept.
    assert!(store
        .delete_batch(std::slice::from_ref(&locked))
        .await
        .unwrap()
        .is_empty());
    assert!(versions_under(&store, prefix)
        .await
        .contains(&(locked.clone(), old_version)));
}
