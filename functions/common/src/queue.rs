//! Where the planner's shards go and where poison shards end: an SQS FIFO queue and its
//! DLQ in AWS, or a list in memory when `eqdv backfill` runs everything in-process.
//!
//! A shard message's body is the shard's JSON; its MessageGroupId is the table and
//! partitions (shards of one partition are converted in order, one at a time) and its
//! MessageDeduplicationId the hash of its delete files (a re-plan of the same work
//! within SQS's 5-minute window is dropped).

use std::sync::Mutex;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;
use eqdv::plan::Shard;

use crate::{FunctionError, Result};

/// The largest SQS message body.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// The SQS FIFO message group of a shard: one table's partitions are never converted
/// twice at once. FIFO group ids are at most 128 characters; longer ones are hashed.
pub fn message_group_id(shard: &Shard) -> String {
    // Another branch is another line of snapshots: its shards queue apart from main's.
    let table = if shard.branch == "main" {
        shard.table.to_string()
    } else {
        format!("{}@{}", shard.table, shard.branch)
    };
    // The group is the partition's queue group (stable across plans); a shard from an
    // older planner has none and falls back to its partitions.
    let raw = if shard.queue_group.is_empty() {
        format!("{table}/{}", shard.partitions.join(","))
    } else {
        format!("{table}/{}", shard.queue_group)
    };
    let printable = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .collect()
    };
    let clean = printable(&raw);
    if clean.len() <= 128 {
        return clean;
    }
    let mut hash: u64 = 0xcbf29ce484222325;
    for b in raw.as_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    // Printable ASCII, so 100 characters are 100 bytes (found by fuzzing: a table name
    // of other characters made a longer id, which SQS refuses).
    let table: String = printable(&table).chars().take(100).collect();
    format!("{table}/{hash:016x}")
}

/// The SQS FIFO deduplication id of a shard: the same delete files, the same message.
pub fn deduplication_id(shard: &Shard) -> String {
    shard.id.clone()
}

/// Receives the planner's shards.
#[async_trait]
pub trait ShardQueue: Send + Sync {
    /// Sends one shard; returns the message id.
    async fn send(&self, shard: &Shard) -> Result<String>;
}

#[async_trait]
impl<Q: ShardQueue + ?Sized> ShardQueue for std::sync::Arc<Q> {
    async fn send(&self, shard: &Shard) -> Result<String> {
        (**self).send(shard).await
    }
}

/// Receives shards that cannot be converted, with the reason.
#[async_trait]
pub trait DeadLetters: Send + Sync {
    async fn send(&self, letter: &DeadLetter) -> Result<()>;
}

/// A shard message given up on.
#[derive(Clone, Debug)]
pub struct DeadLetter {
    /// The original body, unchanged, so it can be sent back to the shard queue.
    pub body: String,
    pub message_id: String,
    pub group_id: Option<String>,
    pub error_kind: String,
    pub error: String,
    pub receive_count: u32,
}

/// The SQS queues of a deployment.
#[derive(Clone, Debug)]
pub struct Sqs {
    client: Client,
    url: String,
}

impl Sqs {
    /// A client from the standard AWS configuration (AWS_ENDPOINT_URL_SQS is honoured).
    pub async fn connect(url: &str) -> Self {
        let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self {
            client: Client::new(&shared),
            url: url.to_string(),
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> FunctionError {
        FunctionError::Queue {
            queue: self.url.clone(),
            message: message.to_string(),
        }
    }
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| FunctionError::Queue {
            queue: String::new(),
            message: format!("building a message attribute: {e}"),
        })
}

#[async_trait]
impl ShardQueue for Sqs {
    async fn send(&self, shard: &Shard) -> Result<String> {
        let body = serde_json::to_string(shard).map_err(eqdv::Error::from)?;
        if body.len() > MAX_MESSAGE_BYTES {
            return Err(self.error(format!(
                "shard {} of {} is {} bytes, over SQS's {MAX_MESSAGE_BYTES} (the plan splits shards to fit; this is a bug)",
                shard.id,
                shard.table,
                body.len()
            )));
        }
        let sent = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .message_group_id(message_group_id(shard))
            .message_deduplication_id(deduplication_id(shard))
            .message_attributes("table", string_attribute(&shard.table.to_string())?)
            .message_attributes("shard", string_attribute(&shard.id)?)
            .send()
            .await
            .map_err(|e| {
                self.error(format!(
                    "sending shard {}: {}",
                    shard.id,
                    aws_sdk_sqs::error::DisplayErrorContext(&e)
                ))
            })?;
        Ok(sent.message_id().unwrap_or_default().to_string())
    }
}

#[async_trait]
impl DeadLetters for Sqs {
    async fn send(&self, letter: &DeadLetter) -> Result<()> {
        // SQS limits attribute values to the message size; errors are short, but cap them.
        let error: String = letter.error.chars().take(4096).collect();
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(&letter.body)
            .message_attributes("eqdv-error", string_attribute(&error)?)
            .message_attributes("eqdv-error-kind", string_attribute(&letter.error_kind)?)
            .message_attributes(
                "eqdv-source-message-id",
                string_attribute(&letter.message_id)?,
            )
            .message_attributes(
                "eqdv-receive-count",
                MessageAttributeValue::builder()
                    .data_type("Number")
                    .string_value(letter.receive_count.to_string())
                    .build()
                    .map_err(|e| self.error(e))?,
            );
        if self.url.ends_with(".fifo") {
            request = request
                .message_group_id(letter.group_id.clone().unwrap_or_else(|| "eqdv-dlq".into()))
                // One dead letter per received message.
                .message_deduplication_id(&letter.message_id);
        }
        request.send().await.map_err(|e| {
            self.error(format!(
                "sending message {} to the dead-letter queue: {}",
                letter.message_id,
                aws_sdk_sqs::error::DisplayErrorContext(&e)
            ))
        })?;
        Ok(())
    }
}

/// Keeps shards in memory (`eqdv backfill`, tests).
#[derive(Debug, Default)]
pub struct InProcessQueue {
    shards: Mutex<Vec<Shard>>,
}

impl InProcessQueue {
    /// Takes the shards sent so far.
    pub fn drain(&self) -> Vec<Shard> {
        match self.shards.lock() {
            Ok(mut shards) => std::mem::take(&mut *shards),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

#[async_trait]
impl ShardQueue for InProcessQueue {
    async fn send(&self, shard: &Shard) -> Result<String> {
        let mut shards = match self.shards.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        shards.push(shard.clone());
        Ok(format!("in-process-{}", shards.len()))
    }
}

#[cfg(test)]
mod tests {
    use eqdv::catalog::TableName;

    use super::*;

    #[test]
    fn fifo_ids() {
        let shard = Shard {
            id: "00ff".into(),
            table: TableName::new("cdc", "orders"),
            branch: "main".into(),
            base_snapshot_id: 1,
            partitions: vec!["0:region=\"eu\"".into()],
            queue_group: String::new(),
            groups: Vec::new(),
            estimated_bytes: 0,
            staging_branch: None,
        };
        // A shard from an older planner (no queue group) groups by its partitions.
        assert_eq!(message_group_id(&shard), "cdc.orders/0:region=\"eu\"");
        assert_eq!(deduplication_id(&shard), "00ff");
        let grouped = Shard {
            queue_group: "g07".into(),
            ..shard.clone()
        };
        assert_eq!(message_group_id(&grouped), "cdc.orders/g07");
        let long = Shard {
            partitions: (0..100).map(|i| format!("0:k0_bucket={i}")).collect(),
            ..shard
        };
        let id = message_group_id(&long);
        assert!(id.len() <= 128 && id.starts_with("cdc.orders/"), "{id}");
        // A long group of a table named in other characters (found by fuzzing): still
        // at most 128 printable ASCII characters, as SQS requires.
        let wide = Shard {
            table: TableName::new("données", "漢字".repeat(60)),
            ..long
        };
        let id = message_group_id(&wide);
        assert!(
            id.len() <= 128 && id.chars().all(|c| c.is_ascii_graphic()),
            "{id}"
        );
    }
}
