//! Tests of reads by position: the rows at the positions asked for and no other, only
//! their pages fetched when the offset index is loaded.

use std::collections::HashMap;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use futures::TryStreamExt;
use iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Type};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::file::properties::WriterProperties;
use roaring::RoaringTreemap;

use super::*;

const ROWS: u64 = 100_000;
const GROUP_ROWS: usize = 40_000;
const PAGE_ROWS: usize = 1_000;

/// Value of row `p`: not its position, so that a row read at the wrong place shows.
fn value_at(p: u64) -> i64 {
    (p as i64) * 7 + 3
}

/// A file of [`ROWS`] rows of one long column (field id 1) in row groups of
/// [`GROUP_ROWS`] and pages of [`PAGE_ROWS`], with an offset index.
fn write_file(path: &std::path::Path) {
    let field = Field::new("id", DataType::Int64, false).with_metadata(HashMap::from([(
        PARQUET_FIELD_ID_META_KEY.to_string(),
        "1".to_string(),
    )]));
    let schema = Arc::new(ArrowSchema::new(vec![field]));
    let values = Int64Array::from_iter_values((0..ROWS).map(value_at));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_write_batch_size(PAGE_ROWS)
        .set_dictionary_enabled(false)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn id_field() -> NestedFieldRef {
    Arc::new(NestedField::required(
        1,
        "id",
        Type::Primitive(PrimitiveType::Long),
    ))
}

async fn open(path: &std::path::Path, by_position: bool) -> ParquetFile {
    let size = std::fs::metadata(path).unwrap().len();
    ParquetFile::open_learning(
        &FileIO::new_with_fs(),
        path.to_str().unwrap(),
        size,
        None,
        &FooterHint::default(),
        by_position,
    )
    .await
    .unwrap()
}

/// (position, value) of every row a read at `positions` returns.
async fn read_at(file: ParquetFile, positions: &RoaringTreemap) -> Result<Vec<(u64, i64)>> {
    let fields = [id_field()];
    let target = target_schema(&fields)?;
    let batches: Vec<(Vec<u64>, RecordBatch)> = file
        .read_positions_as(&fields, target, positions, 300)?
        .try_collect()
        .await?;
    Ok(batches
        .iter()
        .flat_map(|(at, batch)| {
            let values = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("a long column")
                .values()
                .to_vec();
            at.iter().copied().zip(values).collect::<Vec<_>>()
        })
        .collect())
}

fn positions() -> RoaringTreemap {
    // The first and last rows, both sides of each row-group boundary, a run of
    // neighbours, and rows inside pages.
    let at = [
        0, 1, 999, 39_999, 40_000, 40_001, 55_555, 79_999, 80_000, 99_999,
    ];
    let mut rows: RoaringTreemap = at.into_iter().collect();
    rows.insert_range(60_000..60_050);
    rows
}

#[tokio::test]
async fn a_read_by_position_returns_those_rows_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.parquet");
    write_file(&path);
    let wanted: Vec<(u64, i64)> = positions().iter().map(|p| (p, value_at(p))).collect();
    for by_position in [true, false] {
        let file = open(&path, by_position).await;
        assert_eq!(file.has_offset_index(), by_position);
        assert_eq!(read_at(file, &positions()).await.unwrap(), wanted);
    }
    // One row group only: the others are not read at all.
    let one: RoaringTreemap = [41_234u64].into_iter().collect();
    let file = open(&path, true).await;
    assert_eq!(
        read_at(file, &one).await.unwrap(),
        vec![(41_234, value_at(41_234))]
    );
    let file = open(&path, true).await;
    assert!(
        read_at(file, &RoaringTreemap::new())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_read_by_position_fetches_only_the_pages_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.parquet");
    write_file(&path);
    let leaf = [0usize];
    let groups = [0usize, 1, 2];
    let one_per_group: RoaringTreemap = [5u64, 45_000, 85_000].into_iter().collect();

    let file = open(&path, true).await;
    assert!(file.offset_index_read().requests <= 1);
    let whole = file.projected_bytes(&leaf, &groups);
    let pages = file.positioned_bytes(&leaf, &groups, &one_per_group);
    // Three pages of about a hundred: a few percent of the chunks.
    assert!(pages > 0 && pages * 20 < whole, "{pages} of {whole} bytes");
    assert_eq!(
        file.positioned_bytes(&leaf, &groups, &positions()),
        {
            let pages_hit = positions()
                .iter()
                .map(|p| p / PAGE_ROWS as u64)
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64;
            pages_hit * (whole / (ROWS / PAGE_ROWS as u64))
        },
        "every page is the same size: the bytes are the pages hit"
    );

    // Without the offset index a group holding a row is read whole.
    let file = open(&path, false).await;
    let chunk = file.projected_bytes(&leaf, &[1]);
    assert_eq!(file.positioned_bytes(&leaf, &groups, &one_per_group), whole);
    let only_second: RoaringTreemap = [45_000u64].into_iter().collect();
    assert_eq!(file.positioned_bytes(&leaf, &groups, &only_second), chunk);
}

#[tokio::test]
async fn a_position_past_the_last_row_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.parquet");
    write_file(&path);
    let past: RoaringTreemap = [3u64, ROWS].into_iter().collect();
    let file = open(&path, true).await;
    let message = read_at(file, &past).await.unwrap_err().to_string();
    assert!(message.contains("d.parquet"), "{message}");
    assert!(message.contains("past the file's 100000 rows"), "{message}");
}
