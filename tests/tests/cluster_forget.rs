//! Removing a cluster's backup records (issue 8: `backup_owner: cluster` records "stay until
//! the cluster's records are removed"), on real NATS and SeaweedFS: `cluster.forget` is refused
//! while the cluster has schedules; otherwise it removes every record of the cluster — the
//! records only (objects stay), or with `remote` through the deleter (objects go). Held,
//! legal-held and in-progress backups, and what they build on, stay with their reasons. A dry
//! run says what would happen and writes nothing. Malformed requests and CLI arguments are
//! refused (exit code 2) and write nothing.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{json, Value};
use sexton_model::names::ClusterName;
use sexton_shared::{api::ErrorCode, catalog::Catalog, topology};
use sexton_tests::{
    fixtures::{self, keys_under},
    setup::{Setup, World},
    *,
};

/// `sexton args...` against `nats_url`.
async fn sexton(nats_url: &str, args: &[&str]) -> CliRun {
    sexton_against(nats_url, None, args).await
}

fn expect(run: &CliRun, code: i32, what: &str) {
    run.expect(code, what);
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn objects(cluster: &str, ids: &[&str]) -> BTreeSet<String> {
    ids.iter()
        .flat_map(|id| {
            [
                format!("backups/{cluster}/base/{id}/data-0000.xbstream"),
                format!("backups/{cluster}/base/{id}/metadata.json"),
            ]
        })
        .collect()
}

async fn ids(catalog: &Catalog, cluster: &str) -> BTreeSet<String> {
    catalog
        .list_cluster(&ClusterName::new(cluster).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value.id.to_string())
        .collect()
}

/// The whole catalog of `cluster` as stored (values and revisions), to prove nothing changed.
async fn snapshot(catalog: &Catalog, cluster: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = catalog
        .list_cluster(&ClusterName::new(cluster).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (serde_json::to_string(&r.value).unwrap(), r.revision))
        .collect();
    out.sort();
    out
}

async fn forget(client: &async_nats::Client, cluster: &str, remote: bool, dry_run: bool) -> Value {
    api(
        client,
        "cluster",
        "forget",
        json!({"schema_version": 1, "cluster": cluster, "remote": remote, "dry_run": dry_run}),
    )
    .await
    .unwrap_or_else(|err| panic!("cluster.forget {cluster}: {err}"))
}

fn kept(reply: &Value) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = reply["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().into(),
                k["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    kept.sort();
    kept
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_a_cluster_with_and_without_remote() {
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .start()
    .await;
    let World {
        config,
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;

    // (a) cluster ca, schedule sa owned by the cluster. b1 ← b2 can go; b4 (held) keeps b3,
    // which it builds on; b5 is in progress; b6 is under legal hold; f7 failed (can go).
    create_schedule(
        &client,
        json!({"name": "sa", "cluster": "ca", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 10}, "backup_owner": "cluster", "remote_cleanup": true}),
    )
    .await;
    let mut list = fixtures::schedule_backups(
        "ca",
        "sa",
        &[
            ("b1", None, "completed"),
            ("b2", Some("b1"), "completed"),
            ("b3", None, "completed"),
            ("b4", Some("b3"), "completed"),
            ("b5", None, "in-progress"),
            ("b6", None, "completed"),
            ("f7", None, "failed"),
        ],
    );
    list[5].legal_hold = true;
    fixtures::put_backups(&catalog, &store, &list).await;
    api(
        &client,
        "backup",
        "hold",
        json!({"schema_version": 1, "cluster": "ca", "id": "b4", "reason": "restore:r-9"}),
    )
    .await
    .unwrap();
    let objects_before = keys_under(&store, "backups/ca/").await;
    let catalog_before = snapshot(&catalog, "ca").await;

    // Refused while a schedule of the cluster exists, naming it; dry run or not.
    for dry_run in [true, false] {
        let err = api(
            &client,
            "cluster",
            "forget",
            json!({"schema_version": 1, "cluster": "ca", "remote": true, "dry_run": dry_run}),
        )
        .await
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::Conflict, "{err}");
        assert!(
            err.message.contains("still has schedule(s) sa"),
            "{}",
            err.message
        );
    }
    assert_eq!(snapshot(&catalog, "ca").await, catalog_before);

    // The owner-cluster schedule goes; its records stay.
    let done = api(
        &client,
        "schedule",
        "delete",
        json!({"schema_version": 1, "name": "sa"}),
    )
    .await
    .unwrap();
    assert_eq!(done["deleted"], json!(true));
    assert_eq!(ids(&catalog, "ca").await.len(), 7);
    let catalog_before = snapshot(&catalog, "ca").await;

    // The dry run says what happens and writes nothing.
    let plan = forget(&client, "ca", true, true).await;
    assert_eq!(plan["dry_run"], json!(true), "{plan}");
    assert_eq!(plan["forgotten"], json!(false), "{plan}");
    assert_eq!(plan["records"], json!(7), "{plan}");
    assert_eq!(plan["delete_with_objects"], json!(3), "{plan}");
    assert_eq!(plan["remove_records"], json!(0), "{plan}");
    let keep = kept(&plan);
    assert_eq!(keep.len(), 4, "{plan}");
    assert!(
        keep[0].0 == "b3" && keep[0].1.contains("needed by b4"),
        "{keep:?}"
    );
    assert!(
        keep[1].0 == "b4" && keep[1].1.contains("held: restore:r-9"),
        "{keep:?}"
    );
    assert!(
        keep[2].0 == "b5" && keep[2].1.contains("in progress"),
        "{keep:?}"
    );
    assert!(
        keep[3].0 == "b6" && keep[3].1.contains("legal hold"),
        "{keep:?}"
    );
    assert!(
        plan["summary"]
            .as_str()
            .unwrap()
            .contains("deletes 3 backup(s) with their objects, through the deleter; keeps 4"),
        "{plan}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(
        snapshot(&catalog, "ca").await,
        catalog_before,
        "the dry run wrote nothing"
    );
    assert_eq!(keys_under(&store, "backups/ca/").await, objects_before);

    // With remote: b1, b2 and f7 go through the deleter, objects and records.
    let done = forget(&client, "ca", true, false).await;
    assert_eq!(done["forgotten"], json!(true), "{done}");
    assert_eq!(done["delete_with_objects"], json!(3), "{done}");
    eventually("b1, b2 and f7 deleted", Duration::from_secs(30), || async {
        (ids(&catalog, "ca").await == set(&["b3", "b4", "b5", "b6"])).then_some(())
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let gone = objects("ca", &["b1", "b2", "f7"]);
    assert_eq!(
        keys_under(&store, "backups/ca/").await,
        objects_before
            .difference(&gone)
            .cloned()
            .collect::<BTreeSet<_>>()
    );
    // Forgetting again changes nothing: only the kept records are left.
    let again = forget(&client, "ca", true, false).await;
    assert_eq!(again["records"], json!(4), "{again}");
    assert_eq!(kept(&again).len(), 4, "{again}");
    assert_eq!(ids(&catalog, "ca").await, set(&["b3", "b4", "b5", "b6"]));

    // (b) cluster cb without remote: the records go at once, every object stays, even though
    // the schedule had remote cleanup on (only --remote deletes objects here).
    create_schedule(
        &client,
        json!({"name": "sb", "cluster": "cb", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 10}, "backup_owner": "cluster", "remote_cleanup": true}),
    )
    .await;
    let mut list = fixtures::schedule_backups(
        "cb",
        "sb",
        &[
            ("b1", None, "completed"),
            ("b2", Some("b1"), "completed"),
            ("f3", None, "failed"),
        ],
    );
    list[0].remote_cleanup = true;
    fixtures::put_backups(&catalog, &store, &list).await;
    // A manual backup of no schedule is the cluster's too.
    let mut manual = fixtures::schedule_backups("cb", "sb", &[("m4", None, "completed")]);
    manual[0].schedule = None;
    fixtures::put_backups(&catalog, &store, &manual).await;
    api(
        &client,
        "schedule",
        "delete",
        json!({"schema_version": 1, "name": "sb"}),
    )
    .await
    .unwrap();
    let plan = forget(&client, "cb", false, true).await;
    assert_eq!(plan["remove_records"], json!(4), "{plan}");
    assert_eq!(plan["delete_with_objects"], json!(0), "{plan}");
    assert!(
        plan["summary"]
            .as_str()
            .unwrap()
            .contains("removes 4 backup record(s) from the catalog, keeping their objects"),
        "{plan}"
    );
    assert_eq!(ids(&catalog, "cb").await, set(&["b1", "b2", "f3", "m4"]));
    let done = forget(&client, "cb", false, false).await;
    assert_eq!(done["forgotten"], json!(true), "{done}");
    assert_eq!(ids(&catalog, "cb").await, BTreeSet::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(
        keys_under(&store, "backups/cb/").await,
        objects("cb", &["b1", "b2", "f3", "m4"])
    );
    // The leftovers of the forgotten cluster, its binlog archive too, go with `backup orphans
    // --delete`: records removed on purpose are no sign of a lost catalog, and a cluster with
    // no schedule and no record has no backup a segment could serve (issue 26: orphans
    // refused and pointed at catalog import, which refused too).
    store
        .put("backups/cb/binlog/seg-000001", "binlog".into())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deleted = api(
        &client,
        "orphans",
        "delete",
        json!({"schema_version": 1, "cluster": "cb", "grace": "1s"}),
    )
    .await
    .unwrap_or_else(|err| panic!("orphans.delete after forget: {err}"));
    assert_eq!(
        keys_under(&store, "backups/cb/").await,
        BTreeSet::new(),
        "{deleted}"
    );

    // (c) a cluster with nothing: says so.
    let empty = forget(&client, "cz", false, false).await;
    assert_eq!(empty["records"], json!(0));
    assert_eq!(
        empty["summary"],
        json!("cluster cz has no backup records"),
        "{empty}"
    );
    fleet.stop().await.unwrap();
}

/// Malformed requests and arguments are refused with a clear error and write nothing; the CLI
/// refuses while schedules exist (exit 1), previews, and forgets (records only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_forget_requests_are_refused_and_the_cli_forgets() {
    let world = Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World {
        nats,
        fleet,
        client,
        ..
    } = world;
    // The scheduler answers the API once it has started (a dry run of an empty cluster).
    eventually("the cluster api", Duration::from_secs(60), || {
        let client = client.clone();
        async move {
            let probe = json!({"schema_version": 1, "cluster": "probe", "dry_run": true});
            match api(&client, "cluster", "forget", probe).await {
                Err(err) if err.code == ErrorCode::Unavailable => None,
                _ => Some(()),
            }
        }
    })
    .await;
    let js = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    for record in fixtures::schedule_backups(
        "c1",
        "s1",
        &[("b1", None, "completed"), ("b2", Some("b1"), "completed")],
    ) {
        catalog.create(&record).await.unwrap();
    }
    let before = snapshot(&catalog, "c1").await;

    let cases: Vec<(Value, &str)> = vec![
        (json!({"schema_version": 1}), "missing field `cluster`"),
        (
            json!({"schema_version": 1, "cluster": "Bad Name!"}),
            "cluster",
        ),
        (
            json!({"schema_version": 1, "cluster": "c1", "dry_run": "yes"}),
            "invalid type",
        ),
        (
            json!({"schema_version": 1, "cluster": "c1", "remote": 1}),
            "invalid type",
        ),
        (
            json!({"schema_version": 1, "cluster": "c1", "force": true}),
            "unknown field `force`",
        ),
    ];
    for (body, needle) in cases {
        let err = api(&client, "cluster", "forget", body.clone())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid, "{body}: {err}");
        assert!(err.message.contains(needle), "{body}: {}", err.message);
    }
    let err = api(&client, "cluster", "oblivion", json!({"schema_version": 1}))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid);
    assert_eq!(
        snapshot(&catalog, "c1").await,
        before,
        "nothing was written"
    );

    let url = nats.url();
    let url = url.as_str();
    for (args, needle) in [
        (vec!["cluster", "forget"], "--cluster"),
        (
            vec!["cluster", "forget", "--cluster", "Bad Name!"],
            "--cluster",
        ),
        (
            vec!["cluster", "forget", "--cluster", "c1", "--force"],
            "--force",
        ),
        (
            vec!["cluster", "forget", "--cluster", "c1", "--remote=yes"],
            "--remote",
        ),
    ] {
        let run = sexton(url, &args).await;
        expect(&run, 2, &format!("{args:?}"));
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
    assert_eq!(
        snapshot(&catalog, "c1").await,
        before,
        "nothing was written"
    );

    // Refused while the cluster has a schedule, with its name.
    create_schedule(
        &client,
        json!({"name": "s1", "cluster": "c1", "plan": "base", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 3}, "backup_owner": "cluster"}),
    )
    .await;
    let run = sexton(url, &["cluster", "forget", "--cluster", "c1"]).await;
    expect(&run, 1, "forget with a schedule");
    assert!(
        run.stderr.contains("still has schedule(s) s1"),
        "{}",
        run.stderr
    );
    assert_eq!(
        snapshot(&catalog, "c1").await,
        before,
        "nothing was written"
    );
    let run = sexton(url, &["schedule", "delete", "s1"]).await;
    expect(&run, 0, "schedule delete");
    assert_eq!(snapshot(&catalog, "c1").await, before);

    // The dry run in JSON, then the forget: the summary first, on stderr.
    let run = sexton(
        url,
        &[
            "cluster",
            "forget",
            "--cluster",
            "c1",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .await;
    expect(&run, 0, "dry run");
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["remove_records"], json!(2), "{plan}");
    assert_eq!(
        snapshot(&catalog, "c1").await,
        before,
        "the dry run wrote nothing"
    );
    let run = sexton(url, &["cluster", "forget", "--cluster", "c1"]).await;
    expect(&run, 0, "forget");
    assert!(
        run.stderr
            .contains("forgetting cluster c1 removes 2 backup record(s) from the catalog"),
        "{}",
        run.stderr
    );
    assert_eq!(ids(&catalog, "c1").await, BTreeSet::new());
    fleet.stop().await.unwrap();
}
