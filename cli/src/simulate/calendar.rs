//! The terminal view of a simulation: a calendar with one row per day (or week) and, on each
//! row, the backups that exist at that day's end placed by age (newest on the right), then
//! the summary, the surprises, and why each backup of the last day is kept.
//!
//! When each cell holds at most one backup, a cell is one mark per backup, and the mark says
//! who keeps it (`●` a rule, `f` the floor alone, `c` a kept backup that builds on it, `p`
//! some volumes only, `x` a failed backup in its grace period); denser schedules show a count
//! or a bar per cell. Colour, only on a terminal, repeats who keeps it.

use std::fmt::Write as _;

use sexton_simulate::{human_duration, ByteSize, Comparison, Simulation};

use super::words::{details, location_lines};
use super::Class;

/// The most columns of the age axis; older backups are summed at the end of the row.
const MAX_COLUMNS: usize = 60;
/// Day rows up to this many days, week rows beyond (unless `--rows` says).
const MAX_DAY_ROWS: usize = 62;
/// The last day's backups listed with their reasons.
const MAX_LISTED: usize = 30;

const RESET: &str = "\x1b[0m";
const DIM: &str = "\x1b[2m";

/// Which days get a row, and how many days a row and a column stand for.
struct Layout {
    rows: Vec<usize>,
    unit_days: usize,
}

fn layout(simulation: &Simulation, rows: Option<&str>) -> Layout {
    let n_days = simulation.days.len();
    let weekly = match rows {
        Some("week") => true,
        Some(_) => false,
        None => n_days > MAX_DAY_ROWS,
    };
    if !weekly {
        return Layout {
            rows: (0..n_days).collect(),
            unit_days: 1,
        };
    }
    let mut rows: Vec<usize> = (6..n_days).step_by(7).collect();
    if rows.last() != Some(&(n_days - 1)) {
        rows.push(n_days - 1);
    }
    Layout { rows, unit_days: 7 }
}

/// One row's cells: per column (oldest first) the count and the strongest class, and the
/// backups older than the axis.
struct RowCells {
    cells: Vec<(usize, Option<Class>)>,
    older: usize,
    oldest_date: Option<chrono::NaiveDate>,
}

fn row_cells(simulation: &Simulation, day: usize, unit_days: usize, width: usize) -> RowCells {
    let mut cells = vec![(0usize, None::<Class>); width];
    let mut older = 0;
    let mut oldest_date = None;
    for &index in &simulation.days[day].backups {
        let backup = &simulation.backups[index];
        let Some(reasons) = backup.reasons_on(day) else {
            continue;
        };
        let taken_day = backup.spans.first().map_or(day, |span| span.first_day);
        let age = day / unit_days - taken_day / unit_days;
        if age >= width {
            older += 1;
            let date = simulation.days[taken_day].date;
            oldest_date = Some(oldest_date.map_or(date, |d: chrono::NaiveDate| d.min(date)));
            continue;
        }
        let cell = &mut cells[width - 1 - age];
        cell.0 += 1;
        let class = Class::of(reasons);
        cell.1 = Some(cell.1.map_or(class, |c| c.max(class)));
    }
    RowCells {
        cells,
        older,
        oldest_date,
    }
}

/// The glyph of a cell holding `n` backups when the busiest cell holds `cap`.
fn glyph(n: usize, class: Option<Class>, cap: usize) -> char {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    match (n, class) {
        (0, _) | (_, None) => '·',
        (_, Some(class)) if cap == 1 => class.mark(),
        _ if cap <= 9 => char::from_digit(n as u32, 10).unwrap_or('+'),
        _ => BARS[((n * 8).div_ceil(cap)).clamp(1, 8) - 1],
    }
}

fn paint(text: &str, colour: Option<&str>, enabled: bool) -> String {
    match colour {
        Some(code) if enabled => format!("{code}{text}{RESET}"),
        _ => text.to_owned(),
    }
}

fn gap_text(simulation: &Simulation, day: usize) -> String {
    simulation.days[day]
        .worst_gap
        .as_ref()
        .map_or_else(|| "-".to_owned(), |gap| human_duration(gap.duration()))
}

fn header(simulation: &Simulation, out: &mut String) {
    let scenario = &simulation.scenario;
    let _ = writeln!(
        out,
        "{} with {}",
        scenario.cron,
        serde_json::to_string(&scenario.policy).expect("a policy serialises")
    );
    let _ = writeln!(out, "{}", details(simulation));
    let _ = writeln!(out);
}

/// The calendar, the summary, and the last day's backups with their reasons.
pub fn render(simulation: &Simulation, rows: Option<&str>, colour: bool) -> String {
    let mut out = String::new();
    header(simulation, &mut out);
    let layout = layout(simulation, rows);
    let width = axis_width(simulation, &layout);
    let rows: Vec<(usize, RowCells)> = layout
        .rows
        .iter()
        .map(|&day| (day, row_cells(simulation, day, layout.unit_days, width)))
        .collect();
    let cap = rows
        .iter()
        .flat_map(|(_, row)| row.cells.iter().map(|cell| cell.0))
        .max()
        .unwrap_or(0)
        .max(1);
    let unit = if layout.unit_days == 1 { "day" } else { "week" };
    let _ = writeln!(
        out,
        "{:<10}  {:>5}  {:>9}  {:<10}  {:>9}  backups at the day's end by age, one column a {unit}, newest right",
        if layout.unit_days == 1 { "DAY" } else { "WEEK TO" },
        "COUNT",
        "STORAGE",
        "OLDEST",
        "WORST GAP"
    );
    for (day, row) in &rows {
        let record = &simulation.days[*day];
        let oldest = record.oldest_restorable.map_or_else(
            || "-".to_owned(),
            |oldest| {
                oldest
                    .with_timezone(
                        &simulation
                            .scenario
                            .cron
                            .zone()
                            .unwrap_or(chrono_tz::Tz::UTC),
                    )
                    .date_naive()
                    .to_string()
            },
        );
        let mut line = format!(
            "{:<10}  {:>5}  {:>9}  {:<10}  {:>9}  ",
            record.date.to_string(),
            record.count,
            ByteSize(record.storage_bytes).to_string(),
            oldest,
            gap_text(simulation, *day)
        );
        for &(n, class) in &row.cells {
            let text = glyph(n, class, cap).to_string();
            let code = if n == 0 {
                Some(DIM)
            } else {
                class.map(Class::colour)
            };
            line.push_str(&paint(&text, code, colour));
        }
        if row.older > 0 {
            let oldest = row.oldest_date.map(|d| d.to_string()).unwrap_or_default();
            let _ = write!(line, "  +{} older (oldest {oldest})", row.older);
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out);
    legend(
        cap,
        layout.unit_days,
        colour,
        simulation.scenario.lock.is_some(),
        &mut out,
    );
    summary(simulation, &mut out);
    last_day(simulation, &mut out);
    locations(simulation, &mut out);
    out
}

/// The columns the rows need (the oldest backup shown), at most [`MAX_COLUMNS`].
fn axis_width(simulation: &Simulation, layout: &Layout) -> usize {
    let oldest_age = layout
        .rows
        .iter()
        .flat_map(|&day| {
            simulation.days[day].backups.iter().map(move |&index| {
                let taken_day = simulation.backups[index]
                    .spans
                    .first()
                    .map_or(day, |span| span.first_day);
                day / layout.unit_days - taken_day / layout.unit_days
            })
        })
        .max()
        .unwrap_or(0);
    (oldest_age + 1).clamp(7, MAX_COLUMNS)
}

fn legend(cap: usize, unit_days: usize, colour: bool, locks: bool, out: &mut String) {
    let unit = if unit_days == 1 { "day" } else { "week" };
    let marks: Vec<String> = Class::shown(locks)
        .iter()
        .map(|class| {
            let mark = if cap == 1 { class.mark() } else { '■' };
            format!(
                "{} {}",
                paint(&mark.to_string(), Some(class.colour()), colour),
                class.describe()
            )
        })
        .collect();
    if cap == 1 || colour {
        let _ = writeln!(out, "legend: {}", marks.join(", "));
    }
    if cap > 9 {
        let _ = writeln!(
            out,
            "a bar's height is the number of backups taken that {unit} that still exist (█ = {cap})"
        );
    } else if cap > 1 {
        let _ = writeln!(
            out,
            "a digit is the number of backups taken that {unit} that still exist"
        );
    }
    let _ = writeln!(out);
}

fn summary(simulation: &Simulation, out: &mut String) {
    let summary = &simulation.summary;
    let every = summary
        .interval_seconds
        .map(|s| format!(", every {}", human_duration(chrono::TimeDelta::seconds(s))))
        .unwrap_or_default();
    let _ = writeln!(out, "Summary");
    let _ = writeln!(
        out,
        "  backups taken     {} ({} failed){every}; retention ran {} times",
        summary.n_taken, summary.n_failed, simulation.n_runs
    );
    let settled = summary.steady.settled_on.map_or_else(
        || " (still changing in the last week)".to_owned(),
        |d| format!(" (since {d})"),
    );
    let _ = writeln!(
        out,
        "  steady state      {} backups, {}{settled}",
        summary.steady.count,
        ByteSize(summary.steady.storage_bytes)
    );
    let date = |on: Option<chrono::NaiveDate>| on.map(|d| d.to_string()).unwrap_or_default();
    let _ = writeln!(
        out,
        "  most              {} backups (first on {}), {} between a backup and the next sweep; storage {} ({} at a peak)",
        summary.max_count.value,
        date(summary.max_count.on),
        summary.max_peak_count.value,
        ByteSize(summary.max_storage_bytes.value),
        ByteSize(summary.max_peak_storage_bytes.value)
    );
    if let Some(locked) = &summary.locked_only {
        let _ = writeln!(
            out,
            "  only locks keep   at most {} backups (first on {}), at most {} (first on {}); {} backups, {} on the last day",
            locked.max_count.value,
            date(locked.max_count.on),
            ByteSize(locked.max_bytes.value),
            date(locked.max_bytes.on),
            locked.last_count,
            ByteSize(locked.last_bytes)
        );
    }
    if let Some(binlog) = &summary.binlog {
        let _ = writeln!(
            out,
            "  binlog archive    at most {} (first on {}); {} segments, {} on the last day ({} kept only for backups restorable to their own end); point-in-time recovery from {}",
            ByteSize(binlog.max_bytes.value),
            date(binlog.max_bytes.on),
            binlog.last_segments,
            ByteSize(binlog.last_bytes),
            binlog.last_own_range_segments,
            binlog
                .last_pitr_from
                .map_or_else(|| "- (nothing collected)".to_owned(), |at| at.to_rfc3339())
        );
    }
    let recovery = &simulation.recovery;
    let _ = writeln!(
        out,
        "  restorable at end {}",
        match (recovery.oldest(), recovery.newest()) {
            (Some(oldest), Some(newest)) => format!(
                "{} → {}: {} restore points, {} gaps (docs/recovery.md)",
                oldest.to_rfc3339(),
                newest.to_rfc3339(),
                recovery.points.len(),
                recovery.gaps.len()
            ),
            _ => "nothing".to_owned(),
        }
    );
    match &summary.max_gap {
        Some(gap) => {
            let _ = writeln!(
                out,
                "  worst gap         {} ({} → {}, first on {})",
                gap.human, gap.gap.after, gap.gap.before, gap.on
            );
        }
        None => {
            let _ = writeln!(out, "  worst gap         - (never two restore points)");
        }
    }
    let _ = writeln!(
        out,
        "  promised window   {}",
        summary.promised_window.as_deref().map_or_else(
            || "none stated: gaps are measured over everything kept".to_owned(),
            |window| format!("{window}: gaps are measured over it")
        )
    );
    for (position, rule) in summary.rules.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<18}{} {}: kept {} backups ({} by it alone)",
            if position == 0 { "rules" } else { "" },
            rule.rule,
            rule.setting,
            rule.backups,
            rule.alone
        );
    }
    let _ = writeln!(out);
    if !summary.surprises.is_empty() {
        let _ = writeln!(out, "Surprises");
        for surprise in &summary.surprises {
            let _ = writeln!(out, "  - {}", surprise.message);
        }
        let _ = writeln!(out);
    }
}

fn last_day(simulation: &Simulation, out: &mut String) {
    let day = simulation.days.len() - 1;
    let record = &simulation.days[day];
    let _ = writeln!(
        out,
        "On {}, the last day: {} backups exist; why each is kept",
        record.date,
        record.backups.len()
    );
    for &index in record.backups.iter().take(MAX_LISTED) {
        let backup = &simulation.backups[index];
        let kind = if backup.failed() {
            "failed"
        } else {
            match backup.record.kind {
                sexton_retention::BackupKind::Full => "full",
                sexton_retention::BackupKind::Incremental => "incr",
            }
        };
        let reasons = backup.reasons_on(day).unwrap_or_default().join("; ");
        let _ = writeln!(
            out,
            "  {}  {:<6} {:>9}  {reasons}",
            backup.record.id,
            kind,
            ByteSize(backup.size_bytes).to_string()
        );
    }
    if record.backups.len() > MAX_LISTED {
        let _ = writeln!(
            out,
            "  … {} more (-o json lists them all)",
            record.backups.len() - MAX_LISTED
        );
    }
}

/// Each copy rule's location: its rule, what it copied, skipped and deleted, what it holds at
/// the end per storage class, and what early deletions are charged.
fn locations(simulation: &Simulation, out: &mut String) {
    for location in &simulation.locations {
        let (heading, lines) = location_lines(location);
        let _ = writeln!(out);
        let _ = writeln!(out, "{heading}");
        for line in lines {
            let _ = writeln!(out, "  {line}");
        }
    }
}

/// Two policies side by side, per row, and what switching at the end would delete.
pub fn render_comparison(comparison: &Comparison, rows: Option<&str>, colour: bool) -> String {
    let current = &comparison.current;
    let proposed = &comparison.proposed;
    let mut out = String::new();
    header(current, &mut out);
    let _ = writeln!(
        out,
        "against {}",
        serde_json::to_string(&proposed.scenario.policy).expect("a policy serialises")
    );
    let _ = writeln!(out);
    let layout = layout(current, rows);
    let _ = writeln!(
        out,
        "{:<10}  {:>13}  {:>21}  {:>17}",
        "DAY", "COUNT", "STORAGE", "WORST GAP"
    );
    for &day in &layout.rows {
        let pair = &comparison.days[day];
        let changed =
            pair.count[0] != pair.count[1] || pair.storage_bytes[0] != pair.storage_bytes[1];
        let line = format!(
            "{:<10}  {:>13}  {:>21}  {:>17}",
            pair.date.to_string(),
            format!("{} → {}", pair.count[0], pair.count[1]),
            format!(
                "{} → {}",
                ByteSize(pair.storage_bytes[0]),
                ByteSize(pair.storage_bytes[1])
            ),
            format!("{} → {}", gap_text(current, day), gap_text(proposed, day)),
        );
        let code = if changed { Some("\x1b[1m") } else { None };
        let _ = writeln!(out, "{}", paint(&line, code, colour));
    }
    let _ = writeln!(out);
    let switch = &comparison.switch;
    let delta = switch.steady_storage_delta_bytes;
    let _ = writeln!(
        out,
        "Steady state: {} backups, {} now; {} backups, {} proposed ({}{})",
        switch.steady_count[0],
        ByteSize(current.summary.steady.storage_bytes),
        switch.steady_count[1],
        ByteSize(proposed.summary.steady.storage_bytes),
        if delta < 0 { "-" } else { "+" },
        ByteSize(delta.unsigned_abs())
    );
    let _ = writeln!(
        out,
        "Switching on {} deletes {} backups at once ({} freed){}",
        switch.at.to_rfc3339(),
        switch.deletes.len(),
        ByteSize(switch.freed_bytes),
        if switch.volumes_deleted.is_empty() {
            String::new()
        } else {
            format!(
                " and {} volumes of backups that stay",
                switch.volumes_deleted.len()
            )
        }
    );
    for changed in switch.deletes.iter().take(MAX_LISTED) {
        let _ = writeln!(
            out,
            "  {}  now: {}  →  proposed: {}",
            changed.id,
            changed.current_reasons.join("; "),
            changed.proposed_reasons.join("; ")
        );
    }
    if switch.deletes.len() > MAX_LISTED {
        let _ = writeln!(out, "  … {} more", switch.deletes.len() - MAX_LISTED);
    }
    for (label, simulation) in [("now", current), ("proposed", proposed)] {
        if !simulation.summary.surprises.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(out, "Surprises ({label})");
            for surprise in &simulation.summary.surprises {
                let _ = writeln!(out, "  - {}", surprise.message);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simulation(cron: &str, policy: &str, days: i64) -> Simulation {
        let scenario = sexton_simulate::Scenario::new(
            sexton_schedule::CronSpec::parse(cron).unwrap(),
            sexton_retention::Policy::from_json(policy).unwrap(),
            "2026-01-01T00:00:00Z".parse().unwrap(),
            sexton_simulate::Days::new(days).unwrap(),
        );
        sexton_simulate::simulate(&scenario).unwrap()
    }

    /// Colour only when asked (stdout is a terminal): the marks say who keeps a backup either
    /// way, the colour repeats it.
    #[test]
    fn colour_only_when_asked() {
        let weekly_floor = simulation("0 3 * * 1", r#"{"retention_duration": 2}"#, 10);
        let plain = render(&weekly_floor, None, false);
        assert!(!plain.contains('\u{1b}'), "{plain}");
        assert!(plain.contains("2026-01-09      1"), "{plain}");
        // Kept by the rule on its day, by the floor alone from the third day on.
        let coloured = render(&weekly_floor, None, true);
        assert!(coloured.contains("\u{1b}[32m●\u{1b}[0m"), "{coloured}");
        assert!(coloured.contains("\u{1b}[33mf\u{1b}[0m"), "{coloured}");
    }

    /// Rows become weeks beyond 62 days, and a dense schedule shows bars, not marks.
    #[test]
    fn long_and_dense_simulations_fold_into_weeks_and_bars() {
        let hourly = simulation("@hourly", r#"{"keep_last": 200}"#, 70);
        let text = render(&hourly, None, false);
        assert!(text.contains("WEEK TO"), "{text}");
        assert!(text.contains('█'), "{text}");
        assert!(
            text.contains("a bar's height is the number of backups"),
            "{text}"
        );
        let daily = render(&hourly, Some("day"), false);
        assert!(
            daily.lines().any(|line| line.starts_with("2026-03-11")),
            "{daily}"
        );
    }
}
