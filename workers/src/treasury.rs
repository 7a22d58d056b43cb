//! Reconciliation: can the operator prove the books? Per gate, what the service owes (merchant
//! balances, unclaimed deposits; `domain::treasury::owed`) against what the chain holds for it
//! (every deposit address that ever received money, the hot wallet and the cold address of
//! `[treasury.gates.<gate>]`, read from the node with `Chain::balances`), with the house's own
//! balance in between:
//!
//! `difference = holdings − owed to merchants − unclaimed − house`
//!
//! Zero when the books match the chains; positive when the operator holds more (fees earned but
//! not booked to the house, dust); negative is a shortfall. `ops treasury report` prints it,
//! `ops treasury check` fails past `tolerance`, and the payout executor's process exports
//! `paygate_treasury_difference{gate}` every `treasury.report_interval_secs`.
//!
//! Holdings count only what is in blocks, while a deposit is owed (as `pending`) from the
//! moment it is seen: a deposit in the mempool shows as a transient shortfall of its amount
//! (the `tolerance` absorbs it). A sweep in flight needs no line of its own: its money is read
//! where it is, on the deposit address until its transaction is in a block and at the
//! destination after; `in_flight` shows how much is moving (for the operator; not added again).

use entity::Environment;
use rust_decimal::Decimal;
use sea_orm::{DatabaseConnection, DbErr};
use serde::Serialize;

use crate::chain::Chains;
use domain::config::Config;
use domain::treasury::{self, Owed};

/// One gate's reconciliation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateReport {
    pub gate: &'static str,
    pub owed: OwedJson,
    pub holdings: Holdings,
    /// `None` when a balance could not be read (`unread` says which).
    pub difference: Option<Decimal>,
    pub tolerance: Decimal,
    /// Balances the node did not answer: `<role> <address>: <error>`.
    pub unread: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OwedJson {
    pub merchants: Decimal,
    pub unclaimed: Decimal,
    pub house: Decimal,
}

impl From<Owed> for OwedJson {
    fn from(o: Owed) -> Self {
        OwedJson { merchants: o.merchants, unclaimed: o.unclaimed, house: o.house }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Holdings {
    /// Summed over every deposit address that ever received money on the gate.
    pub deposits: Decimal,
    pub deposit_addresses: usize,
    pub hot: Option<Decimal>,
    pub cold: Option<Decimal>,
    /// What sweeps signed and not yet confirmed are moving (already in `deposits`, `hot` or
    /// `cold`, wherever the chain has it: shown, not added again).
    pub in_flight: Decimal,
    pub total: Decimal,
}

impl GateReport {
    /// Whether holdings fall short of what is owed by more than the tolerance, or could not be read.
    pub fn short(&self) -> bool {
        self.difference.is_none_or(|d| d < -self.tolerance)
    }
}

/// The reconciliation of every gate of `env` that has a chain in `chains` and either owes
/// something or has wallets configured, in gate order.
pub async fn report(
    db: &DatabaseConnection,
    chains: &Chains,
    config: &Config,
    env: Environment,
) -> Result<Vec<GateReport>, DbErr> {
    let owed = treasury::owed(db, env).await?;
    let wallets = &config.treasury.gates;
    let mut gates: Vec<&'static str> = Vec::new();
    for g in domain::gates::GATES.iter() {
        let relevant = owed.contains_key(g.id) || (env == Environment::Live && wallets.contains_key(g.id));
        if relevant && chains.get(env, g.id).is_some() {
            gates.push(g.id);
        }
    }
    let mut out = Vec::with_capacity(gates.len());
    for gate in gates {
        let chain = chains.get(env, gate).expect("listed with a chain");
        let o = owed.get(gate).copied().unwrap_or_default();
        let addresses = treasury::deposit_addresses(db, env, gate).await?;
        // The operator's wallets are live only: the test environment's sandbox has none.
        let w = wallets.get(gate).filter(|_| env == Environment::Live);
        let (hot, cold) = (w.and_then(|w| w.hot_address.clone()), w.and_then(|w| w.cold_address.clone()));
        let mut asked: Vec<&str> = addresses.iter().map(String::as_str).collect();
        asked.extend(hot.as_deref());
        asked.extend(cold.as_deref());
        let answers = chain.balances(&asked).await;
        let mut unread = Vec::new();
        let mut holdings = Holdings { deposit_addresses: addresses.len(), ..Holdings::default() };
        let mut read = |role: &str, address: &str, answer: &Result<Decimal, crate::chain::ChainError>| match answer {
            Ok(v) => Some(*v),
            Err(e) => {
                unread.push(format!("{role} {address}: {e}"));
                None
            }
        };
        let n = addresses.len();
        for (a, answer) in addresses.iter().zip(&answers[..n]) {
            if let Some(v) = read("deposit", a, answer) {
                holdings.deposits = holdings.deposits.checked_add(v).unwrap_or(Decimal::MAX);
            }
        }
        let mut rest = answers[n..].iter();
        if let Some(h) = &hot {
            holdings.hot = rest.next().and_then(|answer| read("hot", h, answer));
        }
        if let Some(c) = &cold {
            holdings.cold = rest.next().and_then(|answer| read("cold", c, answer));
        }
        holdings.in_flight = in_flight(db, env, gate).await?;
        let total = [Some(holdings.deposits), holdings.hot, holdings.cold]
            .into_iter()
            .flatten()
            .try_fold(Decimal::ZERO, Decimal::checked_add);
        holdings.total = total.unwrap_or(Decimal::MAX);
        let difference = unread.is_empty().then(|| difference(holdings.total, o)).flatten();
        let tolerance = w.map_or(Decimal::ZERO, |w| w.tolerance);
        out.push(GateReport { gate, owed: o.into(), holdings, difference, tolerance, unread });
    }
    Ok(out)
}

/// The amounts of `gate`'s sweeps signed and not yet confirmed.
async fn in_flight(db: &DatabaseConnection, env: Environment, gate: &str) -> Result<Decimal, DbErr> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let moving = entity::sweep::Entity::find()
        .filter(entity::sweep::Column::Environment.eq(env))
        .filter(entity::sweep::Column::GateId.eq(gate))
        .filter(entity::sweep::Column::Status.eq(entity::SweepStatus::Sending))
        .all(db)
        .await?;
    Ok(moving
        .iter()
        .filter_map(|s| s.amount)
        .try_fold(Decimal::ZERO, |sum, a| sum.checked_add(a.0))
        .unwrap_or(Decimal::MAX))
}

/// Holdings less everything owed and the house's own balance.
pub fn difference(holdings: Decimal, o: Owed) -> Option<Decimal> {
    holdings.checked_sub(o.merchants)?.checked_sub(o.unclaimed)?.checked_sub(o.house)
}

/// Exports the live reconciliation as `paygate_treasury_difference{gate}` (a gate that could not
/// be read exports nothing, and `paygate_treasury_unread{gate}` = 1).
pub async fn export_metrics(db: &DatabaseConnection, chains: &Chains, config: &Config) -> Result<(), DbErr> {
    for r in report(db, chains, config, Environment::Live).await? {
        let unread = if r.unread.is_empty() { 0.0 } else { 1.0 };
        metrics::gauge!("paygate_treasury_unread", "gate" => r.gate).set(unread);
        if let Some(d) = r.difference {
            // A gauge is a float: the exact value is in `ops treasury report`.
            let v = d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            metrics::gauge!("paygate_treasury_difference", "gate" => r.gate).set(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn the_difference_is_holdings_less_what_is_owed_and_the_houses_own() {
        let o = Owed { merchants: d("10"), unclaimed: d("0.5"), house: d("2") };
        assert_eq!(difference(d("12.5"), o), Some(d("0")));
        assert_eq!(difference(d("12"), o), Some(d("-0.5")));
        assert_eq!(difference(d("13"), o), Some(d("0.5")));
    }

    #[test]
    fn short_only_past_the_tolerance_or_when_unread() {
        let r = |difference: Option<&str>, tolerance: &str| GateReport {
            gate: "bitcoin",
            owed: Owed::default().into(),
            holdings: Holdings::default(),
            difference: difference.map(d),
            tolerance: d(tolerance),
            unread: Vec::new(),
        };
        assert!(!r(Some("0"), "0").short());
        assert!(!r(Some("-0.001"), "0.001").short());
        assert!(r(Some("-0.0011"), "0.001").short());
        assert!(!r(Some("5"), "0").short());
        assert!(r(None, "100").short());
    }
}
