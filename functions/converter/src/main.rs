//! eqdv's converter Lambda: SQS shard messages in (batch size 1 by default), one
//! conversion each, partial batch failures back. The logic lives in
//! `eqdv_functions::converter`; this is the runtime wiring.

use aws_lambda_events::sqs::SqsEvent;
use eqdv_functions::converter::{Converter, LAMBDA_SOURCE, deadline_from_epoch_ms};
use eqdv_functions::queue::{DeadLetters, Sqs};
use eqdv_functions::{FunctionConfig, FunctionError, logging};
use lambda_runtime::{LambdaEvent, service_fn};
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
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let span = tracing::info_span!("invocation", request_id = %event.context.request_id);
        let deadline = deadline_from_epoch_ms(event.context.deadline);
        let response = converter
            .handle_sqs(event.payload, Some(deadline))
            .instrument(span)
            .await;
        Ok::<_, lambda_runtime::Error>(response)
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
    })
}
