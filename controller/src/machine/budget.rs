//! The run's agent budget (SPEC §3): what its launches may spend in total,
//! kept in two units — reported tokens (`limits.tokens_per_run`) and
//! estimated cost from the profiles' price tables (`limits.cost_per_run`).
//! Every finished launch is charged in both; a budget spent in either unit
//! blocks the next launch and refuses an unblock, the same way.
//!
//! Cost is counted in millionths of the price unit, so sums are exact.

use serde::{Deserialize, Serialize};

use super::bounds::{Counters, RunSettings};

/// The unit a budget limit is set in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetUnit {
    Tokens,
    /// Estimated cost, in millionths of the price tables' unit.
    Cost,
}

impl BudgetUnit {
    /// The configuration key that sets this unit's limit.
    pub fn limit_key(self) -> &'static str {
        match self {
            BudgetUnit::Tokens => "limits.tokens_per_run",
            BudgetUnit::Cost => "limits.cost_per_run",
        }
    }

    /// `amount` of this unit, written for people.
    pub fn amount(self, amount: u64) -> String {
        match self {
            BudgetUnit::Tokens => format!("{amount} tokens"),
            BudgetUnit::Cost => format!("{} (estimated cost)", format_cost(amount)),
        }
    }
}

/// A budget the run has used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSpent {
    pub unit: BudgetUnit,
    pub used: u64,
    pub max: u64,
}

impl BudgetSpent {
    /// "600 tokens of the 500 tokens that limits.tokens_per_run allowed".
    pub fn describe(&self) -> String {
        format!(
            "{} of the {} that {} allowed",
            self.unit.amount(self.used),
            self.unit.amount(self.max),
            self.unit.limit_key()
        )
    }
}

/// The first budget the run has spent, if any (none without limits).
pub fn budget_spent(settings: &RunSettings, counters: &Counters) -> Option<BudgetSpent> {
    [
        (BudgetUnit::Tokens, settings.max_tokens, counters.tokens),
        (
            BudgetUnit::Cost,
            settings.max_cost_micros,
            counters.cost_micros,
        ),
    ]
    .into_iter()
    .find_map(|(unit, max, used)| {
        max.filter(|max| used >= *max)
            .map(|max| BudgetSpent { unit, used, max })
    })
}

/// Charges one finished launch (its corrections included) to the budget:
/// what it reported counts even when its result is refused, it ran.
pub fn charge(counters: &mut Counters, tokens: Option<u64>, cost_micros: Option<u64>) {
    let (tokens, cost) = (tokens.unwrap_or_default(), cost_micros.unwrap_or_default());
    counters.tokens = counters.tokens.saturating_add(tokens);
    counters.cost_micros = counters.cost_micros.saturating_add(cost);
    counters.issue_tokens = counters.issue_tokens.saturating_add(tokens);
    counters.issue_cost_micros = counters.issue_cost_micros.saturating_add(cost);
}

/// An amount in millionths of the price unit, for people: two decimals,
/// four below one unit (a cheap launch is not "0.00").
pub fn format_cost(micros: u64) -> String {
    let whole = micros / 1_000_000;
    let fraction = micros % 1_000_000;
    if whole == 0 {
        format!("0.{:04}", fraction / 100)
    } else {
        format!("{whole}.{:02}", fraction / 10_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_unit_spends_the_budget_and_none_without_limits() {
        let mut settings = RunSettings::default();
        let mut counters = Counters {
            tokens: 900,
            cost_micros: 2_500_000,
            ..Counters::default()
        };
        assert_eq!(budget_spent(&settings, &counters), None);
        settings.max_cost_micros = Some(2_000_000);
        let spent = budget_spent(&settings, &counters).expect("the cost budget is spent");
        assert_eq!(spent.unit, BudgetUnit::Cost);
        assert_eq!(
            spent.describe(),
            "2.50 (estimated cost) of the 2.00 (estimated cost) that limits.cost_per_run allowed"
        );
        settings.max_tokens = Some(800);
        assert_eq!(
            budget_spent(&settings, &counters).map(|s| s.unit),
            Some(BudgetUnit::Tokens)
        );
        settings.max_tokens = Some(901);
        settings.max_cost_micros = Some(2_500_001);
        assert_eq!(budget_spent(&settings, &counters), None);
        charge(&mut counters, Some(1), None);
        assert_eq!(counters.tokens, 901);
        assert!(budget_spent(&settings, &counters).is_some());
    }

    #[test]
    fn costs_read_with_two_decimals_or_four_below_one_unit() {
        assert_eq!(format_cost(3_033_000), "3.03");
        assert_eq!(format_cost(1_234), "0.0012");
        assert_eq!(format_cost(0), "0.0000");
        assert_eq!(format_cost(12_000_000), "12.00");
    }
}
