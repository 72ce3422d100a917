//! Logs: JSON lines through tracing (one object per event, the span fields flattened
//! in), filtered by RUST_LOG (default `info`). CloudWatch Logs Insights queries them by
//! field: table, shard, base_snapshot_id, new_snapshot_id, request_id.

use tracing_subscriber::EnvFilter;

/// Log targets that print credentials below info: reqsign (opendal's S3 request signer,
/// `reqsign-core`, `reqsign-aws-v4`) logs each credential provider it tries, the secret
/// key included, at debug. A target filter matches every target it prefixes.
const CREDENTIAL_LOGGERS: &[&str] = &["reqsign"];

/// `filter` with the targets that print credentials held at info, whatever it asks for
/// them (RUST_LOG=debug included).
pub fn without_credentials(filter: EnvFilter) -> EnvFilter {
    CREDENTIAL_LOGGERS.iter().fold(filter, |filter, target| {
        match format!("{target}=info").parse() {
            Ok(directive) => filter.add_directive(directive),
            Err(_) => filter,
        }
    })
}

/// Installs the JSON subscriber on stdout; a second call does nothing.
pub fn init_json() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(without_credentials(filter))
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}

/// The process's peak resident set size in bytes (Linux `VmHWM`), when known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use eqdv_test_support::captured::Captured;

    use super::*;

    /// At debug, the signer's events are left out and the rest kept; at info, both
    /// targets' events are kept.
    #[test]
    fn credential_loggers_are_held_at_info_under_a_debug_filter() {
        let written = Captured::default();
        let writer = written.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(without_credentials(EnvFilter::new("debug")))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "reqsign_core::api", "provider secret=s3cr3t");
            tracing::info!(target: "reqsign_aws_v4", "signer ready");
            tracing::debug!(target: "eqdv::resolve", "resolving");
        });
        let text = written.text();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(
            text.contains("signer ready") && text.contains("resolving"),
            "{text}"
        );
    }
}
