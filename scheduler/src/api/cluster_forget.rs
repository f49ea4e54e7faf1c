//! `cluster.forget`: removes the backup records of a cluster, the step `backup_owner: cluster`
//! waits for (its records "stay until the cluster's records are removed").
//!
//! - Refused, naming them, while the cluster still has schedules: a schedule still fires and
//!   plans retention over these records, so its records are the schedule's business
//!   (`sexton schedule delete` first).
//! - Otherwise every record of the cluster goes, whatever schedule (or none) made it. Without
//!   `remote` the records only: their objects stay (`sexton backup orphans` finds them). With
//!   `remote` (and only then: deleting objects cannot be undone, so a record's own
//!   `remote_cleanup` does not decide it here) through the deleter's pipeline, as forced user
//!   deletes with remote cleanup, like `schedule.delete`: the retention-worker marks, the deleter
//!   judges and deletes the objects, then the record.
//! - Never removed, and said why: held, legal-held, in progress, and whatever one of those
//!   builds on (through its parent or a volume's parent). Records already being deleted are
//!   left to the deleter.
//! - The cluster record (last retention run, reports accepted) stays: it holds no recovery
//!   point, and its periodic sweep finishes what the deleter has left to do.
//!
//! `dry_run` answers with the same summary and writes nothing; the CLI shows it first. Every
//! write is a compare-and-set on the record's revision, so a record that changed in between
//! (held, reported) is not touched and the command says to run it again.

use chrono::Utc;
use serde_json::Value;
use sexton_model::records::BackupRecord;
use sexton_shared::{
    api::{reply_value, ApiError, ClusterForget, ClusterForgotten, ErrorCode},
    catalog::Versioned,
    planning,
};

use super::{
    schedule_delete::{Fate, Tally},
    unavailable, Api,
};

/// The fate of each record of the cluster. Pure.
fn fates(records: &[&BackupRecord], remote: bool) -> Vec<(String, Fate)> {
    let kept = super::schedule_delete::kept_with_reasons(records, &[]);
    records
        .iter()
        .map(|record| {
            let fate = if let Some(why) = kept.get(record.id.as_str()) {
                Fate::Keep(why.clone())
            } else if record.status.is_being_deleted() {
                Fate::AlreadyDeleting
            } else if remote {
                Fate::DeleteWithObjects
            } else {
                Fate::RemoveRecord
            };
            (record.id.to_string(), fate)
        })
        .collect()
}

fn summary(req: &ClusterForget, fates: &[(String, Fate)], forgotten: bool) -> ClusterForgotten {
    let tally = Tally::of(fates);
    let text = match tally.words() {
        None => format!("cluster {} has no backup records", req.cluster),
        Some(words) => format!("forgetting cluster {} {words}", req.cluster),
    };
    ClusterForgotten {
        cluster: req.cluster.clone(),
        dry_run: req.dry_run,
        forgotten,
        remote: req.remote,
        records: fates.len(),
        remove_records: tally.n_remove,
        delete_with_objects: tally.n_delete,
        already_deleting: tally.n_already,
        keep: tally.kept,
        summary: text,
    }
}

impl Api {
    pub(super) async fn cluster_forget(
        &self,
        req: ClusterForget,
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        let state = planning::load_cluster(&self.topology.schedules, &self.catalog, &req.cluster)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        if !state.schedules.is_empty() {
            let mut names: Vec<String> =
                state.schedules.iter().map(|s| s.name.to_string()).collect();
            names.sort();
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "cluster {} still has schedule(s) {}: delete them first (sexton schedule \
                     delete NAME); nothing was changed",
                    req.cluster,
                    names.join(", ")
                ),
            ));
        }
        let mut records: Vec<&Versioned<BackupRecord>> = state.records.iter().collect();
        records.sort_by(|a, b| a.value.id.as_str().cmp(b.value.id.as_str()));
        let values: Vec<&BackupRecord> = records.iter().map(|r| &r.value).collect();
        let fates = fates(&values, req.remote);
        if req.dry_run {
            return reply_value(summary(&req, &fates, false));
        }
        let now = Utc::now();
        self.carry_out(
            &records,
            &fates,
            actor,
            &req.cluster,
            &format!(
                "cluster-forget.{}.{}",
                req.cluster,
                now.timestamp_nanos_opt().unwrap_or_default()
            ),
            |id| {
                format!(
                    "backup {id} changed while cluster {} was being forgotten; run the command \
                     again to finish",
                    req.cluster
                )
            },
        )
        .await?;
        tracing::info!(cluster = %req.cluster, records = fates.len(), remote = req.remote, "cluster forgotten");
        reply_value(summary(&req, &fates, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(id: &str, parent: Option<&str>, status: &str) -> BackupRecord {
        serde_json::from_value(json!({
            "schema_version": 1, "id": id, "uid": format!("u-{id}"), "cluster": "c",
            "plan": "p", "backup_name": id, "kind": if parent.is_some() { "incremental" } else { "full" },
            "parent": parent, "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn held_and_in_progress_records_keep_what_they_build_on() {
        let mut held = record("b2", Some("b1"), "completed");
        held.holds = vec!["restore:r-1".into()];
        let records = [
            record("b1", None, "completed"),
            held,
            record("b3", None, "completed"),
            record("b4", Some("b3"), "in-progress"),
            record("b5", None, "failed"),
            record("b6", None, "completed"),
        ];
        let refs: Vec<&BackupRecord> = records.iter().collect();
        let got = fates(&refs, true);
        let keep = |id: &str| match &got.iter().find(|(i, _)| i == id).unwrap().1 {
            Fate::Keep(why) => why.clone(),
            other => panic!("{id}: {other:?}"),
        };
        assert!(keep("b1").contains("needed by b2"));
        assert!(keep("b2").contains("held: restore:r-1"));
        assert!(keep("b3").contains("needed by b4"));
        assert!(keep("b4").contains("in progress"));
        assert_eq!(got[4], ("b5".into(), Fate::DeleteWithObjects));
        assert_eq!(got[5], ("b6".into(), Fate::DeleteWithObjects));
        assert_eq!(fates(&refs, false)[5].1, Fate::RemoveRecord);
    }
}
