//! The scenario and a location's simulation in words: what the calendar ([`super::calendar`])
//! and the page ([`super::page`]) both print, below both.

use sexton_simulate::{ByteSize, Simulation};

/// The scenario in one line: days, cadence, failures, sizes, sweeps, locks (the calendar's
/// header too).
pub(super) fn details(simulation: &Simulation) -> String {
    let scenario = &simulation.scenario;
    let mut parts = vec![format!(
        "{} days from {} ({})",
        simulation.days.len(),
        scenario.from.to_rfc3339(),
        simulation.zone
    )];
    if let Some(n) = scenario.full_every {
        parts.push(format!("full every {n}"));
    }
    if !scenario.volumes.is_empty() {
        parts.push(format!("volumes {}", scenario.volumes.join(",")));
    }
    parts.push(format!("failures {}", scenario.failures));
    parts.push(format!(
        "full {}, incremental {}",
        scenario.sizes.full, scenario.sizes.incremental
    ));
    parts.push(match scenario.sweep_every {
        Some(every) => format!("retention after each backup and every {every}"),
        None => "retention after each backup only".to_owned(),
    });
    if let Some(tiers) = &scenario.lock {
        parts.push(format!("Object Locks {tiers}"));
    }
    parts.join("; ")
}

/// A location's simulation in words: a heading naming the rule, then its figures (the
/// calendar and the page print the same).
pub(super) fn location_lines(
    location: &sexton_simulate::LocationSimulation,
) -> (String, Vec<String>) {
    let rule = &location.rule;
    let summary = &location.summary;
    let mut described = vec![format!(
        "policy {}",
        serde_json::to_string(&rule.policy).unwrap_or_default()
    )];
    if rule.select != sexton_model::copies::CopySelect::All {
        described.push(format!(
            "select {}",
            serde_json::to_value(rule.select)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        ));
    }
    if let Some(delay) = rule.delay {
        described.push(format!("delay {}", delay.in_words()));
    }
    if let Some(class) = &rule.storage_class {
        described.push(format!("written in {class}"));
    }
    for step in &rule.transitions {
        described.push(format!(
            "to {} after {} days",
            step.storage_class, step.after_days
        ));
    }
    let classes: Vec<String> = summary
        .storage_by_class
        .iter()
        .map(|(class, bytes)| format!("{class} {}", ByteSize(*bytes)))
        .collect();
    let mut lines = vec![
        format!(
            "at the end: {} copies, {}{}; peak {}",
            summary.count,
            ByteSize(summary.storage_bytes),
            if classes.is_empty() {
                String::new()
            } else {
                format!(" ({})", classes.join(", "))
            },
            ByteSize(summary.peak_storage_bytes)
        ),
        format!(
            "copies made {}, skipped {} (the policy there would delete them at once), deleted {}",
            summary.copied, summary.skipped, summary.deleted
        ),
    ];
    if summary.deleted_early > 0 {
        lines.push(format!(
            "deleted before their class's minimum: {}, charged {} GiB-days for storage already \
             gone",
            summary.deleted_early,
            summary.early_charged_byte_days / (1 << 30)
        ));
    }
    (format!("At {} ({})", rule.to, described.join(", ")), lines)
}
