//! What a restore test costs the reference executor: reading a backup back and hashing it, per
//! GiB, next to a plain streaming read of the same object from the same SeaweedFS in the same
//! run (the floor), and end to end (asked for → verdict recorded).
//!
//! A bench, not a timed test: it is ignored unless asked for.
//!
//! ```sh
//! cargo test --release -p sexton-tests --test bench_verify -- --ignored --nocapture
//! ```
//!
//! `SEXTON_BENCH_VERIFY_MIB` sets the backup's size (default 1024).

use std::time::{Duration, Instant};

use serde_json::json;
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a bench: run with --ignored (and --release)"]
async fn verify_bench() {
    let mib: usize = std::env::var("SEXTON_BENCH_VERIFY_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, Members::ALL);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let catalog = Catalog::new(topology::ensure(&js, 1).await.unwrap().catalog);
    let store = object_store(&config).await;
    create_schedule(
        &client,
        json!({"name": "big", "cluster": "cb", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 3}}),
    )
    .await;
    // One object of `mib` MiB, uploaded in 64 MiB parts.
    let key = "backups/cb/big/big-1/backup.xbstream".to_string();
    let body: Vec<u8> = (0..mib * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let sha = sexton_model::digest::sha256_hex(&body);
    let size = body.len() as u64;
    upload_multipart(&store, &config, &key, &body).await;
    drop(body);
    let completed = chrono::Utc::now();
    let mut report = json!({
        "schema_version": 1, "backup_id": "big-1", "cluster": "cb", "plan": "full",
        "schedule": "big", "backup_name": "big", "status": "completed", "kind": "full",
        "completed_at": completed.to_rfc3339(), "artifacts": [key.clone()],
    });
    // metadata.json describing the big object (its bytes are already there).
    let typed: sexton_model::wire::Report = {
        let mut r: sexton_model::wire::Report = serde_json::from_value(report.clone()).unwrap();
        r.objects = vec![sexton_model::wire::ObjectDigest {
            key: key.clone(),
            size,
            sha256: Some(sha.clone()),
            version_id: None,
        }];
        r
    };
    let metadata_key = "backups/cb/big/big-1/metadata.json".to_string();
    store
        .put(
            &metadata_key,
            sexton_model::metadata::BackupMetadata::describe(&typed, chrono::Utc::now())
                .encode()
                .into(),
        )
        .await
        .unwrap();
    report["objects"] = json!(typed.objects);
    report["artifacts"] = json!([key.clone(), metadata_key]);
    js.publish(
        "sexton.v1.report.cb",
        serde_json::to_vec(&report).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    wait_reported(&catalog, "cb", "big-1").await;

    // The floor: a plain streaming read, no hashing.
    let started = Instant::now();
    let out = store
        .client()
        .get_object()
        .bucket(store.bucket())
        .key(&key)
        .send()
        .await
        .unwrap();
    let mut stream = out.body;
    let mut read = 0u64;
    while let Some(chunk) = stream.try_next().await.unwrap() {
        read += chunk.len() as u64;
    }
    let raw = started.elapsed();
    assert_eq!(read, size);
    // What the executor does per object: read and hash.
    let started = Instant::now();
    let (digest_size, digest_sha) = store.digest(&key).await.unwrap().unwrap();
    let hashed = started.elapsed();
    assert_eq!((digest_size, digest_sha), (size, sha));
    // End to end: asked for → verdict recorded.
    let started = Instant::now();
    let asked = api(
        &client,
        "backup",
        "verify",
        json!({"schema_version": 1, "cluster": "cb", "id": "big-1", "timeout": "30m"}),
    )
    .await
    .unwrap();
    let request = asked["request_id"].as_str().unwrap().to_string();
    let entry = eventually("the verdict", Duration::from_secs(1800), || {
        let catalog = catalog.clone();
        let request = request.clone();
        async move {
            let record = catalog
                .get(&"cb".parse().unwrap(), &"big-1".parse().unwrap())
                .await
                .ok()??;
            record
                .value
                .verification?
                .history
                .into_iter()
                .find(|e| e.request_id == request)
        }
    })
    .await;
    let end_to_end = started.elapsed();
    assert_eq!(entry.outcome, "verified", "{entry:?}");
    let gib = size as f64 / (1u64 << 30) as f64;
    let per_gib = |d: Duration| d.as_secs_f64() / gib;
    println!(
        "verify bench: {mib} MiB; plain read {:.2} s/GiB ({:.0} MiB/s); read + SHA-256 {:.2} s/GiB ({:.0} MiB/s); \
         end to end (request → verdict recorded) {:.2} s/GiB; executor's own measure {} ms",
        per_gib(raw),
        mib as f64 / raw.as_secs_f64(),
        per_gib(hashed),
        mib as f64 / hashed.as_secs_f64(),
        per_gib(end_to_end),
        entry.duration_ms.unwrap_or_default(),
    );
    fleet.stop().await.unwrap();
}

/// Uploads `body` in 64 MiB parts (a single PUT of a GiB is more than some stores take).
async fn upload_multipart(
    store: &sexton_shared::object_store::ObjectStore,
    _config: &sexton_shared::config::Config,
    key: &str,
    body: &[u8],
) {
    use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
    let client = store.client();
    let upload = client
        .create_multipart_upload()
        .bucket(store.bucket())
        .key(key)
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap().to_string();
    let mut parts = Vec::new();
    for (n, chunk) in body.chunks(64 * 1024 * 1024).enumerate() {
        let part = client
            .upload_part()
            .bucket(store.bucket())
            .key(key)
            .upload_id(&upload_id)
            .part_number(n as i32 + 1)
            .body(chunk.to_vec().into())
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder()
                .part_number(n as i32 + 1)
                .e_tag(part.e_tag().unwrap())
                .build(),
        );
    }
    client
        .complete_multipart_upload()
        .bucket(store.bucket())
        .key(key)
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .unwrap();
}
