//! The HTML view of a simulation (`-o html FILE`): one self-contained page that fetches
//! nothing. Its content security policy allows no source at all (`default-src 'none'`) except
//! the inline style and script; the charts are inline SVG.
//!
//! The timeline puts every backup at the time it was taken (x) and draws a bar down the days
//! (y) it existed at the day's end, one bar per run of days with the same reasons, coloured by
//! who kept it; hovering shows the engine's reasons (SVG `<title>`). Below are the count and
//! storage curves and a day explorer: the page's script lists the backups of the chosen day
//! with their reasons. The script also writes, for the tests, how many resources the page
//! loaded and how many requests its policy blocked.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::json;
use sexton_simulate::{human_duration, ByteSize, Comparison, Simulation};

use super::words::{details, location_lines};
use super::Class;

const PLOT_WIDTH: f64 = 960.0;
const LEFT: f64 = 90.0;
const TOP: f64 = 24.0;
const CURVE_HEIGHT: f64 = 160.0;

/// The page for `simulation`, with the comparison's figures when there is one.
pub fn render(simulation: &Simulation, comparison: Option<&Comparison>) -> String {
    let scenario = &simulation.scenario;
    let policy = serde_json::to_string(&scenario.policy).expect("a policy serialises");
    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">
<title>Retention simulation: {title}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Retention simulation</h1>
<p class="scenario"><code>{cron}</code> with <code>{policy}</code><br>{details}</p>
"#,
        title = escape(&format!("{} {}", scenario.cron, policy)),
        cron = escape(scenario.cron.as_str()),
        policy = escape(&policy),
        details = escape(&details(simulation)),
    );
    summary(simulation, &mut page);
    for location in &simulation.locations {
        let (heading, lines) = location_lines(location);
        let _ = writeln!(
            page,
            "<section class=\"location\"><h2>{}</h2><ul>",
            escape(&heading)
        );
        for line in lines {
            let _ = writeln!(page, "<li>{}</li>", escape(&line));
        }
        page.push_str("</ul></section>\n");
    }
    timeline(simulation, &mut page);
    curves(simulation, comparison, &mut page);
    if let Some(comparison) = comparison {
        switch_over(comparison, &mut page);
    }
    explorer(simulation, &mut page);
    let _ = write!(
        page,
        r#"<footer>resources loaded: <span id="resource-count">?</span>; requests blocked: <span id="csp-violations">?</span></footer>
<script type="application/json" id="sim-data">{data}</script>
<script>{SCRIPT}</script>
</body>
</html>
"#,
        data = script_data(simulation),
    );
    page
}

fn summary(simulation: &Simulation, page: &mut String) {
    let summary = &simulation.summary;
    let date = |on: Option<chrono::NaiveDate>| on.map(|d| d.to_string()).unwrap_or_default();
    let mut rows = vec![
        (
            "backups taken",
            format!(
                "{} ({} failed); retention ran {} times",
                summary.n_taken, summary.n_failed, simulation.n_runs
            ),
        ),
        (
            "steady state",
            format!(
                "{} backups, {}{}",
                summary.steady.count,
                ByteSize(summary.steady.storage_bytes),
                summary
                    .steady
                    .settled_on
                    .map_or_else(|| " (still changing)".to_owned(), |d| format!(" since {d}"))
            ),
        ),
        (
            "most",
            format!(
                "{} backups (first on {}), {} at a peak; storage {}",
                summary.max_count.value,
                date(summary.max_count.on),
                summary.max_peak_count.value,
                ByteSize(summary.max_peak_storage_bytes.value)
            ),
        ),
        (
            "worst gap",
            summary.max_gap.as_ref().map_or_else(
                || "-".to_owned(),
                |gap| {
                    format!(
                        "{} ({} → {}, first on {})",
                        gap.human, gap.gap.after, gap.gap.before, gap.on
                    )
                },
            ),
        ),
        (
            "promised window",
            summary
                .promised_window
                .clone()
                .unwrap_or_else(|| "none stated (gaps over everything kept)".to_owned()),
        ),
    ];
    if let Some(locked) = &summary.locked_only {
        rows.push((
            "only locks keep",
            format!(
                "at most {} backups (first on {}), at most {} (first on {}); {} backups, {} on \
                 the last day",
                locked.max_count.value,
                date(locked.max_count.on),
                ByteSize(locked.max_bytes.value),
                date(locked.max_bytes.on),
                locked.last_count,
                ByteSize(locked.last_bytes)
            ),
        ));
    }
    for rule in &summary.rules {
        rows.push((
            rule.rule,
            format!(
                "{}: kept {} backups ({} by it alone)",
                rule.setting, rule.backups, rule.alone
            ),
        ));
    }
    page.push_str("<section id=\"summary\"><h2>Summary</h2><dl>\n");
    for (label, value) in rows {
        let _ = writeln!(
            page,
            "<dt>{}</dt><dd>{}</dd>",
            escape(label),
            escape(&value)
        );
    }
    page.push_str("</dl>\n");
    if !summary.surprises.is_empty() {
        page.push_str("<h2>Surprises</h2><ul id=\"surprises\">\n");
        for surprise in &summary.surprises {
            let kind = serde_json::to_value(surprise.kind).expect("a kind serialises");
            let _ = writeln!(
                page,
                "<li data-kind=\"{}\">{}</li>",
                escape(kind.as_str().unwrap_or_default()),
                escape(&surprise.message)
            );
        }
        page.push_str("</ul>\n");
    }
    page.push_str("</section>\n");
}

/// x of an instant on the time axis.
fn x_of(simulation: &Simulation, at: DateTime<Utc>) -> f64 {
    let span = (simulation.until - simulation.from).num_seconds().max(1) as f64;
    LEFT + (at - simulation.from).num_seconds() as f64 / span * PLOT_WIDTH
}

fn timeline(simulation: &Simulation, page: &mut String) {
    let n_days = simulation.days.len();
    let row_height = (720.0 / n_days as f64).clamp(1.5, 14.0);
    let plot_height = row_height * n_days as f64;
    let height = TOP + plot_height + 30.0;
    let width = LEFT + PLOT_WIDTH + 20.0;
    let interval = simulation.summary.interval_seconds.unwrap_or(86_400).max(1) as f64;
    let span = (simulation.until - simulation.from).num_seconds().max(1) as f64;
    let bar_width = (interval / span * PLOT_WIDTH * 0.8).clamp(1.0, 40.0);
    let _ = write!(
        page,
        r#"<section><h2>Kept backups</h2>
<p class="note">Each bar is a backup: placed at the time it was taken, running down the days it still existed at the day's end. Hover for the engine's reasons.</p>
<svg id="timeline" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="kept backups by day">
<rect class="plot" x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{plot_height:.1}"/>
"#
    );
    // Day labels on the left: about 12 of them.
    let label_every = n_days.div_ceil(12).max(1);
    for (index, day) in simulation.days.iter().enumerate() {
        if index % label_every == 0 {
            let _ = writeln!(
                page,
                r#"<text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                TOP + (index as f64 + 0.5) * row_height + 4.0,
                day.date
            );
        }
    }
    // Time labels below: the same dates, where the backups taken on them are.
    for (index, day) in simulation.days.iter().enumerate() {
        if index % label_every == 0 {
            let at = day.date.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
            let x = x_of(simulation, at.max(simulation.from));
            let _ = writeln!(
                page,
                r#"<text class="axis" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                TOP + plot_height + 18.0,
                day.date.format("%m-%d")
            );
        }
    }
    for backup in &simulation.backups {
        if backup.spans.is_empty() {
            continue;
        }
        let x = x_of(simulation, backup.taken_at());
        let kind = if backup.failed() {
            "failed"
        } else {
            match backup.record.kind {
                sexton_retention::BackupKind::Full => "full",
                sexton_retention::BackupKind::Incremental => "incremental",
            }
        };
        let _ = writeln!(
            page,
            r#"<g class="backup" data-id="{}">"#,
            escape(&backup.record.id)
        );
        for span in &backup.spans {
            let class = Class::of(&span.reasons);
            let first = &simulation.days[span.first_day].date;
            let last = &simulation.days[span.last_day].date;
            let mut title = format!(
                "{} ({kind}, {})\ntaken {}\n{} to {}: {}",
                backup.record.id,
                ByteSize(backup.size_bytes),
                backup.taken_at().to_rfc3339(),
                first,
                last,
                span.reasons.join("; ")
            );
            if let Some(deleted) = backup.deleted_at {
                let _ = write!(title, "\ndeleted {}", deleted.to_rfc3339());
            }
            let _ = writeln!(
                page,
                r#"<rect class="mark {}" x="{:.2}" y="{:.2}" width="{bar_width:.2}" height="{:.2}"><title>{}</title></rect>"#,
                class.css(),
                x,
                TOP + span.first_day as f64 * row_height,
                (span.last_day - span.first_day + 1) as f64 * row_height,
                escape(&title)
            );
        }
        page.push_str("</g>\n");
    }
    let _ = write!(
        page,
        r#"<line id="day-cursor" x1="{LEFT}" x2="{:.1}" y1="0" y2="0" data-row-height="{row_height:.4}" data-top="{TOP}"/>
</svg>
<p class="legend">{}</p>
</section>
"#,
        LEFT + PLOT_WIDTH,
        Class::shown(simulation.scenario.lock.is_some())
            .iter()
            .map(|class| format!(
                r#"<span class="swatch {}"></span>{}"#,
                class.css(),
                escape(class.describe())
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// A line chart of one value per day; `series` are (css class, label, values).
fn curve(
    id: &str,
    title: &str,
    series: &[(&str, String, Vec<f64>)],
    format_value: &dyn Fn(f64) -> String,
    simulation: &Simulation,
    page: &mut String,
) {
    let n_days = simulation.days.len();
    let max = series
        .iter()
        .flat_map(|(_, _, values)| values.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let width = LEFT + PLOT_WIDTH + 20.0;
    let height = TOP + CURVE_HEIGHT + 30.0;
    let x = |index: usize| LEFT + (index as f64 + 0.5) / n_days as f64 * PLOT_WIDTH;
    let y = |value: f64| TOP + CURVE_HEIGHT - value / max * CURVE_HEIGHT;
    let _ = write!(
        page,
        r#"<h3>{title}</h3>
<svg id="{id}" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="{title}">
<rect class="plot" x="{LEFT}" y="{TOP}" width="{PLOT_WIDTH}" height="{CURVE_HEIGHT}"/>
<text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>
<text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">0</text>
<text class="axis" x="{LEFT}" y="{:.1}">{}</text>
<text class="axis" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>
"#,
        LEFT - 6.0,
        TOP + 4.0,
        escape(&format_value(max)),
        LEFT - 6.0,
        TOP + CURVE_HEIGHT,
        TOP + CURVE_HEIGHT + 18.0,
        simulation.days[0].date,
        LEFT + PLOT_WIDTH,
        TOP + CURVE_HEIGHT + 18.0,
        simulation.days[n_days - 1].date,
    );
    for (class, label, values) in series {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(index, &value)| format!("{:.1},{:.1}", x(index), y(value)))
            .collect();
        let _ = writeln!(
            page,
            r#"<polyline class="series {class}" points="{}"><title>{}</title></polyline>"#,
            points.join(" "),
            escape(label)
        );
    }
    page.push_str("</svg>\n<p class=\"legend\">");
    for (class, label, _) in series {
        let _ = write!(
            page,
            r#"<span class="line {class}"></span>{} "#,
            escape(label)
        );
    }
    page.push_str("</p>\n");
}

fn curves(simulation: &Simulation, comparison: Option<&Comparison>, page: &mut String) {
    page.push_str("<section><h2>Count and storage</h2>\n");
    let counts = |s: &Simulation| s.days.iter().map(|d| d.count as f64).collect::<Vec<_>>();
    let peaks = |s: &Simulation| {
        s.days
            .iter()
            .map(|d| d.peak_count as f64)
            .collect::<Vec<_>>()
    };
    let storage = |s: &Simulation| {
        s.days
            .iter()
            .map(|d| d.storage_bytes as f64)
            .collect::<Vec<_>>()
    };
    // The peak first, so that the count draws over it where they are equal.
    let mut count_series = vec![
        (
            "peak",
            "most at any run of the day".to_owned(),
            peaks(simulation),
        ),
        (
            "count",
            "backups at the day's end".to_owned(),
            counts(simulation),
        ),
    ];
    let mut storage_series = vec![("storage", "storage".to_owned(), storage(simulation))];
    if let Some(comparison) = comparison {
        count_series.push((
            "proposed",
            "backups with the proposed policy".to_owned(),
            counts(&comparison.proposed),
        ));
        storage_series.push((
            "proposed",
            "storage with the proposed policy".to_owned(),
            storage(&comparison.proposed),
        ));
    }
    curve(
        "count-curve",
        "Restore points",
        &count_series,
        &|value| format!("{value:.0}"),
        simulation,
        page,
    );
    curve(
        "storage-curve",
        "Storage",
        &storage_series,
        &|value| ByteSize(value as u64).to_string(),
        simulation,
        page,
    );
    page.push_str("</section>\n");
}

fn switch_over(comparison: &Comparison, page: &mut String) {
    let switch = &comparison.switch;
    let proposed =
        serde_json::to_string(&comparison.proposed.scenario.policy).expect("a policy serialises");
    let _ = write!(
        page,
        r#"<section id="switch"><h2>Against <code>{}</code></h2>
<p>Steady state: {} backups, {} now; {} backups, {} proposed. Switching on {} deletes {} backups at once ({} freed).</p>
<ul>
"#,
        escape(&proposed),
        switch.steady_count[0],
        ByteSize(comparison.current.summary.steady.storage_bytes),
        switch.steady_count[1],
        ByteSize(comparison.proposed.summary.steady.storage_bytes),
        switch.at.to_rfc3339(),
        switch.deletes.len(),
        ByteSize(switch.freed_bytes)
    );
    for changed in &switch.deletes {
        let _ = writeln!(
            page,
            r#"<li class="deleted-by-change">{}: now {}; proposed {}</li>"#,
            escape(&changed.id),
            escape(&changed.current_reasons.join("; ")),
            escape(&changed.proposed_reasons.join("; "))
        );
    }
    page.push_str("</ul></section>\n");
}

fn explorer(simulation: &Simulation, page: &mut String) {
    let last = simulation.days.len() - 1;
    let _ = write!(
        page,
        r#"<section id="explorer"><h2>One day</h2>
<p><input type="range" id="day" min="0" max="{last}" value="{last}" aria-label="day"> <span id="day-label"></span></p>
<ol id="day-list"></ol>
</section>
"#
    );
}

/// What the script needs: per day its date and figures; per backup that existed at some day's
/// end its id, time, kind, size and spans (first day, last day, index into `reasons`).
fn script_data(simulation: &Simulation) -> String {
    let mut reasons: Vec<&[String]> = Vec::new();
    let mut reason_index = std::collections::HashMap::<&[String], usize>::new();
    let mut backups = Vec::new();
    for backup in simulation.backups.iter().filter(|b| !b.spans.is_empty()) {
        let spans: Vec<serde_json::Value> = backup
            .spans
            .iter()
            .map(|span| {
                let next = reasons.len();
                let index = *reason_index.entry(&span.reasons).or_insert(next);
                if index == next {
                    reasons.push(&span.reasons);
                }
                json!([
                    span.first_day,
                    span.last_day,
                    index,
                    Class::of(&span.reasons).css()
                ])
            })
            .collect();
        backups.push(json!({
            "id": backup.record.id,
            "taken": backup.taken_at().to_rfc3339(),
            "size": ByteSize(backup.size_bytes).to_string(),
            "spans": spans,
        }));
    }
    let days: Vec<serde_json::Value> = simulation
        .days
        .iter()
        .map(|day| {
            json!({
                "date": day.date.to_string(),
                "count": day.count,
                "storage": ByteSize(day.storage_bytes).to_string(),
                "gap": day.worst_gap.as_ref().map(|gap| human_duration(gap.duration())),
                "oldest": day.oldest_restorable.map(|oldest| oldest.to_rfc3339()),
            })
        })
        .collect();
    let data = json!({"days": days, "backups": backups, "reasons": reasons});
    // Inside <script>, "<" must not start a tag: JSON allows it escaped.
    serde_json::to_string(&data)
        .expect("the page data serialises")
        .replace('<', "\\u003c")
}

/// Text and attribute values in HTML.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

const STYLE: &str = r#"
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
code { background: #f3f3f3; padding: 1px 4px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dt { font-weight: 600; }
dd { margin: 0; }
svg text.axis { font-size: 11px; fill: #555; }
rect.plot { fill: #fafafa; stroke: #ddd; }
rect.mark { stroke: none; }
rect.rule, span.swatch.rule { fill: #2e9e44; background: #2e9e44; }
rect.floor, span.swatch.floor { fill: #d9a400; background: #d9a400; }
rect.chain, span.swatch.chain { fill: #1e8fb3; background: #1e8fb3; }
rect.partial, span.swatch.partial { fill: #a04bb3; background: #a04bb3; }
rect.failed, span.swatch.failed { fill: #cc3333; background: #cc3333; }
rect.locked, span.swatch.locked { fill: #3355cc; background: #3355cc; }
li.kept { border-left: 6px solid #2e9e44; padding-left: 4px; margin-bottom: 1px; }
li.kept.floor { border-color: #d9a400; }
li.kept.chain { border-color: #1e8fb3; }
li.kept.partial { border-color: #a04bb3; }
li.kept.failed { border-color: #cc3333; }
g.backup:not(.on-day) { opacity: 0.45; }
#day-cursor { stroke: #000; stroke-width: 1; stroke-dasharray: 4 3; }
polyline.series { fill: none; stroke-width: 1.5; }
polyline.count, span.line.count { stroke: #2e9e44; background: #2e9e44; }
polyline.peak, span.line.peak { stroke: #9bd3a6; background: #9bd3a6; }
polyline.storage, span.line.storage { stroke: #1e8fb3; background: #1e8fb3; }
polyline.proposed, span.line.proposed { stroke: #cc3333; background: #cc3333; stroke-dasharray: 5 3; }
span.swatch, span.line { display: inline-block; width: 14px; height: 10px; margin: 0 4px 0 12px; }
span.line { height: 3px; vertical-align: middle; }
p.note, footer { color: #666; }
#day-list { columns: 2; font-size: 12px; }
"#;

const SCRIPT: &str = r#"
(function () {
  "use strict";
  var blocked = 0;
  document.addEventListener("securitypolicyviolation", function () {
    blocked += 1;
    report();
  });
  function report() {
    document.getElementById("resource-count").textContent =
      String(performance.getEntriesByType("resource").length);
    document.getElementById("csp-violations").textContent = String(blocked);
  }
  var data = JSON.parse(document.getElementById("sim-data").textContent);
  var slider = document.getElementById("day");
  var list = document.getElementById("day-list");
  var label = document.getElementById("day-label");
  var cursor = document.getElementById("day-cursor");
  var groups = document.querySelectorAll("g.backup");
  var groupById = {};
  for (var g = 0; g < groups.length; g++) {
    groupById[groups[g].getAttribute("data-id")] = groups[g];
  }
  function show(day) {
    var info = data.days[day];
    list.textContent = "";
    for (var id in groupById) {
      groupById[id].classList.remove("on-day");
    }
    var shown = 0;
    for (var i = data.backups.length - 1; i >= 0; i--) {
      var backup = data.backups[i];
      for (var s = 0; s < backup.spans.length; s++) {
        var span = backup.spans[s];
        if (span[0] <= day && day <= span[1]) {
          var item = document.createElement("li");
          item.className = "kept " + span[3];
          item.textContent = backup.id + " (" + backup.size + "): " + data.reasons[span[2]].join("; ");
          list.appendChild(item);
          groupById[backup.id].classList.add("on-day");
          shown += 1;
        }
      }
    }
    label.textContent = info.date + ": " + info.count + " restore points, " + shown +
      " backups exist, " + info.storage + ", oldest restore point " + (info.oldest || "-") +
      ", worst gap " + (info.gap || "-");
    var rowHeight = parseFloat(cursor.getAttribute("data-row-height"));
    var top = parseFloat(cursor.getAttribute("data-top"));
    var y = top + (day + 0.5) * rowHeight;
    cursor.setAttribute("y1", String(y));
    cursor.setAttribute("y2", String(y));
  }
  slider.addEventListener("input", function () {
    show(parseInt(slider.value, 10));
  });
  show(parseInt(slider.value, 10));
  report();
  document.body.setAttribute("data-ready", "yes");
})();
"#;
