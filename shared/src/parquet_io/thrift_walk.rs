//! A walk over a Parquet footer's and page indexes' Thrift (compact protocol) before
//! parquet decodes them.
//!
//! parquet 58 sizes every Thrift list by the count it declares before reading any
//! element, and reads each field it knows as the type it expects, whatever type the
//! bytes declare: a footer of a few hundred bytes that claims a billion schema elements
//! makes it allocate gigabytes, or abort (found by fuzzing; iceberg-rust pins this
//! parquet major). The walk reads the bytes as parquet will, field by field, without
//! allocating: a field parquet reads must have the type parquet expects (a list, its
//! elements' type), every count must fit in the bytes left (each element takes at
//! least one byte), and nesting stays shallow. Bytes that pass hold every element they
//! declare, so what parquet then allocates is bounded by their size. Fields parquet
//! skips are skipped here alike, by the type the bytes declare.
//!
//! The field tables below are those parquet 58.4 decodes (its `file/metadata/thrift`,
//! `basic.rs` and `page_index` readers), not the whole of parquet-format: a field
//! parquet skips is left out.

/// What parquet reads a field or list element as.
#[derive(Clone, Copy)]
pub(crate) enum Ty {
    Bool,
    Byte,
    I16,
    I32,
    I64,
    Double,
    Binary,
    List(&'static Ty),
    Struct(Fields),
}

use Ty::{Binary, Bool, Byte, Double, I16, I32, I64, List, Struct};

/// The fields of a struct parquet reads, by id.
pub(crate) type Fields = &'static [(i16, Ty)];

/// A struct parquet reads with no field (a union's empty variant).
const EMPTY: Fields = &[];
const TIME_UNIT: Fields = &[(1, Struct(EMPTY)), (2, Struct(EMPTY)), (3, Struct(EMPTY))];
const TIMESTAMP: Fields = &[(1, Bool), (2, Struct(TIME_UNIT))];
const LOGICAL_TYPE: Fields = &[
    (1, Struct(EMPTY)),
    (2, Struct(EMPTY)),
    (3, Struct(EMPTY)),
    (4, Struct(EMPTY)),
    (5, Struct(&[(1, I32), (2, I32)])),
    (6, Struct(EMPTY)),
    (7, Struct(TIMESTAMP)),
    (8, Struct(TIMESTAMP)),
    (10, Struct(&[(1, Byte), (2, Bool)])),
    (11, Struct(EMPTY)),
    (12, Struct(EMPTY)),
    (13, Struct(EMPTY)),
    (14, Struct(EMPTY)),
    (15, Struct(EMPTY)),
    (16, Struct(&[(1, Byte)])),
    (17, Struct(&[(1, Binary)])),
    (18, Struct(&[(1, Binary), (2, I32)])),
];
const SCHEMA_ELEMENT: Fields = &[
    (1, I32),
    (2, I32),
    (3, I32),
    (4, Binary),
    (5, I32),
    (6, I32),
    (7, I32),
    (8, I32),
    (9, I32),
    (10, Struct(LOGICAL_TYPE)),
];
const STATISTICS: Fields = &[
    (1, Binary),
    (2, Binary),
    (3, I64),
    (4, I64),
    (5, Binary),
    (6, Binary),
    (7, Bool),
    (8, Bool),
];
const BOUNDING_BOX: Fields = &[
    (1, Double),
    (2, Double),
    (3, Double),
    (4, Double),
    (5, Double),
    (6, Double),
    (7, Double),
    (8, Double),
];
const COLUMN_METADATA: Fields = &[
    (1, I32),
    (2, List(&I32)),
    (4, I32),
    (5, I64),
    (6, I64),
    (7, I64),
    (9, I64),
    (10, I64),
    (11, I64),
    (12, Struct(STATISTICS)),
    (13, List(&Struct(&[(1, I32), (2, I32), (3, I32)]))),
    (14, I64),
    (15, I32),
    (16, Struct(&[(1, I64), (2, List(&I64)), (3, List(&I64))])),
    (17, Struct(&[(1, Struct(BOUNDING_BOX)), (2, List(&I32))])),
];
const COLUMN_CRYPTO: Fields = &[
    (1, Struct(EMPTY)),
    (2, Struct(&[(1, List(&Binary)), (2, Binary)])),
];
const COLUMN_CHUNK: Fields = &[
    (1, Binary),
    (2, I64),
    (3, Struct(COLUMN_METADATA)),
    (4, I64),
    (5, I32),
    (6, I64),
    (7, I32),
    (8, Struct(COLUMN_CRYPTO)),
    (9, Binary),
];
const ROW_GROUP: Fields = &[
    (1, List(&Struct(COLUMN_CHUNK))),
    (2, I64),
    (3, I64),
    (4, List(&Struct(&[(1, I32), (2, Bool), (3, Bool)]))),
    (5, I64),
    (7, I16),
];
const AES_GCM: Fields = &[(1, Binary), (2, Binary), (3, Bool)];

/// A footer: `FileMetaData`.
pub(crate) const FILE_METADATA: Fields = &[
    (1, I32),
    (2, List(&Struct(SCHEMA_ELEMENT))),
    (3, I64),
    (4, List(&Struct(ROW_GROUP))),
    (5, List(&Struct(&[(1, Binary), (2, Binary)]))),
    (6, Binary),
    (7, List(&Struct(&[(1, Struct(EMPTY))]))),
    (8, Struct(&[(1, Struct(AES_GCM)), (2, Struct(AES_GCM))])),
    (9, Binary),
];

/// A column chunk's column index.
pub(crate) const COLUMN_INDEX: Fields = &[
    (1, List(&Bool)),
    (2, List(&Binary)),
    (3, List(&Binary)),
    (4, I32),
    (5, List(&I64)),
    (6, List(&I64)),
    (7, List(&I64)),
];

/// A column chunk's offset index.
pub(crate) const OFFSET_INDEX: Fields = &[
    (1, List(&Struct(&[(1, I64), (2, I32), (3, I64)]))),
    (2, List(&I64)),
];

/// A page's header, as parquet reads it before the page (without page statistics,
/// which it skips).
pub(crate) const PAGE_HEADER: Fields = &[
    (1, I32),
    (2, I32),
    (3, I32),
    (4, I32),
    (5, Struct(&[(1, I32), (2, I32), (3, I32), (4, I32)])),
    (6, Struct(EMPTY)),
    (7, Struct(&[(1, I32), (2, I32), (3, Bool)])),
    (
        8,
        Struct(&[
            (1, I32),
            (2, I32),
            (3, I32),
            (4, I32),
            (5, I32),
            (6, I32),
            (7, Bool),
        ]),
    ),
];

/// Nesting deeper than this is refused: a Parquet footer nests about eight deep.
const MAX_DEPTH: u32 = 64;

/// Compact protocol types.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

impl Ty {
    /// Whether parquet reads a value of compact type `wire` as this type consuming what
    /// the type declares.
    fn is(self, wire: u8) -> bool {
        match self {
            Bool => matches!(wire, BOOL_TRUE | BOOL_FALSE),
            Byte => wire == BYTE,
            I16 => wire == T_I16,
            I32 => wire == T_I32,
            I64 => wire == T_I64,
            Double => wire == DOUBLE,
            Binary => wire == BINARY,
            // parquet reads a set's header as a list's.
            List(_) => matches!(wire, LIST | SET),
            Struct(_) => wire == STRUCT,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Bool => "bool",
            Byte => "byte",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            Double => "double",
            Binary => "binary",
            List(_) => "list",
            Struct(_) => "struct",
        }
    }
}

/// Walks one struct of `fields` at the start of `bytes` and returns the bytes it took;
/// `Err` says what is wrong and where.
pub(crate) fn walk_struct(bytes: &[u8], fields: Fields) -> Result<usize, String> {
    let mut walk = Walk { bytes, at: 0 };
    walk.known_struct(fields, 0)?;
    Ok(walk.at)
}

/// Refuses a footer (one that [`walk_struct`] took as [`FILE_METADATA`]) whose schema
/// has an element declaring more children than the schema has elements: parquet
/// reserves room for an element's children before it reads any of them.
pub(crate) fn check_schema_children(footer: &[u8]) -> Result<(), String> {
    let mut walk = Walk {
        bytes: footer,
        at: 0,
    };
    let mut id = 0;
    while let Some((next, wire)) = walk.field_header(id)? {
        id = next;
        if matches!(wire, BOOL_TRUE | BOOL_FALSE) {
            continue;
        }
        if id != 2 {
            walk.skip_value(wire, 1)?;
            continue;
        }
        // The schema: a list of structs, as the walk has checked.
        let Some((_, elements)) = walk.list_header()? else {
            continue;
        };
        for element in 0..elements {
            let mut field = 0;
            while let Some((next, wire)) = walk.field_header(field)? {
                field = next;
                match (field, wire) {
                    (_, BOOL_TRUE | BOOL_FALSE) => {}
                    // num_children, an i32 as parquet reads it.
                    (5, _) => {
                        let children = zigzag(walk.varint()?) as i32;
                        if usize::try_from(children).is_ok_and(|c| c >= elements) {
                            return walk.fail(format!(
                                "schema element {element} declares {children} children in a \
                                 schema of {elements} elements"
                            ));
                        }
                    }
                    _ => walk.skip_value(wire, 2)?,
                }
            }
        }
    }
    Ok(())
}

/// What a page header declares: its own length and the page's sizes after it.
#[derive(Debug, PartialEq)]
pub(crate) struct PageSizes {
    pub(crate) header: usize,
    pub(crate) uncompressed: i32,
    pub(crate) compressed: i32,
}

/// Walks the page header at the start of `bytes` (see [`walk_struct`]) and returns the
/// sizes it declares, as parquet reads them (the last of a repeated field).
pub(crate) fn page_header(bytes: &[u8]) -> Result<PageSizes, String> {
    let header = walk_struct(bytes, PAGE_HEADER)?;
    // The walk checked the fields' types: 2 and 3, where present, are i32 varints.
    let mut walk = Walk {
        bytes: &bytes[..header],
        at: 0,
    };
    let (mut uncompressed, mut compressed, mut id) = (None, None, 0);
    while let Some((next, wire)) = walk.field_header(id)? {
        id = next;
        match (id, wire) {
            (_, BOOL_TRUE | BOOL_FALSE) => {}
            (2, _) => uncompressed = Some(zigzag(walk.varint()?) as i32),
            (3, _) => compressed = Some(zigzag(walk.varint()?) as i32),
            _ => walk.skip_value(wire, 1)?,
        }
    }
    match (uncompressed, compressed) {
        (Some(uncompressed), Some(compressed)) => Ok(PageSizes {
            header,
            uncompressed,
            compressed,
        }),
        _ => Err("a page header without its sizes".to_string()),
    }
}

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn fail<T>(&self, what: impl std::fmt::Display) -> Result<T, String> {
        Err(format!("Thrift at byte {}: {what}", self.at))
    }

    fn byte(&mut self) -> Result<u8, String> {
        match self.bytes.get(self.at) {
            Some(&b) => {
                self.at += 1;
                Ok(b)
            }
            None => self.fail("ends early"),
        }
    }

    fn skip(&mut self, n: usize) -> Result<(), String> {
        if n > self.left() {
            return self.fail(format!("{n} bytes wanted, {} left", self.left()));
        }
        self.at += n;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most ten bytes.
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.fail("a varint longer than ten bytes")
    }

    /// A count of elements, each of at least `min_bytes`, that the bytes left can hold.
    fn count(&mut self, n: u64, min_bytes: usize) -> Result<usize, String> {
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.checked_mul(min_bytes).is_some_and(|b| b <= self.left()));
        match fits {
            Some(n) => Ok(n),
            None => self.fail(format!(
                "a count of {n} that the {} bytes left cannot hold",
                self.left()
            )),
        }
    }

    /// A field's id and wire type, after the field `last`; `None` at the struct's stop.
    /// As parquet reads it: a type of 0 is the stop whatever the id nibble, a field id
    /// is an i16 (a delta past it is refused, a long id truncated).
    fn field_header(&mut self, last: i16) -> Result<Option<(i16, u8)>, String> {
        let header = self.byte()?;
        let wire = header & 0x0f;
        if wire == 0 {
            return Ok(None);
        }
        let id = match header >> 4 {
            // A delta of zero: the id follows as a zigzag varint.
            0 => zigzag(self.varint()?) as i16,
            delta => match last.checked_add(i16::from(delta)) {
                Some(id) => id,
                None => return self.fail(format!("a field id past {last}")),
            },
        };
        Ok(Some((id, wire)))
    }

    /// The depth of a value nested in one at `depth`, refused past [`MAX_DEPTH`] so that
    /// hostile nesting cannot exhaust the stack.
    fn deeper(&self, depth: u32) -> Result<u32, String> {
        if depth >= MAX_DEPTH {
            return self.fail(format!("nested deeper than {MAX_DEPTH}"));
        }
        Ok(depth + 1)
    }

    /// A list's element type and a count its bytes can hold, or `None` for an empty list
    /// (some writers give one no element type).
    fn list_header(&mut self) -> Result<Option<(u8, usize)>, String> {
        let header = self.byte()?;
        if header == 0 {
            return Ok(None);
        }
        let n = match header >> 4 {
            15 => self.varint()?,
            short => u64::from(short),
        };
        Ok(Some((header & 0x0f, self.count(n, 1)?)))
    }

    /// A struct parquet reads as `fields`: each field it knows of the type it expects,
    /// the others skipped.
    fn known_struct(&mut self, fields: Fields, depth: u32) -> Result<(), String> {
        let mut id = 0;
        loop {
            let Some((next, wire)) = self.field_header(id)? else {
                return Ok(());
            };
            id = next;
            match fields.iter().find(|(known, _)| *known == id) {
                Some(&(_, ty)) if !ty.is(wire) => {
                    return self.fail(format!(
                        "field {id} of type {wire} where parquet reads a {}",
                        ty.name()
                    ));
                }
                // A boolean field's value is its type.
                _ if matches!(wire, BOOL_TRUE | BOOL_FALSE) => {}
                Some(&(_, ty)) => self.known_value(ty, self.deeper(depth)?)?,
                None => self.skip_value(wire, self.deeper(depth)?)?,
            }
        }
    }

    /// A value parquet reads as `ty` (its wire type checked by the caller).
    fn known_value(&mut self, ty: Ty, depth: u32) -> Result<(), String> {
        match ty {
            Bool | Byte => self.skip(1),
            I16 | I32 | I64 => self.varint().map(drop),
            Double => self.skip(8),
            Binary => self.skip_value(BINARY, depth),
            Struct(fields) => self.known_struct(fields, depth),
            List(element) => {
                let Some((wire, n)) = self.list_header()? else {
                    return Ok(());
                };
                if !element.is(wire) {
                    return self.fail(format!(
                        "a list of type {wire} where parquet reads a list of {}",
                        element.name()
                    ));
                }
                let depth = self.deeper(depth)?;
                for _ in 0..n {
                    self.known_value(*element, depth)?;
                }
                Ok(())
            }
        }
    }

    /// A struct parquet skips: its fields by the types they declare.
    fn skip_struct(&mut self, depth: u32) -> Result<(), String> {
        let mut id = 0;
        loop {
            let Some((next, wire)) = self.field_header(id)? else {
                return Ok(());
            };
            id = next;
            match wire {
                // A boolean field's value is its type.
                BOOL_TRUE | BOOL_FALSE => {}
                ty => self.skip_value(ty, self.deeper(depth)?)?,
            }
        }
    }

    /// A value of type `ty` (a list element, a map entry or a non-boolean field).
    fn skip_value(&mut self, ty: u8, depth: u32) -> Result<(), String> {
        match ty {
            BOOL_TRUE | BOOL_FALSE | BYTE => self.skip(1),
            T_I16 | T_I32 | T_I64 => self.varint().map(drop),
            DOUBLE => self.skip(8),
            BINARY => {
                let n = self.varint()?;
                let n = self.count(n, 1)?;
                self.skip(n)
            }
            LIST | SET => self.skip_list(depth),
            MAP => self.skip_map(depth),
            STRUCT => self.skip_struct(depth),
            other => self.fail(format!("unknown type {other}")),
        }
    }

    fn skip_list(&mut self, depth: u32) -> Result<(), String> {
        let Some((ty, n)) = self.list_header()? else {
            return Ok(());
        };
        let depth = self.deeper(depth)?;
        for _ in 0..n {
            self.skip_value(ty, depth)?;
        }
        Ok(())
    }

    fn skip_map(&mut self, depth: u32) -> Result<(), String> {
        let n = self.varint()?;
        if n == 0 {
            return Ok(());
        }
        let types = self.byte()?;
        let n = self.count(n, 2)?;
        let depth = self.deeper(depth)?;
        for _ in 0..n {
            self.skip_value(types >> 4, depth)?;
            self.skip_value(types & 0x0f, depth)?;
        }
        Ok(())
    }
}

/// A zigzag-encoded integer.
fn zigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::test_fixtures::zigzag_varint as varint;

    /// A struct of one field `id` of type `wire` and then `payload`, with a stop.
    fn field(id: u8, wire: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(id << 4) | wire];
        out.extend_from_slice(payload);
        out.push(0);
        out
    }

    /// A list header of `n` elements of type `wire`.
    fn list_header(n: u64, wire: u8) -> Vec<u8> {
        if n < 15 {
            return vec![((n as u8) << 4) | wire];
        }
        let mut out = vec![0xf0 | wire];
        let mut v = n;
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// An offset index of `n` page locations, `declared` in its header.
    fn offset_index(declared: u64, n: usize) -> Vec<u8> {
        let mut list = list_header(declared, STRUCT);
        for _ in 0..n {
            // offset 4, size 10, first row 0
            list.extend([0x16, 0x08, 0x15, 0x14, 0x16, 0x00, 0x00]);
        }
        field(1, LIST, &list)
    }

    #[test]
    fn a_struct_walks_to_its_stop() {
        let bytes = offset_index(20, 20);
        assert_eq!(walk_struct(&bytes, OFFSET_INDEX), Ok(bytes.len()));
        // Bytes after the struct are not its own.
        let mut more = bytes.clone();
        more.extend([1, 2, 3]);
        assert_eq!(walk_struct(&more, OFFSET_INDEX), Ok(bytes.len()));
    }

    #[test]
    fn a_count_the_bytes_cannot_hold_is_refused() {
        let err = walk_struct(&offset_index(1 << 40, 3), OFFSET_INDEX).expect_err("refused");
        assert!(err.contains("cannot hold"), "{err}");
        let err = walk_struct(&offset_index(10, 3), OFFSET_INDEX).expect_err("refused");
        assert!(
            err.contains("ends early") || err.contains("cannot hold"),
            "{err}"
        );
    }

    /// parquet reads a field it knows as the type it expects: a footer whose schema
    /// (field 2) is declared an i32 would be read as a list all the same.
    #[test]
    fn a_known_field_of_another_type_is_refused() {
        let err = walk_struct(&field(2, T_I32, &[0x02]), FILE_METADATA).expect_err("refused");
        assert!(err.contains("parquet reads a list"), "{err}");
        // A list of i64 where parquet reads page locations.
        let mut list = list_header(1, T_I64);
        list.push(0x02);
        let err = walk_struct(&field(1, LIST, &list), OFFSET_INDEX).expect_err("refused");
        assert!(err.contains("list of struct"), "{err}");
        // A field parquet does not know is skipped by its declared type.
        assert!(walk_struct(&field(12, T_I32, &[0x02]), FILE_METADATA).is_ok());
    }

    #[test]
    fn a_string_longer_than_the_bytes_is_refused() {
        // created_by (field 6) of length 2^62.
        let mut len = Vec::new();
        let mut v = 1u64 << 62;
        while v >= 0x80 {
            len.push((v as u8) | 0x80);
            v >>= 7;
        }
        len.push(v as u8);
        assert!(walk_struct(&field(6, BINARY, &len), FILE_METADATA).is_err());
    }

    /// A data page's header declaring `uncompressed` and `compressed` bytes.
    pub(crate) fn page_header_bytes(uncompressed: i64, compressed: i64) -> Vec<u8> {
        let mut out = vec![0x15, 0]; // 1: type DATA_PAGE
        out.push(0x15);
        out.extend(varint(uncompressed));
        out.push(0x15);
        out.extend(varint(compressed));
        // 5: a data page header of four i32s.
        out.extend([0x2c, 0x15, 0x02, 0x15, 0, 0x15, 0x06, 0x15, 0x06, 0]);
        out.push(0);
        out
    }

    #[test]
    fn a_page_header_s_sizes_are_read_as_parquet_reads_them() {
        let bytes = page_header_bytes(4000, 1200);
        let mut with_page = bytes.clone();
        with_page.extend([7; 1200]);
        assert_eq!(
            page_header(&with_page),
            Ok(PageSizes {
                header: bytes.len(),
                uncompressed: 4000,
                compressed: 1200
            })
        );
        // An i32 past its range is truncated, as parquet truncates it.
        let big = page_header(&page_header_bytes(1 << 32 | 5, 1)).expect("walks");
        assert_eq!(big.uncompressed, 5);
        // A field id 15 with a type of 0 is the stop, as parquet reads it.
        let mut stop = page_header_bytes(1, 1);
        *stop.last_mut().expect("stop") = 0xf0;
        assert!(page_header(&stop).is_ok());
    }

    #[test]
    fn a_page_header_of_other_types_or_without_sizes_is_refused() {
        // 2: the uncompressed size declared a string.
        let mut bytes = vec![0x15, 0, 0x18, 0x04];
        bytes.extend(b"abcd");
        bytes.extend([0x15, 0x02, 0]);
        assert!(
            page_header(&bytes)
                .expect_err("refused")
                .contains("field 2")
        );
        // No sizes at all.
        assert!(page_header(&[0x15, 0, 0]).is_err());
        // A field id delta past an i16.
        let mut far = vec![0x05];
        far.extend(varint(i64::from(i16::MAX)));
        far.extend([0x00, 0x15, 0x02, 0]);
        assert!(page_header(&far).expect_err("refused").contains("past"));
    }

    /// A footer whose schema is one element declaring `children` children.
    fn footer_of_one_element(children: i64) -> Vec<u8> {
        let mut bytes = vec![0x29, 0x1c, 0x55]; // 2: a list of 1 struct; its 5: an i32
        bytes.extend(varint(children));
        bytes.extend([0, 0]);
        bytes
    }

    #[test]
    fn a_schema_element_with_more_children_than_the_schema_is_refused() {
        for children in [0, -1] {
            let footer = footer_of_one_element(children);
            assert_eq!(walk_struct(&footer, FILE_METADATA), Ok(footer.len()));
            assert_eq!(check_schema_children(&footer), Ok(()), "{children}");
        }
        for children in [1, 293_620_036] {
            let footer = footer_of_one_element(children);
            assert_eq!(walk_struct(&footer, FILE_METADATA), Ok(footer.len()));
            let err = check_schema_children(&footer).expect_err("refused");
            assert!(err.contains(&format!("{children} children")), "{err}");
        }
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        // Unknown struct fields nested 100 deep.
        let mut bytes = vec![0xfc; 100];
        bytes.extend(vec![0; 101]);
        let err = walk_struct(&bytes, FILE_METADATA).expect_err("refused");
        assert!(err.contains("deeper"), "{err}");
    }

    #[test]
    fn overlong_varints_and_unknown_types_are_refused() {
        let mut bytes = vec![0x15]; // field 1, i32
        bytes.extend([0xff; 11]);
        assert!(walk_struct(&bytes, FILE_METADATA).is_err());
        assert!(walk_struct(&[0xfd, 0], FILE_METADATA).is_err()); // type 13
    }
}
