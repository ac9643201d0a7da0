//! A profile's price table (`[agents.profiles.X.price]`): what a million
//! tokens of each kind cost, in whatever unit the operator prices in
//! (dollars, say). It turns a launch's reported token counts into an
//! estimated cost, kept in millionths of that unit so sums stay exact.

use serde::{Deserialize, Serialize};

use super::output::TokenUsage;

/// Price per million tokens of each kind; a kind left out costs nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PriceTable {
    pub input: f64,
    pub output: f64,
    /// Cache reads reported apart from the input count.
    pub cached: f64,
}

impl PriceTable {
    /// Why the table cannot price anything, if it cannot: every price is a
    /// finite number of zero or more.
    pub fn problem(&self) -> Option<String> {
        [
            ("input", self.input),
            ("output", self.output),
            ("cached", self.cached),
        ]
        .into_iter()
        .find(|(_, price)| !price.is_finite() || *price < 0.0)
        .map(|(kind, price)| format!("the `{kind}` price {price} is not a finite number >= 0"))
    }

    /// The estimated cost of `usage` in millionths of the table's unit. A
    /// million tokens at price P cost P units, so one token costs P
    /// millionths.
    pub fn cost_micros(&self, usage: &TokenUsage) -> u64 {
        let cost = usage.input as f64 * self.input
            + usage.output as f64 * self.output
            + usage.cached as f64 * self.cached;
        // Saturating float-to-int conversion; a bad table was refused at load.
        cost.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_million_tokens_cost_the_price_per_million() {
        let table = PriceTable {
            input: 3.0,
            output: 15.0,
            cached: 0.3,
        };
        let usage = TokenUsage {
            input: 1_000_000,
            output: 2_000,
            cached: 10_000,
        };
        // 3.00 + 0.03 + 0.003 units.
        assert_eq!(table.cost_micros(&usage), 3_033_000);
    }

    #[test]
    fn negative_or_infinite_prices_are_refused() {
        let negative = PriceTable {
            output: -1.0,
            ..PriceTable::default()
        };
        assert!(negative.problem().is_some_and(|p| p.contains("`output`")));
        let infinite = PriceTable {
            input: f64::INFINITY,
            ..PriceTable::default()
        };
        assert!(infinite.problem().is_some());
        assert_eq!(PriceTable::default().problem(), None);
    }
}
