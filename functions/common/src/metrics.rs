//! CloudWatch metrics in the Embedded Metric Format: one JSON line on stdout per
//! invocation, which CloudWatch Logs turns into metrics with no API call and no extra
//! latency (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
//!
//! Dimensions stay low-cardinality (the function, and the function with the database);
//! the table and shard ride along as properties, searchable in Logs Insights without
//! costing a metric each.

use serde_json::{Map, Value, json};

/// A metric's unit, as CloudWatch names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Count,
    Bytes,
    Milliseconds,
    Seconds,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
            Unit::Seconds => "Seconds",
        }
    }
}

/// The metrics of one invocation (or one shard), emitted together.
#[derive(Clone, Debug)]
pub struct MetricSet {
    namespace: String,
    function: String,
    database: Option<String>,
    values: Vec<(String, Unit, f64)>,
    properties: Map<String, Value>,
}

impl MetricSet {
    pub fn new(namespace: &str, function: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            function: function.to_string(),
            database: None,
            values: Vec::new(),
            properties: Map::new(),
        }
    }

    /// Adds the `Function, Database` dimension set.
    pub fn database(mut self, database: &str) -> Self {
        self.database = Some(database.to_string());
        self
    }

    /// A searchable property (not a dimension).
    pub fn property(&mut self, name: &str, value: impl Into<Value>) -> &mut Self {
        self.properties.insert(name.to_string(), value.into());
        self
    }

    pub fn put(&mut self, name: &str, unit: Unit, value: f64) -> &mut Self {
        self.values.push((name.to_string(), unit, value));
        self
    }

    pub fn count(&mut self, name: &str, value: u64) -> &mut Self {
        self.put(name, Unit::Count, value as f64)
    }

    /// The EMF document.
    pub fn to_json(&self, timestamp_ms: i64) -> Value {
        let mut dimensions = vec![json!(["Function"])];
        if self.database.is_some() {
            dimensions.push(json!(["Function", "Database"]));
        }
        let definitions: Vec<Value> = self
            .values
            .iter()
            .map(|(name, unit, _)| json!({"Name": name, "Unit": unit.name()}))
            .collect();
        let mut doc = self.properties.clone();
        doc.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": dimensions,
                    "Metrics": definitions,
                }],
            }),
        );
        doc.insert("Function".into(), json!(self.function));
        if let Some(db) = &self.database {
            doc.insert("Database".into(), json!(db));
        }
        for (name, _, value) in &self.values {
            doc.insert(name.clone(), json!(value));
        }
        Value::Object(doc)
    }

    /// Prints the document as one line on stdout, where Lambda's log agent finds it.
    pub fn emit(&self) {
        println!("{}", self.to_json(chrono::Utc::now().timestamp_millis()));
    }
}

/// What a warm instance's store of manifest lists and manifests held when some work
/// began, to count what the work found kept and what it fetched.
#[derive(Clone, Copy, Debug)]
pub struct KeptReadsAtStart {
    kept: usize,
    fetched: u64,
}

impl KeptReadsAtStart {
    pub fn of(store: &eqdv::table::KeptReads) -> Self {
        Self {
            kept: store.len(),
            fetched: store.fetched(),
        }
    }

    /// `ManifestFilesKept` (held at the start) and `ManifestFilesFetched` (read since),
    /// when the store is on.
    pub fn count_into(self, metrics: &mut MetricSet, store: &eqdv::table::KeptReads) {
        if store.is_on() {
            metrics
                .count("ManifestFilesKept", self.kept as u64)
                .count("ManifestFilesFetched", store.fetched() - self.fetched);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_follow_the_embedded_metric_format() {
        let mut m = MetricSet::new("eqdv", "converter").database("cdc");
        m.property("Table", "cdc.orders")
            .count("DVsWritten", 3)
            .put("Duration", Unit::Milliseconds, 12.5);
        let doc = m.to_json(1_700_000_000_000);
        let aws = &doc["_aws"];
        assert_eq!(aws["Timestamp"], 1_700_000_000_000i64);
        let directive = &aws["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "eqdv");
        assert_eq!(
            directive["Dimensions"],
            json!([["Function"], ["Function", "Database"]])
        );
        assert_eq!(
            directive["Metrics"],
            json!([{"Name": "DVsWritten", "Unit": "Count"}, {"Name": "Duration", "Unit": "Milliseconds"}])
        );
        // Every dimension and metric named in the directive is a top-level member.
        assert_eq!(doc["Function"], "converter");
        assert_eq!(doc["Database"], "cdc");
        assert_eq!(doc["DVsWritten"], 3.0);
        assert_eq!(doc["Duration"], 12.5);
        assert_eq!(doc["Table"], "cdc.orders");
    }
}
