//! Comparing rows as multisets: a lost delete leaves a duplicate row, which a set
//! comparison would hide, so every judge compares counts, not just membership.

use std::collections::BTreeMap;

/// The rows of `a` not in `b`, counting multiplicity (both sorted).
pub fn multiset_minus(a: &[String], b: &[String]) -> Vec<String> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() {
        if j >= b.len() || a[i] < b[j] {
            out.push(a[i].clone());
            i += 1;
        } else if a[i] > b[j] {
            j += 1;
        } else {
            i += 1;
            j += 1;
        }
    }
    out
}

/// How `actual` differs from `expected` as multisets: `None` when they are equal,
/// else a message naming the judge, both sizes and the first differing rows with their
/// multiplicities. Neither side needs to be sorted.
pub fn multiset_difference(judge: &str, actual: &[String], expected: &[String]) -> Option<String> {
    let (mut a, mut e) = (actual.to_vec(), expected.to_vec());
    a.sort();
    e.sort();
    if a == e {
        return None;
    }
    let extra = multiset_minus(&a, &e);
    let missing = multiset_minus(&e, &a);
    Some(format!(
        "{judge} read {} rows where {} were expected: {} unexpected (e.g. deleted rows that \
         came back) {}; {} missing {}",
        a.len(),
        e.len(),
        extra.len(),
        sample(&extra),
        missing.len(),
        sample(&missing)
    ))
}

/// Panics with [`multiset_difference`]'s message when the rows differ.
pub fn assert_same_rows(judge: &str, actual: &[String], expected: &[String]) {
    if let Some(message) = multiset_difference(judge, actual, expected) {
        panic!("{message}");
    }
}

/// Up to five rows with their counts, for a readable failure.
fn sample(rows: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in rows {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    let shown: Vec<String> = counts
        .iter()
        .take(5)
        .map(|(r, n)| {
            if *n > 1 {
                format!("{r} x{n}")
            } else {
                (*r).to_string()
            }
        })
        .collect();
    let more = if counts.len() > 5 { ", ..." } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(r: &[&str]) -> Vec<String> {
        r.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn a_duplicate_is_a_difference() {
        let expected = rows(&["[1]", "[2]"]);
        let actual = rows(&["[2]", "[1]", "[2]"]);
        let message = multiset_difference("PyIceberg", &actual, &expected).expect("differ");
        assert!(message.contains("1 unexpected"), "{message}");
        assert!(message.contains("0 missing"), "{message}");
        assert_eq!(
            multiset_minus(&rows(&["[1]", "[2]", "[2]"]), &expected),
            rows(&["[2]"])
        );
    }

    #[test]
    fn order_does_not_matter() {
        let expected = rows(&["[1]", "[2]", "[2]"]);
        assert_eq!(
            multiset_difference("x", &rows(&["[2]", "[1]", "[2]"]), &expected),
            None
        );
    }

    #[test]
    fn a_missing_row_is_named() {
        let message =
            multiset_difference("DuckDB", &rows(&["[1]"]), &rows(&["[1]", "[7]"])).expect("differ");
        assert!(message.contains("1 missing [[7]]"), "{message}");
    }
}
