//! `shared::catalog_view`'s freshness check: a view is used for a decision only once it has
//! applied the revision the decision is about (the deleter: the mark its job was issued at).
//! A catch-up answered by a replica behind its leader reports nothing pending while newer
//! writes exist; `current_through` refuses such a view instead of letting the deleter judge a
//! job on a record without the job's mark (under a NATS node loss it refused the job for good,
//! and the backup stayed `expiring`).

use sexton_shared::{
    catalog::{Catalog, Versioned},
    catalog_view::{CatalogView, ViewState},
    names::{BackupId, ClusterName},
    records::BackupRecord,
    topology,
};
use sexton_tests::{fixtures::backup, Nats};

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
    let nats = Nats::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let topology = topology::ensure(&async_nats::jetstream::new(client), 1)
        .await
        .unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
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
}
