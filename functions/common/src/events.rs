//! The planner Lambda's input: the JSON it is invoked with, parsed into the engine's
//! planner triggers.
//!
//! The planner accepts, directly or wrapped in SQS records:
//! - EventBridge's `Glue Data Catalog Table State Change` (source `aws.glue`; best
//!   effort: events may be missing or reordered and carry no metadata location, so they
//!   only say which table to look at);
//! - Amazon S3 Tables' commits as CloudTrail records them (source `aws.s3tables`,
//!   `AWS API Call via CloudTrail`, eventName `UpdateTableMetadataLocation`): S3 Tables
//!   emits no table change event of its own, so a deployment on a table bucket gets its
//!   commits from CloudTrail through EventBridge, or from the sweep alone;
//! - a scheduled sweep (source `aws.events`, `Scheduled Event`), which catches missed ones;
//! - a manual backfill: `{"backfill": {"database": "db", "table": "t"}}`, a list of
//!   `"tables": ["db.t", ...]`, or a whole `"database"`, with optional `branch` and
//!   `dry_run`.
//!
//! Parsing never touches a table; bad input is an error that names the field at fault.

use eqdv::catalog::TableName;
use eqdv::planner::{BackfillScope, Trigger};
use eqdv::{Error, Result};
use serde_json::Value;

/// The detail-type of Glue's table change events.
pub const GLUE_TABLE_CHANGE: &str = "Glue Data Catalog Table State Change";
/// The detail-type of the API calls CloudTrail records, as EventBridge delivers them.
pub const CLOUDTRAIL_API_CALL: &str = "AWS API Call via CloudTrail";
/// The S3 Tables call that commits a table: its metadata pointer swapped.
pub const S3TABLES_COMMIT: &str = "UpdateTableMetadataLocation";

fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("{field}: {message}"))
}

/// The longest string field an event may hold: names of databases, tables and
/// branches are far shorter (Glue's are at most 255 characters). A longer one is refused
/// before it reaches a log line or an error.
const MAX_FIELD_LEN: usize = 1024;

/// A value an event holds where another was expected, as an error shows it: its kind,
/// and a string or number only when short, so that an error stays one short line.
fn found(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let shown = match value {
        Value::Bool(_) | Value::Number(_) | Value::String(_) => value.to_string(),
        _ => String::new(),
    };
    if shown.is_empty() || shown.len() > 64 || shown.contains('\n') {
        kind.to_string()
    } else {
        format!("{kind} {shown}")
    }
}

fn string_field<'a>(value: &'a Value, field: &str, path: &str) -> Result<Option<&'a str>> {
    match value.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() > MAX_FIELD_LEN => Err(invalid(
            &format!("{path}.{field}"),
            format!("{} bytes, longer than {MAX_FIELD_LEN}", s.len()),
        )),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
        Some(Value::String(_)) => Err(invalid(&format!("{path}.{field}"), "must not be empty")),
        Some(other) => Err(invalid(
            &format!("{path}.{field}"),
            format!("expected a string, found {}", found(other)),
        )),
    }
}

/// Parses a planner invocation's payload into triggers (an SQS batch gives several).
pub fn parse_planner_event(event: &Value) -> Result<Vec<Trigger>> {
    if let Some(records) = event.get("Records") {
        let Value::Array(records) = records else {
            return Err(invalid("Records", "expected an array of SQS records"));
        };
        let mut triggers = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let path = format!("Records[{i}].body");
            let body = string_field(record, "body", &format!("Records[{i}]"))?
                .ok_or_else(|| invalid(&path, "missing"))?;
            let inner: Value =
                serde_json::from_str(body).map_err(|e| invalid(&path, format!("not JSON: {e}")))?;
            triggers.push(parse_one(&inner, &path)?);
        }
        return Ok(triggers);
    }
    Ok(vec![parse_one(event, "event")?])
}

fn parse_one(event: &Value, path: &str) -> Result<Trigger> {
    if !event.is_object() {
        return Err(invalid(
            path,
            format!("expected a JSON object, found {}", found(event)),
        ));
    }
    if let Some(backfill) = event.get("backfill") {
        return parse_backfill(backfill, &format!("{path}.backfill"));
    }
    let source = string_field(event, "source", path)?;
    let detail_type = string_field(event, "detail-type", path)?;
    match (source, detail_type) {
        (Some("aws.glue"), Some(GLUE_TABLE_CHANGE)) => {
            let detail = event
                .get("detail")
                .ok_or_else(|| invalid(&format!("{path}.detail"), "missing"))?;
            let detail_path = format!("{path}.detail");
            let database = string_field(detail, "databaseName", &detail_path)?
                .ok_or_else(|| invalid(&format!("{detail_path}.databaseName"), "missing"))?;
            let table = string_field(detail, "tableName", &detail_path)?
                .ok_or_else(|| invalid(&format!("{detail_path}.tableName"), "missing"))?;
            Ok(Trigger::TableChanged {
                table: TableName::new(database, table),
                type_of_change: string_field(detail, "typeOfChange", &detail_path)?
                    .map(str::to_string),
            })
        }
        (Some("aws.s3tables"), Some(CLOUDTRAIL_API_CALL)) => parse_s3tables_commit(event, path),
        (Some("aws.events"), Some("Scheduled Event")) => Ok(Trigger::Sweep),
        (Some(source), detail_type) => Err(invalid(
            &format!("{path}.source"),
            format!(
                "unsupported event from {source:?} ({}): expected a Glue table change, an S3 Tables commit, a scheduled sweep or a backfill",
                detail_type.map_or("no detail-type".to_string(), |d| format!("{d:?}"))
            ),
        )),
        (None, _) => Err(invalid(
            path,
            "neither an EventBridge event (source, detail-type) nor a {\"backfill\": ...} request",
        )),
    }
}

/// An S3 Tables `UpdateTableMetadataLocation` that CloudTrail recorded: the table is in
/// its request parameters (the table bucket is the deployment's own: its EventBridge
/// rule matches that bucket's ARN).
fn parse_s3tables_commit(event: &Value, path: &str) -> Result<Trigger> {
    let detail_path = format!("{path}.detail");
    let detail = event
        .get("detail")
        .ok_or_else(|| invalid(&detail_path, "missing"))?;
    let event_name = string_field(detail, "eventName", &detail_path)?;
    if event_name != Some(S3TABLES_COMMIT) {
        return Err(invalid(
            &format!("{detail_path}.eventName"),
            format!(
                "{}: only {S3TABLES_COMMIT} commits an S3 Tables table",
                event_name.map_or("missing".to_string(), |n| format!("{n:?}"))
            ),
        ));
    }
    let params_path = format!("{detail_path}.requestParameters");
    let params = detail
        .get("requestParameters")
        .ok_or_else(|| invalid(&params_path, "missing"))?;
    // The namespace is one level: a string, or a list of one.
    let namespace = match params.get("namespace") {
        Some(Value::Array(levels)) if levels.len() == 1 => levels[0].as_str(),
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    }
    .filter(|ns| !ns.trim().is_empty())
    .ok_or_else(|| {
        invalid(
            &format!("{params_path}.namespace"),
            "expected a namespace name (or a list of one)",
        )
    })?;
    let name = string_field(params, "name", &params_path)?
        .ok_or_else(|| invalid(&format!("{params_path}.name"), "missing"))?;
    Ok(Trigger::TableChanged {
        table: TableName::new(namespace, name),
        type_of_change: Some(S3TABLES_COMMIT.to_string()),
    })
}

fn parse_backfill(value: &Value, path: &str) -> Result<Trigger> {
    if !value.is_object() {
        return Err(invalid(path, "expected an object"));
    }
    let branch = string_field(value, "branch", path)?.map(str::to_string);
    let dry_run = match value.get("dry_run") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(invalid(
                &format!("{path}.dry_run"),
                format!("expected true or false, found {}", found(other)),
            ));
        }
    };
    let database = string_field(value, "database", path)?;
    let table = string_field(value, "table", path)?;
    let scope = match (value.get("tables"), database, table) {
        (Some(Value::Array(list)), None, None) => {
            if list.is_empty() {
                return Err(invalid(&format!("{path}.tables"), "must not be empty"));
            }
            let mut tables = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                let field = format!("{path}.tables[{i}]");
                let name = match item {
                    Value::String(name) if name.len() <= MAX_FIELD_LEN => name,
                    _ => {
                        return Err(invalid(
                            &field,
                            format!("expected \"database.table\", found {}", found(item)),
                        ));
                    }
                };
                tables.push(TableName::parse(name).map_err(|e| invalid(&field, e))?);
            }
            BackfillScope::Tables(tables)
        }
        (Some(_), None, None) => {
            return Err(invalid(
                &format!("{path}.tables"),
                "expected an array of \"database.table\"",
            ));
        }
        (Some(_), _, _) => {
            return Err(invalid(
                path,
                "give either tables or database (and table), not both",
            ));
        }
        (None, Some(db), Some(t)) => BackfillScope::Tables(vec![TableName::new(db, t)]),
        (None, Some(db), None) => BackfillScope::Database(db.to_string()),
        (None, None, Some(_)) => {
            return Err(invalid(
                &format!("{path}.database"),
                "missing (a table needs its database)",
            ));
        }
        (None, None, None) => {
            return Err(invalid(
                path,
                "name a database, a database and table, or tables",
            ));
        }
    };
    Ok(Trigger::Backfill {
        scope,
        branch,
        dry_run,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn glue_event(db: &str, table: &str) -> Value {
        json!({
            "version": "0",
            "source": "aws.glue",
            "detail-type": GLUE_TABLE_CHANGE,
            "detail": {"databaseName": db, "tableName": table, "typeOfChange": "UpdateTable", "changedPartitions": []}
        })
    }

    #[test]
    fn glue_table_change_direct_and_in_sqs() {
        let direct = parse_planner_event(&glue_event("cdc", "orders")).unwrap();
        let expected = Trigger::TableChanged {
            table: TableName::new("cdc", "orders"),
            type_of_change: Some("UpdateTable".into()),
        };
        assert_eq!(direct, vec![expected.clone()]);
        let wrapped = json!({"Records": [
            {"eventSource": "aws:sqs", "body": glue_event("cdc", "orders").to_string()},
            {"eventSource": "aws:sqs", "body": json!({"source": "aws.events", "detail-type": "Scheduled Event"}).to_string()},
        ]});
        assert_eq!(
            parse_planner_event(&wrapped).unwrap(),
            vec![expected, Trigger::Sweep]
        );
    }

    /// What EventBridge delivers of a CloudTrail record of an S3 Tables commit.
    fn s3tables_commit(params: Value) -> Value {
        json!({
            "version": "0",
            "source": "aws.s3tables",
            "detail-type": CLOUDTRAIL_API_CALL,
            "detail": {
                "eventSource": "s3tables.amazonaws.com",
                "eventName": S3TABLES_COMMIT,
                "requestParameters": params,
            }
        })
    }

    #[test]
    fn s3tables_commits_recorded_by_cloudtrail_name_their_table() {
        let expected = vec![Trigger::TableChanged {
            table: TableName::new("cdc", "orders"),
            type_of_change: Some(S3TABLES_COMMIT.into()),
        }];
        let arn = "arn:aws:s3tables:us-east-1:123456789012:bucket/lake";
        for namespace in [json!("cdc"), json!(["cdc"])] {
            let event = s3tables_commit(json!({
                "tableBucketARN": arn, "namespace": namespace, "name": "orders",
                "versionToken": "t1", "metadataLocation": "s3://x--table-s3/metadata/2.metadata.json"
            }));
            assert_eq!(parse_planner_event(&event).unwrap(), expected);
        }
        let mut other_call = s3tables_commit(json!({"tableBucketARN": arn, "namespace": "cdc"}));
        other_call["detail"]["eventName"] = json!("CreateNamespace");
        for (event, field) in [
            (other_call, "event.detail.eventName"),
            (
                s3tables_commit(json!({"namespace": ["a", "b"], "name": "t"})),
                "event.detail.requestParameters.namespace",
            ),
            (
                s3tables_commit(json!({"namespace": "cdc"})),
                "event.detail.requestParameters.name",
            ),
        ] {
            let err = parse_planner_event(&event).unwrap_err().to_string();
            assert!(err.contains(field), "{event}: {err}");
        }
    }

    #[test]
    fn backfills() {
        let one = parse_planner_event(&json!({"backfill": {"database": "cdc", "table": "orders", "branch": "main", "dry_run": true}})).unwrap();
        assert_eq!(
            one,
            vec![Trigger::Backfill {
                scope: BackfillScope::Tables(vec![TableName::new("cdc", "orders")]),
                branch: Some("main".into()),
                dry_run: true,
            }]
        );
        let list = parse_planner_event(&json!({"backfill": {"tables": ["a.x", "b.y"]}})).unwrap();
        assert_eq!(
            list,
            vec![Trigger::Backfill {
                scope: BackfillScope::Tables(vec![
                    TableName::new("a", "x"),
                    TableName::new("b", "y")
                ]),
                branch: None,
                dry_run: false,
            }]
        );
        let db = parse_planner_event(&json!({"backfill": {"database": "cdc"}})).unwrap();
        assert!(
            matches!(&db[0], Trigger::Backfill { scope: BackfillScope::Database(d), .. } if d == "cdc")
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (
                json!({"backfill": {"table": "orders"}}),
                "event.backfill.database",
            ),
            (
                json!({"backfill": {"tables": ["orders"]}}),
                "event.backfill.tables[0]",
            ),
            (
                json!({"backfill": {"database": 7}}),
                "event.backfill.database",
            ),
            (
                json!({"backfill": {"database": "d", "dry_run": "yes"}}),
                "event.backfill.dry_run",
            ),
            (
                json!({"source": "aws.glue", "detail-type": GLUE_TABLE_CHANGE, "detail": {"tableName": "t"}}),
                "event.detail.databaseName",
            ),
            (
                json!({"source": "aws.s3", "detail-type": "Object Created"}),
                "event.source",
            ),
            (
                json!({"Records": [{"body": "{not json"}]}),
                "Records[0].body",
            ),
            (json!([1, 2]), "event"),
        ];
        for (event, field) in cases {
            let err = parse_planner_event(&event)
                .expect_err("must be rejected")
                .to_string();
            assert!(
                err.contains(field),
                "{event}: error {err:?} does not name {field}"
            );
        }
    }

    /// An oversized or malformed event fails in one short line (it goes to the
    /// planner's dead letters with it), never quoting what it holds at length.
    #[test]
    fn oversized_and_malformed_events_fail_in_one_short_line() {
        let big = "x".repeat(300_000);
        for event in [
            json!({"backfill": {"database": big}}),
            json!({"backfill": {"tables": [big]}}),
            json!({"backfill": {"database": {"nested": [big]}}}),
            json!({"backfill": {"database": "cdc", "dry_run": [big]}}),
            json!([big]),
            json!({"Records": [{"eventSource": "aws:sqs", "body": json!([big]).to_string()}]}),
            glue_event(&big, "t"),
        ] {
            let err = parse_planner_event(&event).unwrap_err().to_string();
            assert!(
                err.len() < 200 && !err.contains('\n'),
                "{}",
                &err[..err.len().min(300)]
            );
        }
    }
}
