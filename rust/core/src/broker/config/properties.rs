//! `broker.conf` as text: the Java properties lines RocketMQ's files use, and the closest
//! known key for one that is misspelt.

/// The reason a properties line could not be read, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}: cannot parse {text:?} (expected key=value)")]
pub struct PropertiesError {
    pub line: usize,
    pub text: String,
}

/// Java properties, the subset broker.conf files use: `key=value`, `key = value`, `key: value`,
/// `key value`, `#` and `!` comments, blank lines. `(line, key, value)` in file order; a key
/// set twice appears twice (the caller says so, and the last wins).
pub fn parse_properties(text: &str) -> Result<Vec<(usize, String, String)>, PropertiesError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', '!']) {
            continue;
        }
        let end = line
            .find(|c: char| c == '=' || c == ':' || c.is_whitespace())
            .unwrap_or(line.len());
        let (key, rest) = line.split_at(end);
        let rest = rest.trim_start();
        let value = rest
            .strip_prefix(['=', ':'])
            .map(str::trim_start)
            .unwrap_or(rest);
        if key.is_empty() || end == line.len() {
            return Err(PropertiesError {
                line: index + 1,
                text: raw.to_owned(),
            });
        }
        out.push((index + 1, key.to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

/// difflib's ratio on the longest common subsequence: `2 * common / total`, for "did you mean".
fn similarity(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row = vec![0usize; b.len() + 1];
    for x in &a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    let total = a.len() + b.len();
    if total == 0 {
        return 1.0;
    }
    2.0 * row[b.len()] as f64 / total as f64
}

/// The one of `known` most like `key`, if any is close enough to be a misspelling of it.
pub(super) fn closest_key<'a>(
    key: &str,
    known: impl IntoIterator<Item = &'a &'a str>,
) -> Option<String> {
    known
        .into_iter()
        .map(|k| (similarity(key, k), *k))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.to_owned())
}
