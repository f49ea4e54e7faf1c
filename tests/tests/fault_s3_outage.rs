//! Scenario 3, S3 outage: while the deleter works through a backlog of delete jobs, SeaweedFS
//! is stopped, kept down, and started again on the same ports and data. Reports keep arriving
//! during the outage (their objects were written before it). No job may be lost, no backup may
//! leave the catalog while its objects remain, the deleter's `/readyz` must say 503 while S3 is
//! down, and the backlog must clear soon after S3 returns.
//!
//! CI: 15 s down. `SEXTON_SOAK=1`: 60 s down, with a bigger backlog.
//! `SEXTON_S3_OUTAGE_SECONDS=<n>` sets another outage length.

use std::time::{Duration, Instant};

use serde_json::json;
use sexton_model::names::ClusterName;
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{fault::*, *};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_survive_an_s3_outage() {
    let nats = Nats::start();
    let mut s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start_roles(
        &config,
        1,
        &[Role::Scheduler, Role::RetentionWorker, Role::Deleter],
    );
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = async_nats::jetstream::new(client.clone());
    let store = object_store(&config).await;

    // A paused schedule gives the cluster its policy; the test reports the backups itself.
    // Hundreds of reports land at once and one run deletes most of them on purpose: the
    // retention circuit breaker (docs/safety.md) would hold that run, so this load opts out.
    let schedule = LoadSchedule {
        name: "outage".into(),
        cluster: "outage-c".into(),
        interval: Duration::from_secs(3600),
        keep_last: 5,
    };
    api(
        &client,
        "schedule",
        "create",
        json!({"schema_version": 1, "name": schedule.name, "cluster": schedule.cluster,
               "plan": "full", "cron": "@every 1h", "paused": true,
               "policy": {"keep_last": schedule.keep_last}, "breaker": {"enabled": false}}),
    )
    .await
    .expect("creating the schedule");
    let load = ReportLoad::new(schedule.clone());
    let before = pick(400, 1500);
    let during = pick(100, 400);
    let down_for = std::env::var("SEXTON_S3_OUTAGE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or_else(|| pick(Duration::from_secs(15), Duration::from_secs(60)));
    load.write_objects(&store, "backups", 0..before + during)
        .await;
    load.publish_reports(&js, "backups", 0..before).await;

    // Stop S3 once the deleter is busy.
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let cluster = ClusterName::new(&schedule.cluster).unwrap();
    let deleter_port = fleet.of(Role::Deleter).next().unwrap().http_port;
    eventually(
        "deletions under way",
        Duration::from_secs(120),
        || async move {
            let done = tokio::task::spawn_blocking(move || {
                metric(deleter_port, "sexton_delete_jobs_total", "outcome=\"done\"")
            })
            .await
            .unwrap()?;
            (done >= (before / 5) as f64).then_some(())
        },
    )
    .await;
    let records_at_stop = catalog.list_cluster(&cluster).await.unwrap().len();
    let stopped_at = now_ms();
    let stop_took = s3.stop();
    let outage = Instant::now();

    // While S3 is down: reports keep coming, /readyz of the deleter says 503.
    load.publish_reports(&js, "backups", before..before + during)
        .await;
    let mut not_ready_after = None;
    let mut ready_during_outage = 0;
    while outage.elapsed() < down_for {
        let status = tokio::task::spawn_blocking(move || {
            http_get(deleter_port, "/readyz").map(|(status, _)| status)
        })
        .await
        .unwrap();
        match status {
            Some(503) if not_ready_after.is_none() => {
                not_ready_after = Some(outage.elapsed() + stop_took)
            }
            Some(200) if not_ready_after.is_some() => ready_during_outage += 1,
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let records_at_start = catalog.list_cluster(&cluster).await.unwrap().len();
    let jobs_waiting_at_start =
        consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER).await;
    let start_took = s3.start_again();
    let returned = Instant::now();
    let returned_at = now_ms();

    // The backlog clears: only the newest five remain and no job is waiting.
    let cleared = eventually(
        "the backlog to clear after S3 returned",
        Duration::from_secs(180),
        || {
            let catalog = catalog.clone();
            let cluster = cluster.clone();
            let js = js.clone();
            let keep = schedule.keep_last;
            async move {
                let left = catalog.list_cluster(&cluster).await.ok()?.len();
                let backlog =
                    consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER)
                        .await?;
                (left == keep && backlog == 0).then(|| returned.elapsed())
            }
        },
    )
    .await;
    let ready_again = eventually(
        "/readyz 200 again",
        Duration::from_secs(60),
        || async move {
            tokio::task::spawn_blocking(move || http_status(deleter_port, "/readyz"))
                .await
                .unwrap()
                .filter(|s| *s == 200)
                .map(|_| returned.elapsed())
        },
    )
    .await;

    let settled = wait_settled(&js, Duration::from_secs(600)).await;
    let exited = fleet.exited();
    let audit = audit(&js, &config, std::slice::from_ref(&schedule), "").await;
    let deletions_after_return = audit
        .deletion_times
        .iter()
        .filter(|t| **t > returned_at)
        .count();
    let deletions_during = audit
        .deletion_times
        .iter()
        .filter(|t| **t > stopped_at && **t <= returned_at)
        .count();
    record_figures(
        "s3-outage",
        json!({
            "faults_injected": 1,
            "down_ms": ms(returned - outage) + ms(stop_took),
            "weed_stop_ms": ms(stop_took),
            "weed_start_ms": ms(start_took),
            "reports": before + during,
            "reported_during_outage": during,
            "records_when_stopped": records_at_stop,
            "records_when_restarted": records_at_start,
            "jobs_waiting_when_restarted": jobs_waiting_at_start,
            "deletions_during_outage": deletions_during,
            "deletions_after_return": deletions_after_return,
            "readyz_503_after_ms": not_ready_after.map(ms),
            "readyz_200_during_outage": ready_during_outage,
            "readyz_200_again_after_ms": ms(ready_again),
            "backlog_cleared_after_return_ms": ms(cleared),
            "settled_after_ms": settled.map(ms),
            "services_exited": exited.len(),
            "audit": audit,
        }),
    );
    assert!(exited.is_empty(), "services exited: {exited:#?}");
    audit.assert_clean(&fleet.context(&audit));
    assert_eq!(audit.backups_recorded, before + during, "{audit:?}");
    assert_eq!(
        audit.backups_deleted,
        before + during - schedule.keep_last,
        "{audit:?}"
    );
    assert!(
        not_ready_after.is_some() && ready_during_outage == 0,
        "/readyz of the deleter did not say 503 throughout the outage: first 503 after \
         {not_ready_after:?}, {ready_during_outage} answers of 200 after it"
    );
    assert!(
        deletions_after_return > 0 && records_at_start > schedule.keep_last,
        "the outage did not hit deletions in progress: {records_at_start} records left at restart"
    );
}
