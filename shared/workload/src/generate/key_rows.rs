//! The model's rows of each key. A key has one live row but for a moment (an update's
//! new row beside the old) or under a partitioned table's per-partition deletes, so the
//! first id is kept inline and the rest apart: a table of 10^8 rows holds one small
//! entry per key, not an allocation per key.

use std::collections::HashMap;

use super::values::KeyCode;

#[derive(Default)]
pub(super) struct KeyRows {
    first: HashMap<KeyCode, usize>,
    /// The ids after the first, of the keys that have more than one.
    rest: HashMap<KeyCode, Vec<usize>>,
}

impl KeyRows {
    /// Room for `keys` keys without growing.
    pub(super) fn reserve(&mut self, keys: usize) {
        self.first.reserve(keys);
    }

    pub(super) fn add(&mut self, code: KeyCode, id: usize) {
        match self.first.entry(code) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(id);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.rest.entry(code).or_default().push(id);
            }
        }
    }

    pub(super) fn contains(&self, code: &KeyCode) -> bool {
        self.first.contains_key(code)
    }

    /// The key's row ids, in the order they were added (none when it has none).
    pub(super) fn ids(&self, code: &KeyCode) -> Vec<usize> {
        let Some(&first) = self.first.get(code) else {
            return Vec::new();
        };
        let mut ids = vec![first];
        if let Some(rest) = self.rest.get(code) {
            ids.extend_from_slice(rest);
        }
        ids
    }

    pub(super) fn remove(&mut self, code: &KeyCode, id: usize) {
        let Some(&first) = self.first.get(code) else {
            return;
        };
        let rest = self.rest.get_mut(code);
        if first == id {
            // The next id, if any, moves up.
            match rest {
                Some(rest) if !rest.is_empty() => {
                    let next = rest.remove(0);
                    if rest.is_empty() {
                        self.rest.remove(code);
                    }
                    self.first.insert(*code, next);
                }
                _ => {
                    self.first.remove(code);
                    self.rest.remove(code);
                }
            }
        } else if let Some(rest) = rest {
            rest.retain(|&i| i != id);
            if rest.is_empty() {
                self.rest.remove(code);
            }
        }
    }
}
