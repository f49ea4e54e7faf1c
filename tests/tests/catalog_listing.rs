//! A catalog listing is one backup per record, however busy the catalog is. The listing reads
//! the bucket's stream from the last value of each key onwards, so a record written while it
//! runs arrives twice; retention refuses a group holding one id twice ("duplicate id") and
//! keeps everything, and a backup whose deletion was decided in that run waits for the next
//! hourly sweep. Here a writer updates records without pause while listings run.

use std::{
    collections::BTreeSet,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use serde_json::json;
use sexton_model::{names::ClusterName, records::BackupRecord};
use sexton_shared::{
    catalog::{CasError, Catalog},
    topology,
};
use sexton_tests::*;

fn record(n: usize) -> BackupRecord {
    serde_json::from_value(json!({
        "id": format!("b{n:03}"), "uid": format!("u{n}"), "cluster": "busy", "plan": "full",
        "backup_name": "s", "kind": "full", "status": "completed",
        "completed_at": "2026-01-01T00:00:00Z",
        "artifacts": [format!("backups/busy/s/b{n:03}/backup.xbstream")],
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_holds_each_record_once_while_records_change() {
    const RECORDS: usize = 100;
    let nats = Nats::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    for n in 0..RECORDS {
        catalog.create(&record(n)).await.unwrap();
    }
    let cluster = ClusterName::new("busy").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (catalog, cluster, stop) = (catalog.clone(), cluster.clone(), stop.clone());
        tokio::spawn(async move {
            let mut updates = 0u64;
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n = (n + 7) % RECORDS;
                let id = record(n).id;
                let Some(current) = catalog.get(&cluster, &id).await.unwrap() else {
                    continue;
                };
                let mut changed = current.value.clone();
                changed.tags = vec![format!("update-{updates}")];
                match catalog.update(&changed, current.revision).await {
                    Ok(_) => updates += 1,
                    Err(CasError::Conflict) => {}
                    Err(CasError::Other(err)) => panic!("{err:#}"),
                }
            }
            updates
        })
    };
    let expected: BTreeSet<String> = (0..RECORDS).map(|n| record(n).id.to_string()).collect();
    let mut listings = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline || listings < 20 {
        let listed = catalog.list_cluster(&cluster).await.unwrap();
        let ids: Vec<String> = listed.iter().map(|r| r.value.id.to_string()).collect();
        let unique: BTreeSet<String> = ids.iter().cloned().collect();
        assert_eq!(ids.len(), unique.len(), "a record listed twice: {ids:?}");
        assert_eq!(unique, expected);
        // Each listed version is one the catalog held: its revision reads back the same value
        // or an older one than now.
        for entry in &listed {
            let now = catalog
                .get(&cluster, &entry.value.id)
                .await
                .unwrap()
                .unwrap();
            assert!(
                entry.revision <= now.revision,
                "{entry:?} newer than {now:?}"
            );
        }
        listings += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let updates = writer.await.unwrap();
    assert!(
        updates > 100,
        "the writer made {updates} updates: the listings raced nothing"
    );
}
