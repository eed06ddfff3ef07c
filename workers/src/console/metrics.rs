//! Convergence, read from the workers' metrics endpoints (`--metrics-addr`): the copy lag
//! of each index (`tablekit_copy_lag_seconds{table,index}`, a histogram) and the hot
//! partitions (`tablekit_hot_partition_writes_per_second{table,partition_key}`).
//!
//! Hand-written: the two families are read from the Prometheus text format line by line
//! (name, labels, value); a parser of the whole format is more than these lines need. Lines
//! that do not read are skipped, and an endpoint that does not answer is named on the page.

use std::collections::BTreeMap;
use std::time::Duration;

/// The copy lag of one index, over every endpoint read.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Lag {
    /// Copies written.
    pub(crate) count: f64,
    /// Their lags, summed (seconds).
    pub(crate) sum: f64,
    /// Cumulative bucket counts by upper bound.
    pub(crate) buckets: Vec<(f64, f64)>,
}

impl Lag {
    /// The mean lag in seconds.
    pub(crate) fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The upper bound of the bucket holding the `q` quantile (seconds).
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        if self.count <= 0.0 {
            return None;
        }
        let rank = q * self.count;
        self.buckets
            .iter()
            .find(|(_, n)| *n >= rank)
            .map(|(le, _)| *le)
    }
}

/// What the endpoints say.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Convergence {
    /// Copy lag by (table, index).
    pub(crate) lags: BTreeMap<(String, String), Lag>,
    /// Writes per second by (table, partition), hottest first.
    pub(crate) hot: Vec<((String, String), f64)>,
    /// Endpoints that did not answer, with why.
    pub(crate) unreachable: Vec<(String, String)>,
}

/// One sample line: its name, labels and value.
fn sample(line: &str) -> Option<(&str, BTreeMap<String, String>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (head, ""),
    };
    let mut map = BTreeMap::new();
    let mut rest = labels;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        // The value runs to the next quote not escaped.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let end = end?;
        let raw = &after[..end];
        let value = raw
            .replace("\\\"", "\"")
            .replace("\\n", "\n")
            .replace("\\\\", "\\");
        map.insert(key.trim_start_matches(',').trim().to_owned(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some((name, map, value))
}

impl Convergence {
    /// Adds one endpoint's page.
    pub(crate) fn add(&mut self, page: &str) {
        let mut hot: BTreeMap<(String, String), f64> = self.hot.drain(..).collect();
        for line in page.lines() {
            let Some((name, labels, value)) = sample(line) else {
                continue;
            };
            let key = |a: &str, b: &str| Some((labels.get(a)?.clone(), labels.get(b)?.clone()));
            match name {
                "tablekit_copy_lag_seconds_count" => {
                    if let Some(k) = key("table", "index") {
                        self.lags.entry(k).or_default().count += value;
                    }
                }
                "tablekit_copy_lag_seconds_sum" => {
                    if let Some(k) = key("table", "index") {
                        self.lags.entry(k).or_default().sum += value;
                    }
                }
                "tablekit_copy_lag_seconds_bucket" => {
                    let le = labels.get("le").and_then(|le| match le.as_str() {
                        "+Inf" => Some(f64::INFINITY),
                        le => le.parse::<f64>().ok(),
                    });
                    if let (Some(k), Some(le)) = (key("table", "index"), le) {
                        let lag = self.lags.entry(k).or_default();
                        match lag.buckets.iter_mut().find(|(b, _)| *b == le) {
                            Some((_, n)) => *n += value,
                            None => lag.buckets.push((le, value)),
                        }
                        lag.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                    }
                }
                "tablekit_hot_partition_writes_per_second" => {
                    if let Some(k) = key("table", "partition_key") {
                        *hot.entry(k).or_default() += value;
                    }
                }
                _ => {}
            }
        }
        let mut hot: Vec<_> = hot.into_iter().filter(|(_, rate)| *rate > 0.0).collect();
        hot.sort_by(|a, b| b.1.total_cmp(&a.1));
        hot.truncate(10);
        self.hot = hot;
    }
}

/// Reads every endpoint (a short timeout each).
pub(crate) async fn read(endpoints: &[String]) -> Convergence {
    let mut convergence = Convergence::default();
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            convergence.unreachable.push((String::new(), e.to_string()));
            return convergence;
        }
    };
    for endpoint in endpoints {
        let page = async {
            let response = client.get(endpoint).send().await?.error_for_status()?;
            response.text().await
        }
        .await;
        match page {
            Ok(page) => convergence.add(&page),
            Err(e) => convergence
                .unreachable
                .push((endpoint.clone(), e.to_string())),
        }
    }
    convergence
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_lags_and_hot_partitions_are_read_and_summed_over_endpoints() {
        let page = r#"
# TYPE tablekit_copy_lag_seconds histogram
tablekit_copy_lag_seconds_bucket{index="email",table="Staff",le="0.1"} 6
tablekit_copy_lag_seconds_bucket{index="email",table="Staff",le="1"} 9
tablekit_copy_lag_seconds_bucket{index="email",table="Staff",le="+Inf"} 10
tablekit_copy_lag_seconds_sum{index="email",table="Staff"} 4.5
tablekit_copy_lag_seconds_count{index="email",table="Staff"} 10
tablekit_hot_partition_writes_per_second{table="Staff",partition_key="t\"1"} 12.5
tablekit_hot_partition_writes_per_second{table="Staff",partition_key="t2"} 0
not a sample line
"#;
        let mut c = Convergence::default();
        c.add(page);
        c.add(page);
        let lag = &c.lags[&("Staff".to_owned(), "email".to_owned())];
        assert_eq!(lag.count, 20.0);
        assert_eq!(lag.mean(), Some(0.45));
        assert_eq!(lag.quantile(0.5), Some(0.1));
        assert_eq!(lag.quantile(0.9), Some(1.0));
        assert_eq!(lag.quantile(0.99), Some(f64::INFINITY));
        assert_eq!(c.hot, vec![(("Staff".to_owned(), "t\"1".to_owned()), 25.0)]);
    }
}
