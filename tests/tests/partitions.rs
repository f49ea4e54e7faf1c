//! `shared::partitions` against a real JetStream KV (issue 32): replicas in one process, each a
//! `Partitioner` with work that records which partitions run where.
//!
//! - Two replicas share every partition, each at most its share, and never work on one
//!   partition at the same moment.
//! - A forged lease claiming an hour is free; an undecodable one too.
//! - Work that panics is started again while the partition stays held.
//! - A replica that stops deletes its leases, so the other takes them at its next tick.
//! - Forged lines in the members' entry do not leave partitions unread.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use sexton_shared::{partitions::Partitioner, topology, Shutdown};
use sexton_tests::*;

/// Which replicas work on each partition right now, and the worst overlap seen.
#[derive(Default)]
struct Board {
    working: BTreeMap<u16, Vec<String>>,
    overlaps: usize,
    panics: usize,
}

type Shared = Arc<Mutex<Board>>;

/// Starts a replica named `me`; its work marks the board while it runs. With `panic_once`,
/// its first work on partition 0 panics.
fn replica(
    store: jetstream::kv::Store,
    me: &str,
    board: Shared,
    panic_once: bool,
) -> (
    sexton_shared::partitions::HeldPartitions,
    sexton_shared::shutdown::ShutdownTrigger,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let name = me.to_string();
    let panicked = Arc::new(std::sync::atomic::AtomicBool::new(!panic_once));
    let partitioner = Partitioner::new(
        store,
        "test",
        me,
        16,
        move |partition, mut stop: Shutdown| {
            let board = board.clone();
            let name = name.clone();
            let panicked = panicked.clone();
            async move {
                {
                    let mut board = board.lock().unwrap();
                    let working = board.working.entry(partition).or_default();
                    working.push(name.clone());
                    if working.len() > 1 {
                        board.overlaps += 1;
                    }
                }
                if partition == 0 && !panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    let mut board = board.lock().unwrap();
                    board.panics += 1;
                    board
                        .working
                        .get_mut(&partition)
                        .unwrap()
                        .retain(|n| *n != name);
                    drop(board);
                    panic!("work that fails on its own");
                }
                stop.wait().await;
                board
                    .lock()
                    .unwrap()
                    .working
                    .get_mut(&partition)
                    .unwrap()
                    .retain(|n| *n != name);
            }
        },
    );
    let held = partitioner.held();
    let (trigger, shutdown) = Shutdown::new();
    let task = tokio::spawn(partitioner.run(shutdown));
    (held, trigger, task)
}

/// A fresh server and its partitions bucket (the server stops when the first is dropped).
async fn bucket() -> (Nats, jetstream::kv::Store) {
    let nats = Nats::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client);
    let store = topology::partitions_bucket(&js, 1).await.unwrap();
    (nats, store)
}

fn counts(board: &Shared) -> BTreeMap<String, usize> {
    let board = board.lock().unwrap();
    let mut out = BTreeMap::new();
    for names in board.working.values() {
        for name in names {
            *out.entry(name.clone()).or_default() += 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_partitions_one_at_a_time_and_hand_them_over() {
    let (_nats, store) = bucket().await;

    // Forged and broken leases on two partitions: both count as free.
    let forged = serde_json::json!({"holder": "nobody", "until": chrono::Utc::now() + chrono::Duration::hours(1)});
    store
        .put("test.p3", serde_json::to_vec(&forged).unwrap().into())
        .await
        .unwrap();
    store.put("test.p4", "{not json".into()).await.unwrap();

    let board: Shared = Arc::default();
    let (held_a, stop_a, task_a) = replica(store.clone(), "a", board.clone(), true);
    // One replica alone takes all 16, the forged ones included, and restarts its panicked work.
    eventually(
        "one replica working on every partition",
        Duration::from_secs(30),
        || {
            let counts = counts(&board);
            let panics = board.lock().unwrap().panics;
            async move { (counts.get("a") == Some(&16) && panics == 1).then_some(()) }
        },
    )
    .await;
    assert_eq!(held_a.get().len(), 16);

    // A second replica: they settle on 8 each, never two on one partition.
    let (held_b, stop_b, task_b) = replica(store.clone(), "b", board.clone(), false);
    eventually("two replicas with 8 partitions each", Duration::from_secs(60), || {
        let counts = counts(&board);
        async move { (counts.get("a") == Some(&8) && counts.get("b") == Some(&8)).then_some(()) }
    })
    .await;
    assert_eq!(held_a.get().len() + held_b.get().len(), 16);
    assert!(held_a.get().is_disjoint(&held_b.get()));

    // The first stops: its leases go at once, and the second takes all 16 at its next ticks.
    stop_a.trigger();
    task_a.await.unwrap().unwrap();
    let stopped = std::time::Instant::now();
    eventually(
        "the remaining replica on every partition",
        Duration::from_secs(20),
        || {
            let counts = counts(&board);
            async move { (counts.get("b") == Some(&16) && !counts.contains_key("a")).then_some(()) }
        },
    )
    .await;
    let taken_after = stopped.elapsed();
    // Well before a lease would have lapsed (15 s): the leases were deleted, not left.
    assert!(
        taken_after < Duration::from_secs(12),
        "taken over after {taken_after:?}"
    );
    stop_b.trigger();
    task_b.await.unwrap().unwrap();
    assert!(
        counts(&board).is_empty(),
        "work left running after shutdown"
    );
    assert_eq!(
        board.lock().unwrap().overlaps,
        0,
        "two replicas on one partition"
    );
    // Every lease deleted on the way out.
    for partition in 0..16 {
        let entry = store.get(format!("test.p{partition}")).await.unwrap();
        assert!(entry.is_none(), "lease p{partition} left behind");
    }
}

/// Lines of replicas that do not exist in the members' entry (forged, or of processes that do
/// no work) shrink every share: with 50 members a share is one partition. The real replicas
/// still read every partition: one nobody took for two ticks is taken beyond the share, and
/// kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_members_do_not_leave_partitions_unread() {
    let (_nats, store) = bucket().await;

    // The forger keeps 48 made-up lines in the members' entry, renewed well within a lease.
    let forging = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                let entry = store.entry("test.members").await.unwrap();
                let mut members: serde_json::Value = entry
                    .as_ref()
                    .and_then(|e| serde_json::from_slice(&e.value).ok())
                    .unwrap_or_else(|| serde_json::json!({"members": {}}));
                let until = chrono::Utc::now() + chrono::Duration::seconds(14);
                for i in 0..48 {
                    members["members"][format!("forged-{i}")] = serde_json::json!(until);
                }
                let value: bytes::Bytes = serde_json::to_vec(&members).unwrap().into();
                // A lost race with a real replica's renewal: the next round writes again.
                match &entry {
                    None => drop(store.create("test.members", value).await),
                    Some(e) => drop(store.update("test.members", value, e.revision).await),
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    let board: Shared = Arc::default();
    let (held_a, stop_a, task_a) = replica(store.clone(), "a", board.clone(), false);
    let (held_b, stop_b, task_b) = replica(store.clone(), "b", board.clone(), false);
    let covered = || counts(&board).values().sum::<usize>();
    eventually(
        "every partition worked on despite the forged members",
        Duration::from_secs(30),
        || {
            let covered = covered();
            async move { (covered == 16).then_some(()) }
        },
    )
    .await;
    // And they stay worked on: the rescued partitions are kept, not let go of at the next
    // tick because the share says one.
    let mut least = 16;
    for _ in 0..40 {
        least = least.min(covered());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(least, 16, "partitions went unread while forged lines stood");
    assert!(held_a.get().is_disjoint(&held_b.get()));
    assert!(
        held_a.rescues() + held_b.rescues() >= 14,
        "the partitions beyond the shares were rescued"
    );
    assert_eq!(
        board.lock().unwrap().overlaps,
        0,
        "two replicas on one partition"
    );
    forging.abort();
    stop_a.trigger();
    stop_b.trigger();
    task_a.await.unwrap().unwrap();
    task_b.await.unwrap().unwrap();
}

/// Replicas started at one moment tick in step: a replica that lets go of a partition beyond
/// its share deletes the lease in its tick, and the others, having read the lease just before,
/// see it free only at their next tick, which may fall just after the releaser's next one.
/// They still settle within their shares, and none takes a partition beyond its share: every
/// line in the members' entry is a replica at work, so nothing is overdue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_together_settle_within_their_shares() {
    let (_nats, store) = bucket().await;
    for round in 0..3 {
        let board: Shared = Arc::default();
        let replicas: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|me| replica(store.clone(), &format!("{me}{round}"), board.clone(), false))
            .collect();
        let started = std::time::Instant::now();
        // Within the share: ⌈16 / 3⌉ = 6 each, every partition held.
        eventually(
            "three replicas started together settled",
            sexton_shared::partitions::RESCUE_KEPT,
            || {
                let counts = counts(&board);
                async move {
                    (counts.len() == 3
                        && counts.values().sum::<usize>() == 16
                        && counts.values().all(|n| *n <= 6))
                    .then_some(())
                }
            },
        )
        .await;
        println!("round {round}: settled after {:?}", started.elapsed());
        let rescues: Vec<u64> = replicas.iter().map(|(held, _, _)| held.rescues()).collect();
        assert_eq!(rescues, [0, 0, 0], "partitions taken beyond the share");
        assert_eq!(
            board.lock().unwrap().overlaps,
            0,
            "two replicas on one partition"
        );
        for (_, stop, task) in replicas {
            stop.trigger();
            task.await.unwrap().unwrap();
        }
    }
}
