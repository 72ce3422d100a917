//! A table upgraded from v2 may still hold v2 position delete files. A new DV must be
//! the union of the new positions, the file's existing DV and those position deletes,
//! and a position delete file goes only once every data file it references has a DV.

use eqdv_test_support as support;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use eqdv::convert::{ConvertOptions, Outcome, convert};
use eqdv::snapshot::{AddedFile, SnapshotChanges, build_snapshot};
use eqdv_workload::generate::{KeyType, PartitionKind, WorkloadSpec, expected_rows};
use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Operation};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use support::*;

fn field(name: &str, ty: DataType, id: i32) -> Field {
    Field::new(name, ty, false)
        .with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())].into())
}

/// Writes a v2 position delete file over `targets` (data path, positions) in `format`
/// (Parquet or Avro, as Java writes them) and commits it.
async fn add_position_deletes(
    w: &Warehouse,
    name: &str,
    targets: &[(String, Vec<i64>)],
    format: DataFileFormat,
) {
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let first = f
        .data_files
        .iter()
        .find(|d| d.path() == targets[0].0)
        .expect("target data file");
    let schema = Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, 2_147_483_546),
        field("pos", DataType::Int64, 2_147_483_545),
    ]));
    let mut paths = Vec::new();
    let mut positions = Vec::new();
    for (path, pos) in targets {
        for p in pos {
            paths.push(path.clone());
            positions.push(*p);
        }
    }
    let extension = if format == DataFileFormat::Avro {
        "avro"
    } else {
        "parquet"
    };
    let path = format!("{}/data/{name}.{extension}", t.location());
    let local = path.trim_start_matches("file://").to_string();
    if format == DataFileFormat::Avro {
        // Iceberg's Avro layout: each field carries its field id.
        let avro = apache_avro::Schema::parse_str(
            r#"{"type": "record", "name": "position_delete", "fields": [
                {"name": "file_path", "type": "string", "field-id": 2147483546},
                {"name": "pos", "type": "long", "field-id": 2147483545}]}"#,
        )
        .unwrap();
        let mut writer = apache_avro::Writer::new(&avro, Vec::new());
        for (path, pos) in paths.iter().zip(&positions) {
            let mut record = apache_avro::types::Record::new(&avro).unwrap();
            record.put("file_path", path.as_str());
            record.put("pos", *pos);
            writer.append(record).unwrap();
        }
        std::fs::write(&local, writer.into_inner().unwrap()).unwrap();
    } else {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(paths)),
                Arc::new(Int64Array::from(positions.clone())),
            ],
        )
        .unwrap();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&local).unwrap(), schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }
    let size = std::fs::metadata(&local).unwrap().len();
    let file = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path)
        .file_format(format)
        .partition(first.file.partition().clone())
        .partition_spec_id(first.spec_id)
        .record_count(positions.len() as u64)
        .file_size_in_bytes(size)
        .build()
        .unwrap();
    commit_delete_file(w, first.spec_id, file).await;
}

/// Commits `file` (a delete file of spec `spec_id`) on main, as a writer would.
async fn commit_delete_file(w: &Warehouse, spec_id: i32, file: iceberg::spec::DataFile) {
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let mut changes = SnapshotChanges::new(Operation::Delete);
    changes.added_delete_files.push(AddedFile { spec_id, file });
    let prepared = build_snapshot(&t, "main", &f, &changes).await.unwrap();
    eqdv::commit::publish(&w.catalog, &t, &prepared)
        .await
        .unwrap();
}

/// The positions the live equality deletes resolve to, per data file (nothing written).
async fn resolved_positions(
    w: &Warehouse,
) -> std::collections::BTreeMap<String, roaring::RoaringTreemap> {
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    eqdv::resolve::resolve(&t, &f, &groups, &Default::default())
        .await
        .unwrap()
        .positions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_merge_into_new_dvs() {
    position_deletes_merge(DataFileFormat::Parquet).await;
}

/// The same with the position delete file that goes written in Avro (Java's
/// `write.delete.format.default=avro`): read as a Parquet one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_position_deletes_merge_into_new_dvs() {
    position_deletes_merge(DataFileFormat::Avro).await;
}

/// Two v2 position delete files, the one that covers only a file the conversion gives a
/// DV written in `covered_format`: it goes, the other stays, and the DV holds both.
async fn position_deletes_merge(covered_format: DataFileFormat) {
    let w = warehouse();
    let spec = WorkloadSpec {
        seed: 50,
        rows: 1_200,
        commits: 3,
        keys: vec![KeyType::Long],
        partition: PartitionKind::None,
        changes_per_commit: 150,
        rows_per_file: 300,
        ..Default::default()
    };
    let report = generate_table(&w.catalog, &spec).await;

    // Which data files do the equality deletes hit? (resolve reads, never writes)
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let groups = eqdv::plan::group_equality_deletes(&t, &f).unwrap();
    let resolved = eqdv::resolve::resolve(&t, &f, &groups, &Default::default())
        .await
        .unwrap();
    let hit = resolved
        .positions
        .keys()
        .next()
        .expect("a data file with deletes")
        .clone();
    let missed = f
        .data_files
        .iter()
        .map(|d| d.path().to_string())
        .find(|p| !resolved.positions.contains_key(p))
        .expect("a data file without deletes");
    let extra: Vec<i64> = (0..300)
        .filter(|p| !resolved.positions[&hit].contains(*p as u64))
        .take(3)
        .collect();
    // One file covers only `hit` (must go), one also covers `missed` (must stay).
    add_position_deletes(
        &w,
        "v2-pos-covered",
        &[(hit.clone(), extra.clone())],
        covered_format,
    )
    .await;
    add_position_deletes(
        &w,
        "v2-pos-partial",
        &[(hit.clone(), vec![extra[0]]), (missed.clone(), vec![5])],
        DataFileFormat::Parquet,
    )
    .await;

    let t = load(&w.catalog).await;
    let rows_before = eqdv_workload::read::read_canonical(&t, "main")
        .await
        .unwrap();
    let model = expected_rows(&report.state).unwrap();
    assert_eq!(
        rows_before.len(),
        model.len() - extra.len() - 1,
        "position deletes not applied by the oracle"
    );

    let r = convert(&w.catalog, &table(), &ConvertOptions::default())
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Converted);
    assert_converted(&w.catalog, &rows_before).await;
    assert_eq!(r.position_delete_files_removed, 1);
    // Rows the v2 files had already deleted are merged in but not counted as new.
    let resolved_total: u64 = resolved.positions.values().map(|p| p.len()).sum();
    assert_eq!(r.positions_added, resolved_total);

    let f = files(&w.catalog).await;
    let t = load(&w.catalog).await;
    let live_pos: Vec<&str> = f.position_deletes.iter().map(|p| p.path()).collect();
    assert_eq!(live_pos.len(), 1);
    assert!(
        live_pos[0].ends_with("v2-pos-partial.parquet"),
        "{live_pos:?}"
    );
    let dv = f.dvs.get(&hit).expect("DV for the hit file");
    let positions = eqdv::puffin::read_dv(
        &t.file_io,
        dv.path(),
        dv.file.content_offset().unwrap(),
        dv.file.content_size_in_bytes().unwrap(),
    )
    .await
    .unwrap();
    for p in &extra {
        assert!(
            positions.contains(*p as u64),
            "DV lacks position {p} from the v2 delete file"
        );
    }
    assert!(
        !f.dvs.contains_key(&missed),
        "a DV was written for a file without new deletes"
    );
    assert_no_orphans(&w.catalog).await;
}

/// Registers `bytes` (not a Parquet file) as a v2 position delete file whose manifest
/// entry says it covers only `target`: by `referenced_data_file`, or by its `file_path`
/// bounds when `by_bounds`.
async fn add_unreadable_position_deletes(w: &Warehouse, name: &str, target: &str, by_bounds: bool) {
    let t = load(&w.catalog).await;
    let f = files(&w.catalog).await;
    let data = f
        .data_files
        .iter()
        .find(|d| d.path() == target)
        .expect("target data file");
    let path = format!("{}/data/{name}.parquet", t.location());
    let local = path.trim_start_matches("file://").to_string();
    std::fs::write(&local, b"this is not a parquet file").unwrap();
    let mut builder = DataFileBuilder::default();
    builder
        .content(DataContentType::PositionDeletes)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition(data.file.partition().clone())
        .partition_spec_id(data.spec_id)
        .record_count(1)
        .file_size_in_bytes(26);
    if by_bounds {
        let bound = iceberg::spec::Datum::string(target);
        builder
            .lower_bounds([(2_147_483_546, bound.clone())].into())
            .upper_bounds([(2_147_483_546, bound)].into());
    } else {
        builder.referenced_data_file(Some(target.to_string()));
    }
    commit_delete_file(w, data.spec_id, builder.build().unwrap()).await;
}

/// A conversion reads only the position delete files that may reference a file it
/// writes a DV for: a broken one that its manifest entry places elsewhere does not fail
/// it, and stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_of_other_files_are_not_read() {
    for by_bounds in [false, true] {
        let w = warehouse();
        let spec = WorkloadSpec {
            seed: 51,
            rows: 1_200,
            commits: 3,
            keys: vec![KeyType::Long],
            partition: PartitionKind::None,
            changes_per_commit: 150,
            rows_per_file: 300,
            ..Default::default()
        };
        generate_table(&w.catalog, &spec).await;
        let resolved = resolved_positions(&w).await;
        let missed = files(&w.catalog)
            .await
            .data_files
            .iter()
            .map(|d| d.path().to_string())
            .find(|p| !resolved.contains_key(p))
            .expect("a data file without deletes");
        add_unreadable_position_deletes(&w, "v2-pos-elsewhere", &missed, by_bounds).await;

        let r = convert(&w.catalog, &table(), &ConvertOptions::default())
            .await
            .unwrap_or_else(|e| panic!("by_bounds={by_bounds}: {e}"));
        assert_eq!(r.outcome, Outcome::Converted);
        assert_eq!(r.position_delete_files_removed, 0);
        let f = files(&w.catalog).await;
        assert!(f.equality_deletes.is_empty());
        let live_pos: Vec<&str> = f.position_deletes.iter().map(|p| p.path()).collect();
        assert!(
            live_pos.len() == 1 && live_pos[0].ends_with("v2-pos-elsewhere.parquet"),
            "{live_pos:?}"
        );

        // And one that may reference a target is read, so a broken one fails the
        // conversion, naming it, with the table unchanged.
        let w = warehouse();
        generate_table(&w.catalog, &spec).await;
        let hit = resolved_positions(&w).await.into_keys().next().unwrap();
        add_unreadable_position_deletes(&w, "v2-pos-broken", &hit, by_bounds).await;
        let pointer = load(&w.catalog).await.pointer;
        let err = convert(&w.catalog, &table(), &ConvertOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("v2-pos-broken.parquet"), "{err}");
        assert_eq!(load(&w.catalog).await.pointer, pointer);
        assert_no_orphans(&w.catalog).await;
    }
}
