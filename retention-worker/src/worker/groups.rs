//! Planning a cluster's groups, the I/O around [`crate::group_plan`]: the cluster's schedules (each
//! group's one policy), the catalog view brought up to date, the binlog index's segments, and
//! the circuit breaker's verdict on each plan that deletes. Runs, previews, `binlog.status` and
//! approvals all plan here; nothing here marks, publishes or writes.

use std::{collections::BTreeMap, sync::Arc};

use chrono::{DateTime, Utc};
use sexton_model::{
    names::{ClusterName, LocationName, PlanName},
    records::ScheduleRecord,
};
use sexton_retention::breaker::BreakerLimits;
use sexton_shared::planning;

use super::Worker;
use crate::binlog::{self, BinlogInput};
use crate::group_plan::{GroupPlan, Render};
use crate::view::{ClusterGroups, GroupView};

/// Which places' groups to plan: the primary's (previews, `binlog.status`), or every
/// location's copies too (runs, and approvals of a location's held plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Places {
    Primary,
    All,
}

impl Worker {
    /// The plans of every group of `cluster` (or one plan's) at every place (primary, then
    /// each location holding copies), decided at `now`: what a location's preview shows and
    /// its approval judges.
    pub(super) async fn plan_places(
        &self,
        cluster: &ClusterName,
        only_plan: Option<&PlanName>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<GroupPlan>> {
        let binlog = binlog::load(&self.store, &self.prefix, cluster).await;
        self.plan_groups(cluster, only_plan, now, &binlog, Render::Plan, Places::All)
            .await
    }

    /// The plans for every group of `cluster` (or one plan), decided at `now`, with the
    /// cluster's binlog segments from its index.
    pub async fn plan_cluster(
        &self,
        cluster: &ClusterName,
        only_plan: Option<&PlanName>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<GroupPlan>> {
        let binlog = binlog::load(&self.store, &self.prefix, cluster).await;
        self.plan_groups(
            cluster,
            only_plan,
            now,
            &binlog,
            Render::Plan,
            Places::Primary,
        )
        .await
    }

    /// `binlog.status`: the index and the horizon every group's plan gives now.
    pub async fn binlog_status(
        &self,
        cluster: &ClusterName,
        now: DateTime<Utc>,
    ) -> anyhow::Result<binlog::Status> {
        let input = binlog::load(&self.store, &self.prefix, cluster).await;
        let groups = self
            .plan_groups(cluster, None, now, &input, Render::Plan, Places::Primary)
            .await?;
        Ok(binlog::status(cluster, &input, &groups, now))
    }

    /// The plans of `cluster`'s groups over the catalog view and the binlog segments of
    /// `binlog`: the schedules first, then the catalog brought up to date.
    pub(super) async fn plan_groups(
        &self,
        cluster: &ClusterName,
        only_plan: Option<&PlanName>,
        now: DateTime<Utc>,
        binlog: &BinlogInput,
        render: Render,
        places: Places,
    ) -> anyhow::Result<Vec<GroupPlan>> {
        let schedules = self.schedules.of_cluster(cluster).await?;
        let mut view = self.view.current(cluster).await?;
        // A run over backups recorded in another store than their place's is held (issue 54):
        // nothing of it is decided, locked or deleted. A preview still shows the plan.
        if matches!(render, Render::Run) {
            if let Some(held) = self.stranded(cluster, &view) {
                return Err(held.into());
            }
        }
        let refresh = view.last_refresh;
        tracing::debug!(%cluster, records = view.len(), ?refresh, "catalog view current");
        let primary = GroupsAt {
            cluster,
            only_plan,
            schedules: &schedules,
            now,
            render,
        };
        let mut plans = self
            .plan_primary_groups(&primary, &mut view.primary, binlog)
            .await;
        // A run plans each location's copies too (issue 28): per plan, over the copies that
        // location holds, with the policy the plan's copy rules give it there.
        if places == Places::All {
            let mut archives = Archives::new();
            for (location, groups) in &mut view.locations {
                for group in groups.groups_mut() {
                    if only_plan.is_some_and(|p| *p != group.plan) {
                        continue;
                    }
                    let plan = self
                        .plan_location_group(&primary, location, group, &mut archives)
                        .await;
                    plans.push(plan);
                }
            }
        }
        Ok(plans)
    }

    /// The plans of the groups at primary, each under its group's policy, with the cluster's
    /// binlog segments, and each that deletes judged by the breaker.
    async fn plan_primary_groups(
        &self,
        at: &GroupsAt<'_>,
        groups: &mut ClusterGroups,
        binlog: &BinlogInput,
    ) -> Vec<GroupPlan> {
        let policies = planning::group_policies(at.schedules);
        let mut plans = Vec::new();
        for group in groups.groups_mut() {
            if at.only_plan.is_some_and(|p| *p != group.plan) {
                continue;
            }
            let policy = planning::policy_for(&policies, &group.plan);
            if policy.is_ok() {
                // Before the plan shares the members: set while a run still holds them, the
                // segments would copy the whole group.
                Arc::make_mut(&mut group.members).engine.binlog_segments = binlog.segments();
            }
            // Locks are set from every kept backup's reasons: a run renders them all.
            let render = match at.render {
                Render::Run if self.lock.is_some() => Render::RunWithPlan,
                other => other,
            };
            let mut plan = GroupPlan::decide(
                at.cluster,
                &group.plan,
                group.members.clone(),
                policy,
                at.now,
                render,
            );
            let objectives = sexton_shared::recovery::objectives_for(
                at.schedules,
                &plan.plan,
                &sexton_model::names::LocationName::primary(),
            );
            if let Some(owned) = plan.decision.as_ref().filter(|_| plan.deletes()) {
                let mut limits = self.envelope.limits(at.schedules, &plan.plan, at.now);
                // The promised window, where the breaker is on: a run that would lose an
                // instant of it is held (at primary, where the plan's catalog holds the log).
                if limits != BreakerLimits::OFF {
                    limits.recovery_window = objectives
                        .as_ref()
                        .and_then(|o| o.window)
                        .map(|w| w.delta());
                }
                plan.breaker = self
                    .envelope
                    .judge(
                        at.cluster,
                        &plan.plan,
                        None,
                        &limits,
                        &plan.members.engine,
                        owned,
                        at.now,
                    )
                    .await;
            }
            plan.copy_delays = copy_delays(at.schedules, &plan.plan);
            plan.objectives = objectives;
            plans.push(plan);
        }
        plans
    }

    /// The plan of one group's copies at `location`, under the policy the plan's copy rules
    /// give it there, judged by the breaker if it deletes.
    async fn plan_location_group(
        &self,
        at: &GroupsAt<'_>,
        location: &LocationName,
        group: &GroupView,
        archives: &mut Archives,
    ) -> GroupPlan {
        let rules = at
            .schedules
            .iter()
            .filter(|schedule| schedule.plan == group.plan)
            .flat_map(|schedule| &schedule.copies);
        let policy = sexton_model::copies::copy_policy(rules, location);
        // A location with a lock setting locks from the kept copies' reasons.
        let render = match at.render {
            Render::Run if self.location_locks.contains_key(location) => Render::RunWithPlan,
            other => other,
        };
        let mut plan = GroupPlan::decide(
            at.cluster,
            &group.plan,
            group.members.clone(),
            policy.map_err(|why| why.to_string()),
            at.now,
            render,
        );
        plan.location = Some(location.clone());
        plan.objectives =
            sexton_shared::recovery::objectives_for(at.schedules, &group.plan, location);
        if let Some(owned) = plan.decision.as_ref().filter(|_| plan.deletes()) {
            let (limits, judged) = self.location_limits(at, location, &plan, archives).await;
            plan.breaker = self
                .envelope
                .judge(
                    at.cluster,
                    &plan.plan,
                    Some(location),
                    &limits,
                    judged.as_ref().unwrap_or(&plan.members.engine),
                    owned,
                    at.now,
                )
                .await;
        }
        plan
    }

    /// The breaker's limits for a plan of copies at `location`, and the catalog to judge it
    /// over where the promised window is judged there (the copies with the location's own
    /// copy of the archive; `None`: the plan's own catalog).
    async fn location_limits(
        &self,
        at: &GroupsAt<'_>,
        location: &LocationName,
        plan: &GroupPlan,
        archives: &mut Archives,
    ) -> (BreakerLimits, Option<sexton_retention::Catalog>) {
        let mut limits = self.envelope.limits(at.schedules, &plan.plan, at.now);
        // Full backups only: the newest copy there is as old as the last full, many of the
        // schedule's intervals, which says nothing of failing backups; the staleness check
        // would hold every run there.
        let fulls_only = at
            .schedules
            .iter()
            .filter(|schedule| schedule.plan == plan.plan)
            .flat_map(|schedule| &schedule.copies)
            .any(|rule| {
                rule.to == *location && rule.select == sexton_model::copies::CopySelect::Fulls
            });
        if fulls_only {
            limits.stale_after = None;
        }
        // The promised window there, judged over the copies and the location's own copy of
        // the archive (read once per location).
        let window = plan.objectives.as_ref().and_then(|o| o.window);
        let mut judged = None;
        if let (true, Some(window), Some(store)) = (
            limits != BreakerLimits::OFF,
            window,
            self.locations.get(location),
        ) {
            limits.recovery_window = Some(window.delta());
            if !archives.contains_key(location) {
                let input = binlog::load(store, store.prefix(), at.cluster).await;
                archives.insert(location.clone(), input.segments());
            }
            let mut catalog = plan.members.engine.clone();
            catalog.binlog_segments = archives.get(location).cloned().unwrap_or_default();
            judged = Some(catalog);
        }
        (limits, judged)
    }
}

/// What every group of one planning shares: whose groups, which of them, the cluster's
/// schedules, when, and for what.
struct GroupsAt<'a> {
    cluster: &'a ClusterName,
    only_plan: Option<&'a PlanName>,
    schedules: &'a [ScheduleRecord],
    now: DateTime<Utc>,
    render: Render,
}

/// Each location's binlog archive, read once per planning where a window is judged there.
type Archives = BTreeMap<LocationName, Vec<sexton_retention::BinlogSegment>>;

/// The longest delay the copy rules of `plan`'s schedules give each location: a copy awaited
/// there is lagging only once it is past it.
fn copy_delays(
    schedules: &[sexton_model::records::ScheduleRecord],
    plan: &sexton_model::names::PlanName,
) -> std::collections::BTreeMap<String, chrono::TimeDelta> {
    let mut delays = std::collections::BTreeMap::new();
    for rule in schedules
        .iter()
        .filter(|schedule| schedule.plan == *plan)
        .flat_map(|schedule| &schedule.copies)
    {
        if let Some(delay) = rule.delay {
            let longest = delays.entry(rule.to.to_string()).or_default();
            *longest = delay.delta().max(*longest);
        }
    }
    delays
}
