//! Streaming transfers (`shared::object_store::transfer`) against SeaweedFS at the sizes where
//! multipart uploads go wrong: empty, one byte, just under, at and over a part, an exact
//! multiple of the part size. Each object comes back with the bytes, size and SHA-256 the
//! upload reported, and downloads to a file unchanged.

use sexton_model::digest;
use sexton_shared::object_store::transfer::UploadSettings;
use sexton_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_of_every_awkward_size_round_trip() {
    let nats = Nats::start();
    let s3 = S3::start();
    let store = object_store(&config(&nats, &s3)).await;
    let dir = tempfile::tempdir().unwrap();
    const PART: u64 = 5 * 1024 * 1024;
    let settings = UploadSettings {
        part_size: PART,
        concurrency: 2,
    };
    for size in [0, 1, PART - 1, PART, PART + 1, 2 * PART, 2 * PART + 7] {
        let path = dir.path().join(format!("f{size}"));
        let body: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &body).unwrap();
        let key = format!("transfer/f{size}");
        let digest = store
            .put_file(
                &key,
                std::fs::File::open(&path).unwrap(),
                path.to_str().unwrap(),
                size,
                settings,
            )
            .await
            .unwrap();
        assert_eq!(digest.size, size);
        assert_eq!(
            digest.sha256.as_deref(),
            Some(digest::sha256_hex(&body).as_str())
        );
        let back = store.get(&key).await.unwrap().unwrap();
        assert_eq!(back.len() as u64, size, "{key}");
        assert!(back.as_ref() == body.as_slice(), "{key}: bytes differ");
        let copy = dir.path().join(format!("copy{size}"));
        assert_eq!(store.get_to_file(&key, &copy).await.unwrap(), Some(size));
        assert!(
            std::fs::read(&copy).unwrap() == body,
            "{key}: download differs"
        );
    }
    // A part size below S3's minimum is refused before anything is sent.
    assert!(UploadSettings {
        part_size: PART - 1,
        concurrency: 2
    }
    .validate()
    .is_err());
    assert_eq!(
        store
            .get_to_file("transfer/missing", &dir.path().join("missing"))
            .await
            .unwrap(),
        None
    );
    assert!(!dir.path().join("missing").exists());
    // A huge file gets parts large enough to stay within S3's 10 000 parts.
    assert_eq!(
        settings.part_size_for(100 * 1024 * 1024 * 1024),
        11 * 1024 * 1024
    );
}
