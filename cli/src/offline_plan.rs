//! `sexton retention plan`: the retention engine offline over a catalog file, the plan written
//! out while it is rendered.
//!
//! Issue 17: over a million backups the command used to build the owned plan, then a
//! `serde_json::Value` of it, then a pretty string of that, before printing a byte: 1.87 GiB
//! and 4 s, where parsing the file and evaluating took 1.2 s. Now the file is parsed once into
//! the engine's structs (its text dropped before the engine runs), evaluated, and the plan is
//! serialised straight from the evaluation ([`sexton_retention::PlanJson`]) into a buffered
//! stdout: nothing is held per backup beyond the catalog and the evaluation.
//!
//! `-o json` stays pretty for plans of up to [`PRETTY_UP_TO`] backups (what people read) and is
//! compact beyond, unless `--pretty`; both are the same document. `-o table` prints the same
//! rows as before, in two passes over the evaluation (widths, then lines).

use std::io::Write as _;
use std::path::Path;

use chrono::Utc;
use sexton_retention::{Catalog, Evaluation, Policy, Reason, Verdict};

use crate::{
    failure::{parse_time, Failure},
    output::Output,
};

/// The largest plan (in backups) that `-o json` prints pretty without `--pretty`.
pub const PRETTY_UP_TO: usize = 10_000;

/// Output buffer: large enough that a million decisions cost few write calls.
const OUTPUT_BUFFER: usize = 1 << 16;

/// Where the catalog comes from: a catalog file, or a pgBackRest or barman listing
/// (`TOOL:FILE`) read into one ([`crate::catalog_from`]).
#[derive(Debug, Clone, Copy)]
pub enum CatalogSource<'a> {
    File(&'a Path),
    Tool(&'a str),
}

/// Where the policy comes from: a file, or a pgBackRest or barman setting to translate.
#[derive(Debug, Clone, Copy)]
pub enum PolicySource<'a> {
    File(&'a Path),
    Translated(&'a str),
}

/// `--delete ID [--with-dependents]`: plan as if a user had asked to delete a backup.
#[derive(Debug, Clone, Copy)]
pub struct AskedDelete<'a> {
    pub id: &'a str,
    pub with_dependents: bool,
}

/// Reads the catalog and policy files, evaluates at `now` (RFC 3339; default now) and writes
/// the plan to stdout; with `delete`, after recording that delete as the fleet would (or
/// refusing it, as the fleet would).
pub fn run(
    catalog_source: CatalogSource<'_>,
    policy_source: PolicySource<'_>,
    now: Option<&str>,
    output: Output,
    pretty: bool,
    delete: Option<AskedDelete<'_>>,
) -> Result<(), Failure> {
    let (catalog_path, tool) = match catalog_source {
        CatalogSource::File(path) => (path, None),
        CatalogSource::Tool(spec) => {
            let (tool, path) = spec.split_once(':').ok_or_else(|| {
                Failure::input(format!(
                    "--catalog-from {spec:?}: expected pgbackrest:FILE or barman:FILE"
                ))
            })?;
            (Path::new(path), Some(tool))
        }
    };
    let catalog_bytes = std::fs::read(catalog_path)
        .map_err(|err| Failure::input(format!("cannot read {}: {err}", catalog_path.display())))?;
    let policy_text = match policy_source {
        PolicySource::File(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|err| Failure::input(format!("cannot read {}: {err}", path.display())))?,
        ),
        PolicySource::Translated(_) => None,
    };
    let mut imported = None;
    let catalog: Catalog = match tool {
        None => serde_json::from_slice(&catalog_bytes).map_err(|err| {
            Failure::input(format!("invalid catalog {}: {err}", catalog_path.display()))
        })?,
        Some(tool) => {
            let text = std::str::from_utf8(&catalog_bytes).map_err(|_| {
                Failure::input(format!("{}: not UTF-8 text", catalog_path.display()))
            })?;
            let read = crate::catalog_from::read(tool, text)
                .map_err(|err| Failure::input(format!("{}: {err}", catalog_path.display())))?;
            for note in &read.notes {
                eprintln!("note: {note}");
            }
            let catalog = read.catalog.clone();
            imported = Some(read);
            catalog
        }
    };
    // The text is as large as the parsed catalog: let it go before the engine runs.
    drop(catalog_bytes);
    let policy = match policy_source {
        PolicySource::File(path) => {
            let policy =
                Policy::from_json(policy_text.as_deref().unwrap_or_default()).map_err(|err| {
                    Failure::input(format!("invalid policy {}: {err}", path.display()))
                })?;
            crate::simulate::warn_months(&path.display().to_string(), &policy);
            policy
        }
        PolicySource::Translated(setting) => {
            let translated = crate::policy_from::translate(setting).map_err(Failure::input)?;
            eprintln!("policy: {}", translated.json);
            for note in &translated.notes {
                eprintln!("note: {note}");
            }
            translated.policy
        }
    };
    // After the files, as before: a bad catalog or policy is reported first.
    let now = match now {
        Some(text) => parse_time("now", text)?,
        None => Utc::now(),
    };
    let mut catalog = catalog;
    if let Some(asked) = delete {
        let marked = ask_delete(&mut catalog, &policy, asked, now)?;
        eprintln!("asked to delete: {}", marked.join(", "));
    }
    let evaluation = sexton_retention::evaluate(&catalog, &policy, now)
        .map_err(|err| Failure::input(err.to_string()))?;
    // Where the tool's own retention and this plan part ways, on stderr before the plan.
    if let Some(imported) = &imported {
        let differences = crate::catalog_from::differences(imported, &evaluation.to_plan());
        if differences.is_empty() {
            eprintln!(
                "compared with {}: the same backups kept and deleted",
                imported.tool
            );
        } else {
            eprintln!(
                "compared with {}: {} backup(s) differ",
                imported.tool,
                differences.len()
            );
            for line in &differences {
                eprintln!("  {line}");
            }
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(OUTPUT_BUFFER, stdout.lock());
    let written = match output {
        Output::Json => write_json(&mut out, &evaluation, pretty),
        // YAML and names go through the CLI's common printer, from the owned plan.
        Output::Yaml | Output::Name => {
            drop(out);
            let value = serde_json::to_value(evaluation.to_plan())
                .map_err(|err| Failure::runtime(err.into()))?;
            crate::output::generic(output, &value, &[]);
            return Ok(());
        }
        // Refused before: only simulations write pages.
        Output::Table | Output::Wide | Output::Html => write_table(&mut out, &evaluation),
    };
    match written.and_then(|()| out.flush()) {
        // A closed pipe (`| head`) ends the command quietly, as every other printer does.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => result
            .map_err(|err| Failure::runtime(anyhow::Error::new(err).context("writing the plan"))),
    }
}

/// Records a user's delete in `catalog` as the fleet's `backup.delete` would, with the same
/// judgements (`sexton_retention::judge`): the ids marked, or the refusal as bad input.
fn ask_delete(
    catalog: &mut Catalog,
    policy: &Policy,
    asked: AskedDelete<'_>,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<String>, Failure> {
    use sexton_retention::judge;
    let Some(target) = catalog.backups.iter().find(|b| b.id == asked.id).cloned() else {
        return Err(Failure::input(format!(
            "--delete {}: no such backup in the catalog",
            asked.id
        )));
    };
    let ids = if asked.with_dependents {
        judge::judge_delete_with_dependents(&catalog.backups, &target, "the catalog", now)
            .map_err(|why| Failure::input(format!("--delete {}: refused: {why}", asked.id)))?
            .ids
    } else {
        match judge::judge_user_delete(&catalog.backups, &target, "the catalog", false, now) {
            judge::UserDelete::Refused(why) => {
                return Err(Failure::input(format!(
                    "--delete {}: refused: {why}",
                    asked.id
                )))
            }
            _ => vec![target.id.clone()],
        }
    };
    let going: Vec<&str> = ids.iter().map(String::as_str).collect();
    if let Some(why) = judge::below_minimum_redundancy(
        &catalog.backups,
        &going,
        policy.minimum_redundancy,
        "the catalog",
    ) {
        return Err(Failure::input(format!(
            "--delete {}: refused: {why}",
            asked.id
        )));
    }
    for backup in &mut catalog.backups {
        if ids.contains(&backup.id) {
            backup.delete_requested = true;
        }
    }
    Ok(ids)
}

/// The plan as JSON: pretty when asked or small, compact otherwise; one line feed after it.
pub fn write_json(
    out: &mut impl std::io::Write,
    evaluation: &Evaluation<'_>,
    pretty: bool,
) -> std::io::Result<()> {
    let plan = evaluation.plan_json();
    if pretty || evaluation.len() <= PRETTY_UP_TO {
        serde_json::to_writer_pretty(&mut *out, &plan)?;
    } else {
        serde_json::to_writer(&mut *out, &plan)?;
    }
    out.write_all(b"\n")
}

/// The plan as a table: DECISION, ID, REASONS; a row per volume under backups with volumes;
/// then the binlog horizon and segment counts.
pub fn write_table(
    out: &mut impl std::io::Write,
    evaluation: &Evaluation<'_>,
) -> std::io::Result<()> {
    let header = ["DECISION", "ID", "REASONS"];
    let mut widths = header.map(str::len);
    for_each_row(evaluation, |row| {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
        Ok(())
    })?;
    write_line(out, &widths, &header)?;
    for_each_row(evaluation, |row| write_line(out, &widths, row))?;
    let summary = evaluation.summary();
    writeln!(out)?;
    let horizon = serde_json::to_value(summary.horizon).unwrap_or_default();
    match horizon.as_str() {
        Some(text) => writeln!(out, "binlog horizon: {text}")?,
        None => writeln!(out, "binlog horizon: -")?,
    }
    writeln!(out, "binlog segments to keep: {}", summary.n_binlog_keep)?;
    writeln!(
        out,
        "binlog segments to delete: {}",
        summary.n_binlog_delete
    )?;
    // Kept backups restorable to their own end only (issue 30), with the segments kept for
    // them that would go otherwise.
    for range in evaluation.binlog_owned().range_only {
        writeln!(
            out,
            "own range only: {} ({}; {} segment(s) kept for it)",
            range.backup,
            range.reason,
            range.segments.len()
        )?;
    }
    Ok(())
}

/// Calls `row` with the cells of every row, kept, then partial, then deleted, newest first.
fn for_each_row(
    evaluation: &Evaluation<'_>,
    mut row: impl FnMut(&[&str; 3]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut reasons = Vec::new();
    let mut joined = String::new();
    for (word, verdict) in [
        ("keep", Verdict::Keep),
        ("partial", Verdict::Partial),
        ("delete", Verdict::Delete),
    ] {
        for index in evaluation.newest_first() {
            if evaluation.verdict_at(index) != verdict {
                continue;
            }
            reasons.clear();
            evaluation.reasons_into(index, &mut reasons);
            join_into(&mut joined, &reasons);
            let backup = evaluation.backup_at(index);
            row(&[word, backup.id.as_str(), joined.as_str()])?;
            if backup.volumes.is_empty() {
                continue;
            }
            let (volumes_keep, volumes_delete) = evaluation.volume_decisions_at(index);
            for (label, volumes) in [
                ("  keep volume", volumes_keep),
                ("  delete volume", volumes_delete),
            ] {
                for volume in volumes {
                    join_into(&mut joined, &volume.reasons);
                    row(&[label, volume.name.as_str(), joined.as_str()])?;
                }
            }
        }
    }
    Ok(())
}

/// The texts of `reasons`, separated by `; `, written over `joined`.
fn join_into(joined: &mut String, reasons: &[Reason]) {
    use std::fmt::Write as _;
    joined.clear();
    for (n, reason) in reasons.iter().enumerate() {
        if n > 0 {
            joined.push_str("; ");
        }
        write!(joined, "{reason}").expect("writing to a String cannot fail");
    }
}

/// One table line: cells padded to their column's width, separated by two spaces, no trailing
/// blanks (as every other table of the CLI).
fn write_line(
    out: &mut impl std::io::Write,
    widths: &[usize; 3],
    cells: &[&str; 3],
) -> std::io::Result<()> {
    let mut line = String::new();
    for (n, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if n > 0 {
            line.push_str("  ");
        }
        line.push_str(cell);
        if n + 1 < cells.len() {
            let padding = width.saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', padding));
        }
    }
    writeln!(out, "{}", line.trim_end())
}
