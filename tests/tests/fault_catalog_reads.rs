//! Catalog reads on a three-node cluster must see every acknowledged write. The deleter decides
//! from one read whether a job may run (`expiring` at the job's revision), is already done (no
//! record) or must be refused: a read answered by a replica that has not applied the latest
//! write yet turns a valid job into a refused or "already done" one, and the job is lost. A
//! writer connected to one node creates and updates records; readers connected to the other
//! nodes read each one back at once.

use std::time::Duration;

use serde_json::json;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::{BackupRecord, BackupStatus},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{cluster::NatsCluster, fault::*};

fn record(n: usize) -> BackupRecord {
    serde_json::from_value(json!({
        "id": format!("b{n}"), "uid": format!("u{n}"), "cluster": "reads", "plan": "full",
        "backup_name": "s", "kind": "full", "status": "completed",
        "completed_at": "2026-01-01T00:00:00Z",
        "artifacts": [format!("backups/reads/s/b{n}/backup.xbstream")],
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_reads_see_every_acknowledged_write() {
    let cluster = NatsCluster::start();
    let writer = client(&cluster.nodes[0].url()).await;
    let writer_js = async_nats::jetstream::new(writer);
    let topo = topology::ensure(&writer_js, 3).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let mut readers = Vec::new();
    for node in &cluster.nodes {
        let js = async_nats::jetstream::new(client(&node.url()).await);
        readers.push(Catalog::new(
            topology::ensure(&js, 3).await.unwrap().catalog,
        ));
    }
    let rounds = pick(300, 5000);
    let cluster_name = ClusterName::new("reads").unwrap();
    let mut stale = Vec::new();
    for n in 0..rounds {
        let mut value = record(n);
        let created = catalog.create(&value).await.unwrap();
        value.status = BackupStatus::Expiring;
        let marked = catalog.update(&value, created).await.unwrap();
        let reader = &readers[n % readers.len()];
        let id = BackupId::new(format!("b{n}")).unwrap();
        match reader.get(&cluster_name, &id).await.unwrap() {
            Some(read)
                if read.revision == marked && read.value.status == BackupStatus::Expiring => {}
            other => stale.push(format!(
                "b{n} via node {}: wrote expiring at {marked}, read {:?}",
                n % readers.len() + 1,
                other.map(|r| (r.value.status, r.revision))
            )),
        }
    }
    // A node that was down reads from its own store as soon as it is back, while it catches
    // up: the records written meanwhile must not look absent or older through it.
    let mut cluster = cluster;
    cluster.kill(2);
    // Writes wait out the leader elections the kill may start.
    let mut waited = 0;
    while catalog.create(&record(1_000_000 + waited)).await.is_err() {
        waited += 1;
        assert!(waited < 100, "the catalog stayed unwritable without node 3");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut written = Vec::new();
    for n in rounds..rounds + 300 {
        let mut value = record(n);
        let created = catalog.create(&value).await.unwrap();
        value.status = BackupStatus::Expiring;
        written.push((n, catalog.update(&value, created).await.unwrap()));
    }
    cluster.restart(2);
    let late = async_nats::jetstream::new(client(&cluster.nodes[2].url()).await);
    let late = Catalog::new(topology::ensure(&late, 3).await.unwrap().catalog);
    for (n, marked) in &written {
        let id = BackupId::new(format!("b{n}")).unwrap();
        match late.get(&cluster_name, &id).await {
            Ok(Some(read)) if read.revision == *marked => {}
            other => stale.push(format!(
                "b{n} via the restarted node: wrote expiring at {marked}, read {:?}",
                other.map(|r| r.map(|r| (r.value.status, r.revision)))
            )),
        }
    }
    record_figures(
        "catalog-reads",
        json!({"writes": rounds * 2, "reads": rounds, "stale_reads": stale.len(),
               "examples": stale.iter().take(5).collect::<Vec<_>>()}),
    );
    assert!(
        stale.is_empty(),
        "{} of {rounds} reads missed an acknowledged write:\n{}",
        stale.len(),
        stale
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
}
