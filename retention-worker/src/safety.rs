//! The safety envelope around a retention run (docs/safety.md): the circuit breaker's verdict
//! on a group's plan (the judgement itself is pure, `sexton_retention::breaker`), the approval
//! a person stored for a held run, what a held run tells operators (an incident, an audit entry,
//! a metric, a log line), the audit entries of a run's decision and marks, and the
//! `retention.approve` API.
//!
//! The worker calls in at three points: after planning ([`Envelope::judge`]), instead of
//! marking when a run is held ([`Envelope::hold`]), and around the marks
//! ([`Envelope::record_decision`], [`Envelope::record_marks`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use anyhow::Context as _;
use async_nats::jetstream::{self, kv};
use chrono::{DateTime, Utc};
use sexton_model::{
    names::{ClusterName, LocationName, PlanName},
    records::{Policy, ScheduleRecord},
    wire::{self, Incident},
};
use sexton_retention::breaker::{self, Approval, BreakerLimits};
use sexton_retention::Reason;
use sexton_shared::{
    api::{ApiError, ErrorCode},
    audit::{self, Actor, Audit, AuditBackup, AuditEvent, Decided},
    breaker::{approval_key_at, group_limits, ApprovalRecord},
    config::BreakerConfig,
    nats::publish_once,
    topology,
};

use crate::metrics::Metrics;

/// A group's plan at primary (`None`) or of its copies at a location.
type HeldGroup = (ClusterName, PlanName, Option<LocationName>);

pub use sexton_shared::api::{ApprovalView, BreakerState};

/// What the envelope needs besides the run: the audit stream, the approvals bucket, the
/// server's breaker defaults, and which held runs this replica has already told about.
pub struct Envelope {
    jetstream: jetstream::Context,
    pub audit: Audit,
    approvals: kv::Store,
    defaults: BreakerConfig,
    metrics: Arc<Metrics>,
    /// The last held run announced per group (a digest of its trips and backups), so a run
    /// held the same way again (every checkpoint, every sweep) is not announced again.
    announced: Mutex<HashMap<HeldGroup, String>>,
}

impl Envelope {
    pub fn new(
        jetstream: jetstream::Context,
        approvals: kv::Store,
        defaults: BreakerConfig,
        metrics: Arc<Metrics>,
    ) -> Envelope {
        Envelope {
            audit: Audit::new(
                jetstream.clone(),
                "retention-worker",
                metrics.audit_entries.clone(),
            ),
            jetstream,
            approvals,
            defaults,
            metrics,
            announced: Mutex::default(),
        }
    }

    /// The limits of the group `plan` of the cluster whose schedules are `schedules`.
    pub fn limits(
        &self,
        schedules: &[ScheduleRecord],
        plan: &PlanName,
        now: DateTime<Utc>,
    ) -> BreakerLimits {
        let group: Vec<&ScheduleRecord> = schedules.iter().filter(|s| s.plan == *plan).collect();
        group_limits(&group, &self.defaults, now)
    }

    /// The breaker's verdict on `decision` (made over `catalog`), with the group's stored
    /// approval when it trips. `None`: nothing tripped. An approval that cannot be read counts
    /// as none (the run is held: the safe side).
    #[allow(clippy::too_many_arguments)]
    pub async fn judge(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        limits: &BreakerLimits,
        catalog: &sexton_retention::Catalog,
        decision: &sexton_retention::Plan,
        now: DateTime<Utc>,
    ) -> Option<BreakerState> {
        let verdict = breaker::judge(catalog, decision, limits, now);
        if !verdict.holds() {
            return None;
        }
        let approval = match self.read_approval(cluster, plan, location).await {
            Ok(approval) => approval,
            Err(err) => {
                tracing::warn!(%cluster, %plan, error = format!("{err:#}"), "cannot read the breaker's approvals; the run stays held");
                None
            }
        };
        let approval = approval.map(|(record, revision)| {
            let covers = breaker::approval_covers(&record.approval, &verdict.deleting, now);
            ApprovalView {
                approved_at: record.approval.approved_at,
                by: record.by,
                covers: covers.is_ok(),
                why_not: covers.err(),
                revision,
            }
        });
        Some(BreakerState {
            held: !approval.as_ref().is_some_and(|a| a.covers),
            trips: verdict.trips,
            deleting: verdict.deleting,
            approval,
            approve_with: match location {
                None => format!("sexton retention approve --cluster {cluster} --plan {plan}"),
                Some(location) => format!(
                    "sexton retention approve --cluster {cluster} --plan {plan} --location {location}"
                ),
            },
        })
    }

    async fn read_approval(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
    ) -> anyhow::Result<Option<(ApprovalRecord, u64)>> {
        let Some(entry) = sexton_shared::leader_read::latest(
            &self.approvals,
            &approval_key_at(cluster, plan, location),
        )
        .await
        .context("reading the approval")?
        else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let record: ApprovalRecord =
            serde_json::from_slice(&entry.value).context("the approval is unreadable")?;
        Ok(Some((record, entry.revision)))
    }

    /// The run of `cluster`/`plan` is held: nothing of it is marked. Said once per distinct
    /// held run (by this replica): a log line, an incident and an audit entry (both with a
    /// message id, so replicas announcing the same run within ten minutes store it once).
    pub async fn hold(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        state: &BreakerState,
        policy_hash: &str,
    ) {
        self.held_gauge(cluster, plan, location, 1);
        let digest = sexton_model::digest::short_digest(
            state
                .trips
                .iter()
                .map(|t| t.kind.as_str())
                .chain(state.deleting.iter().map(String::as_str)),
        );
        {
            let mut announced = self.announced.lock().expect("not poisoned");
            let key = (cluster.clone(), plan.clone(), location.cloned());
            if announced.get(&key) == Some(&digest) {
                return;
            }
            announced.insert(key, digest.clone());
        }
        for trip in &state.trips {
            self.metrics
                .breaker_trips
                .with_label_values(&[trip.kind.as_str()])
                .inc();
        }
        let reasons: Vec<&str> = state.trips.iter().map(|t| t.reason.as_str()).collect();
        tracing::warn!(%cluster, %plan, location = ?location, deleting = state.deleting.len(), reasons = ?reasons, approve_with = %state.approve_with, "retention run held by the circuit breaker: nothing marked");
        let incident = Incident {
            schema_version: wire::SCHEMA_VERSION,
            service: "retention-worker".into(),
            kind: "retention-held".into(),
            cluster: Some(cluster.to_string()),
            backup_id: None,
            subject: match location {
                Some(location) => format!("plan {plan} at {location}"),
                None => format!("plan {plan}"),
            },
            reason: format!(
                "{}; `{}` lets this run through once",
                reasons.join("; "),
                state.approve_with
            ),
            at: Utc::now(),
        };
        let message_id = match location {
            Some(location) => format!("held.{cluster}.{plan}.at.{location}.{digest}"),
            None => format!("held.{cluster}.{plan}.{digest}"),
        };
        if let Err(err) = publish_once(
            &self.jetstream,
            topology::event_subject("incident", cluster.as_str()),
            &message_id,
            wire::encode(&incident),
        )
        .await
        {
            tracing::warn!(error = format!("{err:#}"), "incident event not published");
        }
        let entry = self.audit.entry(
            Some(cluster),
            Some(plan),
            AuditEvent::BreakerHeld {
                policy_hash: policy_hash.to_string(),
                trips: state.trips.clone(),
                deleting: state.deleting.clone(),
                location: location.map(ToString::to_string),
            },
        );
        // Best effort: the held run marks nothing, so there is nothing the entry must precede.
        let _ = self
            .audit
            .record_with_id(vec![entry], Some(&message_id))
            .await;
    }

    /// The run of `cluster`/`plan` (of its copies at `location`) was not held.
    pub fn passed(&self, cluster: &ClusterName, plan: &PlanName, location: Option<&LocationName>) {
        self.held_gauge(cluster, plan, location, 0);
        self.announced.lock().expect("not poisoned").remove(&(
            cluster.clone(),
            plan.clone(),
            location.cloned(),
        ));
    }

    /// `sexton_retention_breaker_held{cluster,plan}` at primary,
    /// `sexton_retention_copies_held{cluster,plan,location}` for a location's copies.
    fn held_gauge(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        value: i64,
    ) {
        match location {
            None => self
                .metrics
                .breaker_held
                .with_label_values(&[cluster.as_str(), plan.as_str()])
                .set(value),
            Some(location) => self
                .metrics
                .copies_held
                .with_label_values(&[cluster.as_str(), plan.as_str(), location.as_str()])
                .set(value),
        }
    }

    /// A tripped run goes through on an approval: the approval is used up (compare-and-set on
    /// the revision read, so a second replica's run of the same moment does not use another),
    /// and the audit says so before anything is marked.
    pub async fn release(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        state: &BreakerState,
    ) -> anyhow::Result<()> {
        let Some(approval) = &state.approval else {
            return Ok(());
        };
        let entry = self.audit.entry(
            Some(cluster),
            Some(plan),
            AuditEvent::BreakerReleased {
                approved_at: approval.approved_at,
                deleting: state.deleting.clone(),
                location: location.map(ToString::to_string),
            },
        );
        self.audit.record(vec![entry]).await?;
        let key = approval_key_at(cluster, plan, location);
        if let Err(err) = self
            .approvals
            .delete_expect_revision(&key, Some(approval.revision))
            .await
        {
            tracing::info!(%cluster, %plan, error = %err, "approval already used or replaced");
        }
        tracing::warn!(%cluster, %plan, location = ?location, deleting = state.deleting.len(), approved_by = %approval.by.describe(), "held retention run goes through on its approval");
        self.passed(cluster, plan, location);
        Ok(())
    }

    /// The plan of a run that marks something, before it marks: every backup's verdict and
    /// reasons, under the policy's hash. Nothing is marked unless this is stored.
    pub async fn record_decision(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        policy_hash: &str,
        decision: &sexton_retention::Plan,
    ) -> anyhow::Result<()> {
        let verdicts = [
            ("keep", &decision.keep),
            ("partial", &decision.partial),
            ("delete", &decision.delete),
        ];
        let decisions: Vec<Decided> = verdicts
            .into_iter()
            .flat_map(|(verdict, list)| {
                list.iter().map(move |d| Decided {
                    id: d.id.clone(),
                    verdict: verdict.to_string(),
                    reasons: Reason::texts(&d.reasons),
                })
            })
            .collect();
        let entries = self
            .audit
            .entries(Some(cluster), Some(plan), decisions, |decisions| {
                AuditEvent::RetentionDecision {
                    policy_hash: policy_hash.to_string(),
                    decisions,
                }
            });
        self.audit.record(entries).await?;
        Ok(())
    }

    /// What the run marked. Best effort: the decision is stored already, and each mark is in
    /// the catalog (and the log).
    pub async fn record_marks(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        policy_hash: &str,
        backups: Vec<AuditBackup>,
    ) {
        self.record_backups(cluster, plan, backups, |backups| {
            AuditEvent::BackupsMarked {
                policy_hash: policy_hash.to_string(),
                backups,
            }
        })
        .await;
    }

    /// Entries of `event` over `backups` (parts when they do not fit one); none for none.
    async fn record_backups(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        backups: Vec<AuditBackup>,
        event: impl Fn(Vec<AuditBackup>) -> AuditEvent,
    ) {
        if backups.is_empty() {
            return;
        }
        let entries = self
            .audit
            .entries(Some(cluster), Some(plan), backups, event);
        let _ = self.audit.record(entries).await;
    }

    /// The copies at `location` a run marked (issue 28), as one audit entry (or parts).
    pub async fn record_copy_marks(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: &str,
        policy_hash: &str,
        backups: Vec<AuditBackup>,
    ) {
        self.record_backups(cluster, plan, backups, |backups| AuditEvent::CopiesMarked {
            location: location.to_string(),
            policy_hash: policy_hash.to_string(),
            backups,
        })
        .await;
    }

    /// `retention.approve`: the run `state` describes (held now) may go once. Stores the
    /// approval and the audit entry (with who asked); the caller asks for a run.
    #[allow(clippy::too_many_arguments)]
    pub async fn approve(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        state: &BreakerState,
        actor: Actor,
        now: DateTime<Utc>,
    ) -> anyhow::Result<ApprovalRecord> {
        let record = ApprovalRecord {
            schema_version: sexton_model::records::RECORD_SCHEMA_VERSION,
            cluster: cluster.clone(),
            plan: plan.clone(),
            approval: Approval {
                approved_at: now,
                deleting: state.deleting.clone(),
            },
            trips: state.trips.clone(),
            by: actor.clone(),
        };
        let entry = self.audit.entry(
            Some(cluster),
            Some(plan),
            AuditEvent::BreakerApproved {
                trips: state.trips.clone(),
                deleting: state.deleting.clone(),
                location: location.map(ToString::to_string),
            },
        );
        self.audit.record_by(&actor, vec![entry]).await?;
        self.approvals
            .put(
                approval_key_at(cluster, plan, location),
                serde_json::to_vec(&record)
                    .expect("approvals serialise")
                    .into(),
            )
            .await
            .context("storing the approval")?;
        tracing::warn!(%cluster, %plan, deleting = state.deleting.len(), by = %actor.describe(), "held retention run approved");
        Ok(record)
    }
}

/// The policy hash a group's audit entries carry (`none` for a group without a policy).
pub fn hash_of(policy: Option<&Policy>) -> String {
    policy.map_or_else(|| "none".to_string(), audit::policy_hash)
}

/// The audit record of one marked backup.
pub fn marked(
    record: &sexton_model::records::BackupRecord,
    reasons: &[String],
    volumes: &[String],
    policy_hash: &str,
) -> AuditBackup {
    AuditBackup {
        id: record.id.to_string(),
        uid: record.uid.clone(),
        revision: None,
        reasons: reasons.to_vec(),
        policy_hash: Some(policy_hash.to_string()),
        volumes: volumes.to_vec(),
        objects: Vec::new(),
    }
}

/// A reply for an approval that cannot be given.
pub fn nothing_held(cluster: &ClusterName, plan: &PlanName, why: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("retention of cluster {cluster} plan {plan} is not held: {why}"),
    )
}
