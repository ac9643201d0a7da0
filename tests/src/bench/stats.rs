//! Medians, spreads and latency percentiles for the bench report.

/// The median of repeated measurements with their smallest and largest value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Summarises repeated measurements; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let middle = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            (sorted[middle - 1] + sorted[middle]) / 2.0
        } else {
            sorted[middle]
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        })
    }

    /// `median (min–max)` with the given number of decimals.
    pub fn display(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}–{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }
}

/// The value at `fraction` (0.5 for p50, 0.99 for p99) of sorted samples,
/// by the nearest-rank method; `None` when there are no samples.
pub fn percentile(sorted: &[f64], fraction: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((sorted.len() as f64) * fraction).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_an_even_count_averages_the_middle_two() {
        let spread = Spread::of(&[4.0, 1.0, 3.0, 2.0]).expect("values");
        assert_eq!(
            spread,
            Spread {
                median: 2.5,
                min: 1.0,
                max: 4.0
            }
        );
        assert_eq!(spread.display(1), "2.5 (1.0–4.0)");
    }

    #[test]
    fn spread_of_nothing_is_none() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.5), Some(50.0));
        assert_eq!(percentile(&samples, 0.99), Some(99.0));
        assert_eq!(percentile(&samples, 0.999), Some(100.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
