//! Exhaustive small inputs, for checking that two statements of a rule (a validator and the
//! OpenAPI pattern that describes it) agree on every string, not on a few examples.

/// Every string of at most `max_len` characters from `alphabet`, the empty one included.
pub fn all_strings(alphabet: &str, max_len: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut last = all.clone();
    for _ in 0..max_len {
        last = last
            .iter()
            .flat_map(|s| alphabet.chars().map(move |c| format!("{s}{c}")))
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}
