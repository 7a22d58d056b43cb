//! The operator's own books: the **house account**.
//!
//! The house is a merchant row with a reserved id ([`HOUSE`]) that no API key, `ops merchants`
//! command or merchant listing can name (`merchants::get_merchant` does not find it). Its
//! balances and ledger entries are ordinary ones, written by the one ledger writer
//! (`ledger::post`, the same checked arithmetic and lock order), so the operator's money has the
//! same audit trail as a merchant's: per environment and gate, what the house holds of its own.
//!
//! - `house_funding`: inventory the operator added or took out (`ops treasury fund`).
//! - `conversion_inventory_in` / `conversion_inventory_out`: the two sides of a live conversion
//!   (the `treasury` venue): the paid asset into the house, the target asset out of it.
//! - `sweep_fee` / `gas_topup`: what moving deposits costs the operator.
//!
//! A merchant balance is never touched by any of these: a conversion's merchant side is the
//! merchant's usual `conversion_debit`/`conversion_credit`, in the same transaction.
//!
//! The row is created on first use ([`ensure_house`], `INSERT … ON CONFLICT DO NOTHING`), by
//! every writer before it posts to the house, so no migration has to write a merchant row.

use std::collections::BTreeMap;

use chrono::Utc;
use entity::{
    Amount, Bucket, EntryType, Environment, MerchantId, UnclaimedStatus, balance, invoice, merchant, payment,
    unclaimed_deposit,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

use crate::gates::{self, Gate};
use crate::ledger::{self, Account, LedgerError, Posting};

/// The house's reserved merchant id (`…686f757365`, "house" in ASCII).
pub const HOUSE: MerchantId = MerchantId(Uuid::from_u128(0x0068_6f75_7365));

/// Whether `id` is the house (refused wherever a merchant is named).
pub fn is_house(id: MerchantId) -> bool {
    id == HOUSE
}

/// The house's balance of `gate` in `env`.
pub fn account(env: Environment, gate_id: &str) -> Account<'_> {
    Account::of(HOUSE, env, gate_id)
}

/// Creates the house's merchant row if it does not exist yet (in the caller's transaction).
pub async fn ensure_house<C: ConnectionTrait>(db: &C) -> Result<(), DbErr> {
    let now = Utc::now();
    let row = merchant::ActiveModel {
        id: Set(HOUSE.into()),
        name: Set("house (the operator's own books)".into()),
        base_currency: Set("USD".into()),
        invoice_lifetime_secs: Set(0),
        underpayment_tolerance_percent: Set(Amount::ZERO),
        rate_limit_reads: Set(None),
        rate_limit_writes: Set(None),
        rate_limit_test_helpers: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        payer_reply_to: Set(None),
    };
    merchant::Entity::insert(row)
        .on_conflict(OnConflict::column(merchant::Column::Id).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Posts to the house's balance of `gate` (creating the house first), in the caller's
/// transaction. Refused below zero like any balance.
pub async fn post<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    postings: &[Posting],
) -> Result<balance::Model, LedgerError> {
    ensure_house(txn).await?;
    ledger::post(txn, account(env, gate_id), postings).await
}

/// What the operator spent (a sweep's fee, a gas top-up): posted to the house's balance of
/// `gate`, which may go below zero (the operator pays it out of what it earned, which the house
/// does not book), in the caller's transaction.
pub async fn post_expense<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    postings: &[Posting],
) -> Result<balance::Model, LedgerError> {
    ensure_house(txn).await?;
    ledger::post_allowing_debt(txn, account(env, gate_id), postings).await
}

/// The deposit addresses of `gate` in `env` whose money may be swept, with their derivation
/// index: those of invoices with payments on the gate, none of them still confirming (an
/// address with a payment short of its confirmations waits).
pub async fn sweepable<C: ConnectionTrait>(
    db: &C,
    env: Environment,
    gate_id: &str,
) -> Result<Vec<(String, i64)>, DbErr> {
    use entity::PaymentStatus;
    use sea_orm::{JoinType, QuerySelect, RelationTrait};
    let rows: Vec<(Option<String>, Option<i64>, PaymentStatus)> = payment::Entity::find()
        .select_only()
        .column(invoice::Column::AddressKey)
        .column(invoice::Column::DerivationIndex)
        .column(payment::Column::Status)
        .join(JoinType::InnerJoin, payment::Relation::Invoice.def())
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .into_tuple()
        .all(db)
        .await?;
    let mut by_address: BTreeMap<String, (i64, bool)> = BTreeMap::new();
    for (key, index, status) in rows {
        let (Some(address), Some(index)) = (key.as_deref().and_then(plain_address), index) else { continue };
        // A reversed payment's money is not there: it holds nothing back.
        let settled = match status {
            PaymentStatus::Confirmed | PaymentStatus::Reversed => true,
            PaymentStatus::Confirming => false,
        };
        let slot = by_address.entry(address.to_owned()).or_insert((index, true));
        slot.1 &= settled;
    }
    Ok(by_address.into_iter().filter(|(_, (_, ok))| *ok).map(|(a, (i, _))| (a, i)).collect())
}

/// The operator adds (positive) or takes out (negative, refused below zero) inventory of
/// `gate`: a `house_funding` entry with the reason, in the caller's transaction.
pub async fn fund<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate: &Gate,
    amount: Decimal,
    reason: &str,
) -> Result<balance::Model, LedgerError> {
    if amount.is_zero() {
        return Err(LedgerError::Invalid("a funding must not be zero".into()));
    }
    if amount.scale() > gate.decimals {
        return Err(LedgerError::Invalid(format!("{} allows at most {} decimal places", gate.id, gate.decimals)));
    }
    if reason.trim().is_empty() {
        return Err(LedgerError::Invalid("a funding needs a reason".into()));
    }
    let posting = Posting {
        bucket: Bucket::Available,
        amount,
        entry_type: EntryType::HouseFunding,
        reference: Some(("adjustment", Uuid::now_v7())),
        description: Some(reason.trim().to_owned()),
    };
    post(txn, env, gate.id, &[posting]).await
}

/// The house's available balance of each gate in `env` (gates it never held are absent).
pub async fn holdings<C: ConnectionTrait>(db: &C, env: Environment) -> Result<BTreeMap<String, Decimal>, DbErr> {
    let rows = balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(HOUSE))
        .filter(balance::Column::Environment.eq(env))
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|b| (b.gate_id, b.available.0)).collect())
}

/// The house's net position per asset (upper case): its holdings summed over each asset's gates.
pub fn positions(holdings: &BTreeMap<String, Decimal>) -> BTreeMap<&'static str, Decimal> {
    let mut out: BTreeMap<&'static str, Decimal> = BTreeMap::new();
    for (gate_id, amount) in holdings {
        if let Some(g) = gates::find(gate_id) {
            let slot = out.entry(g.asset).or_default();
            *slot = slot.checked_add(*amount).unwrap_or(*slot);
        }
    }
    out
}

/// Why the house will not take a conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The house holds less of the target gate than the merchant is to get.
    InventoryShort { gate: &'static str, has: Decimal, needed: Decimal },
    /// Taking the paid asset would put the house's position in it past its cap (or it has none).
    ExposureCap { asset: &'static str, position: Decimal, cap: Option<Decimal> },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::InventoryShort { gate, has, needed } => {
                write!(f, "the house holds {has} of {gate}, {needed} needed")
            }
            Refused::ExposureCap { asset, position, cap: Some(cap) } => {
                write!(f, "the house would hold {position} {asset}, past its max_exposure of {cap}")
            }
            Refused::ExposureCap { asset, cap: None, .. } => {
                write!(f, "settlement.treasury.max_exposure has no cap for {asset}: the house takes none")
            }
        }
    }
}

/// Whether the house can fill a conversion of `amount` of `source` into `net` of `target`, given
/// its `holdings` and the per-asset caps (asset names compared case-insensitively).
pub fn can_fill(
    holdings: &BTreeMap<String, Decimal>,
    caps: &BTreeMap<String, Decimal>,
    source: &'static Gate,
    amount: Decimal,
    target: &'static Gate,
    net: Decimal,
) -> Result<(), Refused> {
    let has = holdings.get(target.id).copied().unwrap_or_default();
    if has < net {
        return Err(Refused::InventoryShort { gate: target.id, has, needed: net });
    }
    let held = positions(holdings).get(source.asset).copied().unwrap_or_default();
    within_cap(caps, source.asset, held.checked_add(amount).unwrap_or(Decimal::MAX))
}

/// Whether holding `position` of `asset` is within its cap (asset names compared
/// case-insensitively; an asset without a cap may not be held at all).
pub fn within_cap(caps: &BTreeMap<String, Decimal>, asset: &'static str, position: Decimal) -> Result<(), Refused> {
    let cap = caps.iter().find(|(a, _)| a.eq_ignore_ascii_case(asset)).map(|(_, c)| *c);
    match cap {
        Some(cap) if position <= cap => Ok(()),
        cap => Err(Refused::ExposureCap { asset, position, cap }),
    }
}

/// The plain address of an `address_key` (`<family>:<address>:<tag>`): XRP's shared account is
/// one address whatever the tag.
fn plain_address(key: &str) -> Option<&str> {
    key.split(':').nth(1).filter(|a| !a.is_empty())
}

/// What one gate owes, from the database: every merchant's balance (available + pending +
/// reserved; the house's is its own, apart) and the unclaimed deposits not yet returned (not
/// resolved, not gone from the chain).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Owed {
    pub merchants: Decimal,
    pub unclaimed: Decimal,
    /// The house's balance of the gate (fees, conversion inventory): the operator's own.
    pub house: Decimal,
}

/// [`Owed`] per gate id in `env` (gates with nothing owed and no house balance are absent).
/// Sums are taken in Rust: money columns are TEXT on SQLite.
pub async fn owed<C: ConnectionTrait>(db: &C, env: Environment) -> Result<BTreeMap<String, Owed>, DbErr> {
    let mut out: BTreeMap<String, Owed> = BTreeMap::new();
    let overflow = || DbErr::Custom("amount overflow summing balances".into());
    for b in balance::Entity::find().filter(balance::Column::Environment.eq(env)).all(db).await? {
        let o = out.entry(b.gate_id).or_default();
        if b.merchant_id == Uuid::from(HOUSE) {
            o.house = o.house.checked_add(b.available.0).ok_or_else(overflow)?;
            continue;
        }
        let sum =
            b.available.0.checked_add(b.pending.0).and_then(|s| s.checked_add(b.reserved.0)).ok_or_else(overflow)?;
        o.merchants = o.merchants.checked_add(sum).ok_or_else(overflow)?;
    }
    let open = unclaimed_deposit::Entity::find()
        .filter(unclaimed_deposit::Column::Environment.eq(env))
        .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
        .filter(unclaimed_deposit::Column::Status.ne(UnclaimedStatus::Gone))
        .all(db)
        .await?;
    for d in open {
        let o = out.entry(d.gate_id).or_default();
        o.unclaimed = o.unclaimed.checked_add(d.amount.0).ok_or_else(overflow)?;
    }
    Ok(out)
}

/// The deposit addresses of `gate` in `env` that ever received money: those of invoices with a
/// payment on the gate and those of unclaimed deposits, each once, plain (no family, no tag:
/// XRP's shared account is one address).
pub async fn deposit_addresses<C: ConnectionTrait>(
    db: &C,
    env: Environment,
    gate_id: &str,
) -> Result<Vec<String>, DbErr> {
    use sea_orm::{JoinType, QuerySelect, RelationTrait};
    let paid: Vec<Option<String>> = payment::Entity::find()
        .select_only()
        .column(invoice::Column::AddressKey)
        .distinct()
        .join(JoinType::InnerJoin, payment::Relation::Invoice.def())
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .into_tuple()
        .all(db)
        .await?;
    let unclaimed: Vec<String> = unclaimed_deposit::Entity::find()
        .select_only()
        .column(unclaimed_deposit::Column::AddressKey)
        .distinct()
        .filter(unclaimed_deposit::Column::Environment.eq(env))
        .filter(unclaimed_deposit::Column::GateId.eq(gate_id))
        .into_tuple()
        .all(db)
        .await?;
    let set: std::collections::BTreeSet<String> =
        paid.iter().flatten().chain(unclaimed.iter()).filter_map(|k| plain_address(k).map(str::to_owned)).collect();
    Ok(set.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn caps(pairs: &[(&str, &str)]) -> BTreeMap<String, Decimal> {
        pairs.iter().map(|(a, c)| ((*a).to_owned(), d(c))).collect()
    }

    #[test]
    fn the_house_fills_only_from_inventory_and_within_its_caps() {
        let btc = gates::find("bitcoin").unwrap();
        let usdt = gates::find("tron_usdt").unwrap();
        let holdings: BTreeMap<String, Decimal> =
            [("tron_usdt".to_owned(), d("600")), ("bitcoin".to_owned(), d("0.5"))].into();
        let caps = caps(&[("btc", "1")]);
        assert_eq!(can_fill(&holdings, &caps, btc, d("0.01"), usdt, d("595.5")), Ok(()));
        // Exactly the inventory, exactly the cap: still fills.
        assert_eq!(can_fill(&holdings, &caps, btc, d("0.5"), usdt, d("600")), Ok(()));
        assert_eq!(
            can_fill(&holdings, &caps, btc, d("0.01"), usdt, d("600.01")),
            Err(Refused::InventoryShort { gate: "tron_usdt", has: d("600"), needed: d("600.01") })
        );
        assert_eq!(
            can_fill(&holdings, &caps, btc, d("0.51"), usdt, d("1")),
            Err(Refused::ExposureCap { asset: "BTC", position: d("1.01"), cap: Some(d("1")) })
        );
        // Inventory of a gate the house never held is zero.
        let eth_usdt = gates::find("ethereum_usdt").unwrap();
        assert!(matches!(
            can_fill(&holdings, &caps, btc, d("0.01"), eth_usdt, d("1")),
            Err(Refused::InventoryShort { .. })
        ));
        // An asset without a cap is never taken.
        let eth = gates::find("ethereum").unwrap();
        assert_eq!(
            can_fill(&holdings, &caps, eth, d("0.1"), usdt, d("1")),
            Err(Refused::ExposureCap { asset: "ETH", position: d("0.1"), cap: None })
        );
    }

    #[test]
    fn positions_sum_an_assets_gates() {
        let holdings: BTreeMap<String, Decimal> = [
            ("tron_usdt".to_owned(), d("600")),
            ("ethereum_usdt".to_owned(), d("400.5")),
            ("bitcoin".to_owned(), d("0.5")),
        ]
        .into();
        let p = positions(&holdings);
        assert_eq!(p["USDT"], d("1000.5"));
        assert_eq!(p["BTC"], d("0.5"));
    }

    #[test]
    fn the_house_is_not_a_merchant_anyone_can_name() {
        assert!(is_house(HOUSE));
        assert_eq!(HOUSE.to_string(), "00000000-0000-0000-0000-00686f757365");
    }
}
