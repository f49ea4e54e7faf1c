//! `sexton version`: this client's version, then every service instance's, as each answers
//! on `sexton.v1.api.version.get` (no queue group: every replica answers). Like `kubectl
//! version`, the client's line prints even when the fleet cannot be reached.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{json, Value};
use sexton_shared::{api::Reply, build::VersionInfo, config::Config};

use crate::{
    failure::Failure,
    output::{self, Column, Kind, Output},
};

/// How long answers are collected: every instance answers at once, so a second is ample.
const COLLECT_FOR: Duration = Duration::from_secs(1);

const COLUMNS: &[Column] = &[
    Column {
        header: "COMPONENT",
        path: "service",
        kind: Kind::Text,
        wide: false,
    },
    Column {
        header: "VERSION",
        path: "version",
        kind: Kind::Text,
        wide: false,
    },
    Column {
        header: "INSTANCE",
        path: "instance",
        kind: Kind::Text,
        wide: false,
    },
];

pub async fn run(config: &Config, format: Output) -> Result<(), Failure> {
    let client_row = json!({
        "service": "client",
        "version": sexton_shared::build::VERSION,
        "instance": "-",
    });
    let services = match gather(config).await {
        Ok(services) => services,
        Err(failure) => {
            print(format, &client_row, &[]);
            return Err(failure);
        }
    };
    if services.is_empty() {
        eprintln!(
            "warning: no service answered on {}",
            sexton_shared::build::version_subject()
        );
    }
    print(format, &client_row, &services);
    Ok(())
}

fn print(format: Output, client_row: &Value, services: &[VersionInfo]) {
    let services: Vec<Value> = services
        .iter()
        .map(|info| serde_json::to_value(info).expect("version info serialises"))
        .collect();
    let answer = json!({
        "client": {"version": client_row["version"]},
        "services": services,
    });
    let mut rows = vec![client_row];
    rows.extend(services.iter());
    output::list(format, &answer, &rows, COLUMNS, |row| {
        format!(
            "{}/{}",
            output::text(row.get("service")),
            output::text(row.get("version"))
        )
    });
}

/// Every answer that arrives within [`COLLECT_FOR`], sorted by service and instance.
async fn gather(config: &Config) -> Result<Vec<VersionInfo>, Failure> {
    // The same connection, and the same words when it fails, as every other verb (issue 50: a
    // raw, doubled error).
    let client = crate::client::Client::connect(config).await?.nats().clone();
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(inbox.clone())
        .await
        .map_err(|err| Failure::runtime(err.into()))?;
    client
        .publish_with_reply(
            sexton_shared::build::version_subject(),
            inbox,
            br#"{"schema_version":1}"#.to_vec().into(),
        )
        .await
        .map_err(|err| Failure::runtime(err.into()))?;
    client
        .flush()
        .await
        .map_err(|err| Failure::runtime(err.into()))?;
    let mut found = Vec::new();
    let deadline = tokio::time::sleep(COLLECT_FOR);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => break,
            answer = answers.next() => match answer {
                Some(message) => {
                    let info = serde_json::from_slice::<Reply>(&message.payload)
                        .ok()
                        .and_then(|reply| reply.into_result().ok())
                        .and_then(|value| serde_json::from_value::<VersionInfo>(value).ok());
                    if let Some(info) = info {
                        found.push(info);
                    }
                }
                None => break,
            },
        }
    }
    found.sort_by(|a, b| (&a.service, &a.instance).cmp(&(&b.service, &b.instance)));
    Ok(found)
}
