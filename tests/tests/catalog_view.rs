//! `shared::catalog_view`'s freshness check: a view is used for a decision only once it has
//! applied the revision the decision is about (the deleter: the mark its job was issued at).
//! A catch-up answered by a replica behind its leader reports nothing pending while newer
//! writes exist; `current_through` refuses such a view instead of letting the deleter judge a
//! job on a record without the job's mark (under a NATS node loss it refused the job for good,
//! and the backup stayed `expiring`).

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::json;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::BackupRecord,
};
use sexton_shared::{
    catalog::{Catalog, Versioned},
    catalog_view::{CatalogView, ViewState},
    schedules_view::SchedulesView,
    topology,
};
use sexton_tests::{
    fixtures::{backup, put_schedule},
    Nats,
};

/// The ids a view holds, nothing else.
#[derive(Default)]
struct Ids(Vec<String>);

impl ViewState for Ids {
    fn apply(
        &mut self,
        _cluster: &ClusterName,
        id: BackupId,
        change: Option<Versioned<BackupRecord>>,
    ) -> anyhow::Result<()> {
        self.0.retain(|held| held != id.as_str());
        if change.is_some() {
            self.0.push(id.to_string());
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_is_refused_until_it_has_applied_the_revision_asked_for() {
    let (_nats, _client, topology, catalog) = catalog_on_a_new_server().await;
    let cluster = ClusterName::new("c1").unwrap();
    let first = catalog
        .create(&backup("c1", "full", "b1", None, 1, 1))
        .await
        .unwrap();
    // Another cluster's write moves the stream on; it is not c1's.
    catalog
        .create(&backup("c2", "full", "x1", None, 1, 1))
        .await
        .unwrap();
    let views: CatalogView<Ids> = CatalogView::new(topology.catalog.clone());

    // The first use lists the cluster: its entry's revision is applied.
    let view = views.current_through(&cluster, first).await.unwrap();
    assert_eq!(view.0, ["b1"]);
    drop(view);

    // A revision of c1 not yet read by this view is read by the catch-up.
    let second = catalog
        .create(&backup("c1", "full", "b2", None, 2, 1))
        .await
        .unwrap();
    let view = views.current_through(&cluster, second).await.unwrap();
    assert_eq!(view.0, ["b1", "b2"]);
    drop(view);

    // A revision the view cannot reach (as when the replica answering its catch-up has not
    // stored it yet) is refused, and the view stays usable.
    let err = views
        .current_through(&cluster, second + 100)
        .await
        .err()
        .expect("a view behind the revision asked for is refused");
    assert!(
        err.to_string()
            .contains(&format!("revision {}", second + 100)),
        "{err:#}"
    );
    let view = views.current_through(&cluster, second).await.unwrap();
    assert_eq!(view.0, ["b1", "b2"]);
    drop(view);

    // Clusters nothing was ever stored for (a forged job may name any) are read, found
    // empty and not kept: the views held stay those of real clusters.
    for n in 0..20 {
        let ghost = ClusterName::new(format!("ghost-{n}")).unwrap();
        assert!(views.current(&ghost).await.unwrap().0.is_empty());
    }
    assert_eq!(views.clusters_held().await, 1);
}

/// The consumers the server created since the last call, from its advisories.
struct ConsumersCreated(async_nats::Subscriber, async_nats::Client);

impl ConsumersCreated {
    async fn watch(client: &async_nats::Client) -> ConsumersCreated {
        let sub = client
            .subscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED.>")
            .await
            .unwrap();
        client.flush().await.unwrap();
        ConsumersCreated(sub, client.clone())
    }

    /// How many advisories arrived since the last call (each: one consumer created).
    async fn since_last(&mut self) -> usize {
        // A round trip to the server first: an advisory of a consumer created before it is
        // on its way to us once the flush returns; a short wait collects it.
        self.1.flush().await.unwrap();
        let mut count = 0;
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(300), self.0.next()).await
        {
            count += 1;
        }
        count
    }
}

/// Issue 32: keeping a view current costs requests that follow the changes, not a consumer per
/// use. Under a steady load a consumer per retention run and per deleter batch piled up to the
/// account's consumer limit. Only the first use (the listing) opens one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_open_a_consumer_only_for_their_first_listing() {
    let (_nats, client, topology, catalog) = catalog_on_a_new_server().await;
    let cluster = ClusterName::new("c1").unwrap();
    catalog
        .create(&backup("c1", "full", "b1", None, 1, 1))
        .await
        .unwrap();
    put_schedule(&topology, "s1", "c1", "full", json!({"keep_last": 1})).await;
    let mut created = ConsumersCreated::watch(&client).await;

    let views: CatalogView<Ids> = CatalogView::new(topology.catalog.clone());
    let schedules = SchedulesView::new(topology.schedules.clone());
    assert_eq!(views.current(&cluster).await.unwrap().0, ["b1"]);
    assert_eq!(schedules.all().await.unwrap().len(), 1);
    let first = created.since_last().await;
    assert!(
        first >= 2,
        "the first use lists the catalog and the schedules through a consumer each (and the \
         advisories reach this test): {first} seen"
    );

    // Uses with nothing new, then uses after changes of every kind: no consumer at all.
    for _ in 0..5 {
        assert_eq!(views.current(&cluster).await.unwrap().0, ["b1"]);
        assert_eq!(schedules.of_cluster(&cluster).await.unwrap().len(), 1);
    }
    let second = catalog
        .create(&backup("c1", "full", "b2", None, 2, 1))
        .await
        .unwrap();
    catalog
        .create(&backup("c2", "full", "x1", None, 2, 1))
        .await
        .unwrap();
    let b1 = catalog
        .get(&cluster, &BackupId::new("b1").unwrap())
        .await
        .unwrap()
        .unwrap();
    catalog
        .remove(&cluster, &BackupId::new("b1").unwrap(), b1.revision)
        .await
        .unwrap();
    put_schedule(&topology, "s2", "c1", "other", json!({"keep_last": 2})).await;
    put_schedule(&topology, "s3", "c2", "full", json!({"keep_last": 3})).await;
    topology.schedules.delete("s1").await.unwrap();

    let view = views.current(&cluster).await.unwrap();
    assert_eq!(view.0, ["b2"], "the put and the removal are both applied");
    assert!(view.applied() > second);
    assert_eq!(
        view.last_refresh.changes, 2,
        "c2's write is not read for c1"
    );
    assert!(!view.last_refresh.full_listing);
    drop(view);
    let names: Vec<String> = schedules
        .all()
        .await
        .unwrap()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(names, ["s2", "s3"]);
    let mine = schedules.of_cluster(&cluster).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        created.since_last().await,
        0,
        "no consumer after the first listing"
    );
}

/// Issue 32, goal 2: a fed view takes a cluster's changes from one standing consumer and asks
/// the leader only for the cluster's newest revision, so a use costs the same whatever the
/// clusters in the catalog. What it applies is exactly what the leader-read view applies: puts
/// and removals of that cluster only, every acknowledged write included, and a cluster the
/// feed cannot vouch for (not yet in its filters, or overflowed while unused) is read from the
/// leader instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fed_view_applies_every_change_and_falls_back_to_the_leader() {
    fed_view_case(None).await;
}

/// The same with the feed past its filter limit: it asks for the whole catalog and keeps only
/// the clusters its view holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fed_view_past_its_filter_limit_reads_the_whole_catalog_and_keeps_its_own() {
    fed_view_case(Some(1)).await;
}

async fn fed_view_case(filter_limit: Option<usize>) {
    let (_nats, client, topology, catalog) = catalog_on_a_new_server().await;
    let c1 = ClusterName::new("c1").unwrap();
    let c2 = ClusterName::new("c2").unwrap();
    catalog
        .create(&backup("c1", "full", "b1", None, 1, 1))
        .await
        .unwrap();
    catalog
        .create(&backup("c2", "full", "x1", None, 1, 1))
        .await
        .unwrap();
    let mut created = ConsumersCreated::watch(&client).await;
    let fed: CatalogView<Ids> = match filter_limit {
        None => CatalogView::fed(topology.catalog.clone()),
        Some(limit) => CatalogView::fed_with_filter_limit(topology.catalog.clone(), limit),
    };
    let read: CatalogView<Ids> = CatalogView::new(topology.catalog.clone());

    // The first uses list; the feed's consumer is made for both clusters after them.
    assert_eq!(fed.current(&c1).await.unwrap().0, ["b1"]);
    assert_eq!(fed.current(&c2).await.unwrap().0, ["x1"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        // A write of c1 the view can only see through the feed once it covers c1.
        let probe = catalog
            .create(&backup("c1", "full", &format!("p{}", uuid()), None, 1, 1))
            .await
            .unwrap();
        let view = fed.current_through(&c1, probe).await.unwrap();
        if view.last_refresh.fed {
            break;
        }
        drop(view);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the feed never covered c1"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = created.since_last().await;

    // Changes of every kind, each acknowledged before the use that must see it.
    for round in 0..20u64 {
        let b = format!("b{}", round + 2);
        let revision = catalog
            .create(&backup("c1", "full", &b, None, 1, 1))
            .await
            .unwrap();
        catalog
            .create(&backup("c2", "full", &format!("y{round}"), None, 1, 1))
            .await
            .unwrap();
        if round % 3 == 0 {
            let id = BackupId::new(&b).unwrap();
            let record = catalog.get(&c1, &id).await.unwrap().unwrap();
            catalog.remove(&c1, &id, record.revision).await.unwrap();
            let view = fed.current(&c1).await.unwrap();
            assert!(!view.0.contains(&b), "the removal is applied at once");
            assert!(
                view.last_refresh.fed,
                "round {round}: {:?}",
                view.last_refresh
            );
            continue;
        }
        let view = fed.current(&c1).await.unwrap();
        assert!(
            view.applied() >= revision,
            "round {round}: the write is applied"
        );
        assert!(view.0.contains(&b));
        assert!(
            view.last_refresh.fed,
            "round {round}: {:?}",
            view.last_refresh
        );
        assert_eq!(view.last_refresh.changes, 1, "c2's writes are not c1's");
    }
    let mut fed_ids = fed.current(&c1).await.unwrap().0.clone();
    let mut read_ids = read.current(&c1).await.unwrap().0.clone();
    fed_ids.sort();
    read_ids.sort();
    assert_eq!(
        fed_ids, read_ids,
        "the fed view holds what a leader read holds"
    );
    assert_eq!(
        created.since_last().await,
        1,
        "no consumer per use: only the leader-read view's first listing"
    );

    // c2, written far more often than its view is used, overflows and is dropped from the
    // feed; its next use reads from the leader and still sees everything.
    for n in 0..100 {
        catalog
            .create(&backup("c2", "full", &format!("z{n}"), None, 1, 1))
            .await
            .unwrap();
    }
    let view = fed.current(&c2).await.unwrap();
    assert!(!view.last_refresh.fed, "{:?}", view.last_refresh);
    assert_eq!(view.0.len(), 1 + 20 + 100);
}

fn uuid() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Clusters a fed view takes on while its consumer is being made are covered by the next one,
/// not by the one being made: before a96e6cf a use of such a cluster could wait for an entry
/// its feed never asked for, and loop under the cluster's lock. (This test passed on that code
/// too: the next consumer came within the window. It bounds every use, so a loop fails it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_taken_on_while_the_feed_is_made_are_fed_by_the_next_consumer() {
    let (_nats, _client, topology, catalog) = catalog_on_a_new_server().await;
    let clusters: Vec<ClusterName> = (0..40)
        .map(|n| ClusterName::new(format!("c{n}")).unwrap())
        .collect();
    for cluster in &clusters {
        catalog
            .create(&backup(cluster.as_str(), "full", "b0", None, 1, 1))
            .await
            .unwrap();
    }
    let fed = std::sync::Arc::new(CatalogView::<Ids>::fed(topology.catalog.clone()));
    // Every first use at once: the feed's consumer is made while more clusters arrive.
    let firsts = clusters.iter().map(|cluster| {
        let fed = fed.clone();
        let cluster = cluster.clone();
        tokio::spawn(async move { fed.current(&cluster).await.unwrap().0.clone() })
    });
    for listed in futures::future::join_all(firsts).await {
        assert_eq!(listed.unwrap(), ["b0"]);
    }
    // Then rounds of a write and a use per cluster: each use sees its write, within a bound,
    // and once the feed has settled the uses are fed.
    let mut fed_uses = 0;
    for round in 1..=5 {
        for cluster in &clusters {
            let id = format!("b{round}");
            let revision = catalog
                .create(&backup(cluster.as_str(), "full", &id, None, 1, 1))
                .await
                .unwrap();
            let view = tokio::time::timeout(
                Duration::from_secs(10),
                fed.current_through(cluster, revision),
            )
            .await
            .unwrap_or_else(|_| panic!("round {round}: a use of {cluster} never returned"))
            .unwrap();
            assert!(view.0.contains(&id), "round {round}: {cluster}");
            fed_uses += usize::from(view.last_refresh.fed);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        fed_uses >= clusters.len() * 3,
        "the feed covers every cluster after the first rounds: {fed_uses} fed uses"
    );
}

/// A nats-server of the test's own with the fleet's streams and buckets, a client, and the
/// catalog on it. The server stops when the returned `Nats` is dropped.
async fn catalog_on_a_new_server() -> (Nats, async_nats::Client, topology::Topology, Catalog) {
    let nats = Nats::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let topology = topology::ensure(&async_nats::jetstream::new(client.clone()), 1)
        .await
        .unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    (nats, client, topology, catalog)
}
