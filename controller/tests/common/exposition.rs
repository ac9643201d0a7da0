//! A strict reader of the Prometheus text exposition for the `metrics_*`
//! tests: every line must be a well-formed comment or sample, and series
//! are looked up by name and exact label set.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;

/// Renders the process-wide recorder the code under test records into.
pub fn render() -> String {
    autoforge::metrics::install()
        .expect("no other recorder in this test binary")
        .render()
}

/// Parses the current exposition, failing the test on any malformed line.
pub fn scrape() -> Vec<Sample> {
    let text = render();
    parse_exposition(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// One sample line of the exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

fn is_name(text: &str, colons: bool) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':'))
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        other => other
            .parse::<f64>()
            .map_err(|_| format!("`{other}` is not a sample value")),
    }
}

/// Parses `k="v",…}` (the text after `{`); returns the labels and the rest.
fn parse_labels(mut rest: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let (name, after_name) = rest
            .split_once("=\"")
            .ok_or_else(|| format!("label without `=\"` in `{rest}`"))?;
        if !is_name(name, false) {
            return Err(format!("`{name}` is not a label name"));
        }
        let mut value = String::new();
        let mut chars = after_name.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    other => return Err(format!("bad escape {other:?} in a label value")),
                },
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        labels.insert(name.to_owned(), value);
        rest = &after_name[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Every line must be a comment (`# HELP`/`# TYPE` well formed), blank, or
/// a sample `name{labels} value [timestamp]`.
pub fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let context = |error: String| format!("line {}: {error}: `{line}`", number + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("HELP"), Some(name), Some(_)) if is_name(name, true) => {}
                (Some("TYPE"), Some(name), Some(kind)) if is_name(name, true) => {
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(context(format!("unknown type `{kind}`")));
                    }
                }
                _ => return Err(context("malformed comment".into())),
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| context("no value".into()))?;
        let name = &line[..name_end];
        if !is_name(name, true) {
            return Err(context(format!("`{name}` is not a metric name")));
        }
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(after) => parse_labels(after).map_err(context)?,
            None => (BTreeMap::new(), &line[name_end..]),
        };
        let mut fields = rest
            .strip_prefix(' ')
            .ok_or_else(|| context("no space before the value".into()))?
            .split(' ');
        let value = parse_value(fields.next().unwrap_or_default()).map_err(context)?;
        if let Some(timestamp) = fields.next() {
            timestamp
                .parse::<i64>()
                .map_err(|_| context("bad timestamp".into()))?;
        }
        if fields.next().is_some() {
            return Err(context("trailing fields".into()));
        }
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    Ok(samples)
}

/// The value of the series `name{labels}` (0 when it does not exist yet).
pub fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let wanted: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|sample| sample.name == name && sample.labels == wanted)
        .map_or(0.0, |sample| sample.value)
}
