//! eqdv's converter Lambda: SQS shard messages in (batch size 1 by default), one
//! conversion each, partial batch failures back; or, invoked by the split state machine,
//! one task of a split (a data range, the fan-in, the cleanup), its output or a named
//! error back. The logic lives in `eqdv_functions::converter` and `::split`; this is the
//! runtime wiring.

use aws_lambda_events::sqs::SqsEvent;
use eqdv_functions::converter::{Converter, LAMBDA_SOURCE, deadline_from_epoch_ms};
use eqdv_functions::planner::KeptReads;
use eqdv_functions::queue::{DeadLetters, Sqs};
use eqdv_functions::split::{TaskError, parse_task};
use eqdv_functions::{FunctionConfig, FunctionError, logging};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::Value;
use tracing::Instrument;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    logging::init_json();
    let converter = match init().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, kind = e.kind(), "converter init failed");
            return Err(e.into());
        }
    };
    let converter = &converter;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let span = tracing::info_span!("invocation", request_id = %event.context.request_id);
        let deadline = Some(deadline_from_epoch_ms(event.context.deadline));
        let payload = event.payload;
        if payload.get("Records").is_some() {
            let sqs: SqsEvent = serde_json::from_value(payload).map_err(|e| Diagnostic {
                error_type: "BadMessage".into(),
                error_message: format!("not an SQS event: {e}"),
            })?;
            let response = converter.handle_sqs(sqs, deadline).instrument(span).await;
            return serde_json::to_value(response).map_err(|e| Diagnostic {
                error_type: "EngineError".into(),
                error_message: e.to_string(),
            });
        }
        // A split's task: its error name is what the state machine's Retry and Catch match.
        let to_diagnostic = |e: TaskError| Diagnostic {
            error_type: e.error.to_string(),
            error_message: e.cause,
        };
        let task = parse_task(&payload).map_err(to_diagnostic)?;
        let output = converter
            .handle_split_task(&task, deadline)
            .instrument(span)
            .await
            .map_err(to_diagnostic)?;
        serde_json::to_value(output).map_err(|e| Diagnostic {
            error_type: "EngineError".into(),
            error_message: e.to_string(),
        })
    }))
    .await
}

async fn init() -> Result<Converter, FunctionError> {
    let config = FunctionConfig::from_env()?;
    let catalog = config.catalog.connect().await?;
    let dead_letters: Option<Box<dyn DeadLetters>> = match &config.dead_letter_queue_url {
        Some(url) => Some(Box::new(Sqs::connect(url).await)),
        None => None,
    };
    Ok(Converter {
        catalog,
        config,
        dead_letters,
        source: LAMBDA_SOURCE.into(),
        // A warm instance's next shard of a table lists all but a few of the manifests
        // its last one did: they are kept across invocations.
        kept_reads: KeptReads::new_store(),
    })
}
