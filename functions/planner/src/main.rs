//! eqdv's planner Lambda: Glue table changes, scheduled sweeps and manual backfills in,
//! shards out to the SQS FIFO shard queue, a summary back. The logic lives in
//! `eqdv_functions::planner`; this is the runtime wiring.

use eqdv_functions::converter::{Converter, deadline_from_epoch_ms};
use eqdv_functions::planner::{KeptReads, Planner};
use eqdv_functions::queue::Sqs;
use eqdv_functions::split::{SplitStarter, StepFunctions};
use eqdv_functions::{FunctionConfig, FunctionError, logging};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use tracing::Instrument;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    logging::init_json();
    let planner = match init().await {
        Ok(p) => p,
        Err(e) => {
            // Fails the init phase: Lambda reports it and retries with a fresh instance.
            tracing::error!(error = %e, kind = e.kind(), "planner init failed");
            return Err(e.into());
        }
    };
    let planner = &planner;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let span = tracing::info_span!("invocation", request_id = %event.context.request_id);
        let deadline = Some(deadline_from_epoch_ms(event.context.deadline));
        planner
            .handle(&event.payload, deadline)
            .instrument(span)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, kind = e.kind(), "planner invocation failed");
                Diagnostic {
                    error_type: e.kind().to_string(),
                    error_message: e.to_string(),
                }
            })
    }))
    .await
}

/// Recorded as `eqdv.source` in the summaries of the snapshots the planner commits.
const PLANNER_SOURCE: &str = "eqdv-planner (AWS Lambda)";

async fn init() -> Result<Planner, FunctionError> {
    let config = FunctionConfig::from_env()?;
    let url = config
        .shard_queue_url
        .clone()
        .ok_or_else(|| FunctionError::Config {
            var: eqdv_functions::config::ENV_SHARD_QUEUE_URL.into(),
            message: "required: the URL of the SQS FIFO shard queue".into(),
        })?;
    let catalog = config.catalog.connect().await?;
    let queue = Sqs::connect(&url).await;
    let splits: Option<Box<dyn SplitStarter>> = match &config.split_state_machine_arn {
        Some(arn) => Some(Box::new(
            StepFunctions::connect(arn, config.max_ranges).await,
        )),
        None => None,
    };
    // A plan's only shard, when small enough, is converted here (see eqdv_functions::planner).
    let converter = match config.convert_in_planner_bytes {
        0 => None,
        _ => Some(Converter {
            catalog: config.catalog.connect().await?,
            config: config.clone(),
            // A failure is not dead-lettered here: the shard goes to the queue instead.
            dead_letters: None,
            source: PLANNER_SOURCE.into(),
            // The planner hands it the table it planned on, read through its own store.
            kept_reads: KeptReads::default(),
        }),
    };
    // A warm instance's next invocation reads the table's next snapshot, which lists
    // all but a few of the manifests this one read: they are kept across invocations.
    let kept_reads = match converter {
        Some(_) => KeptReads::new_store(),
        None => KeptReads::default(),
    };
    Ok(Planner {
        catalog,
        config,
        queue: Box::new(queue),
        splits,
        converter,
        kept_reads,
    })
}
