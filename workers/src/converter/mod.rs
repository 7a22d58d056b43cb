//! The settlement converter's rules (the `settlement-converter` worker runs them as jobs).
//!
//! For an invoice whose `target_settlement_asset` is a gate other than the paid one, each
//! payment is **quoted** once, when it is detected (the quote holds until `locked_until`), and
//! **settled** once, when it is confirmed: the venue executes the quote and the target asset is
//! credited the net amount (`invoice_credit` and `conversion_debit` on the paid asset,
//! `conversion_credit` on the target), or, when the quote failed, expired or was refused, the
//! paid asset is credited as for passthrough (`source_credited` with a `failure_class`).
//! `balance.credited` is written with the final credit.
//!
//! The confirmation tracker confirms such payments without crediting them; crediting is this
//! module's, exactly once: the payment's `credited_at` is stamped with a guarded update in the
//! transaction that posts the credit, and the conversion's state moves with a guarded update
//! too. A payment reversed before its credit abandons its quote (in the tracker's transaction).
//!
//! - The poller (`job`, every `settlement.poll_interval_ms`) asks the database which payments
//!   need it ([`due`]: to an invoice that converts, not credited, not reversed,
//!   and either without a quote or confirmed) and enqueues each once per resend window (20
//!   polls, at least 5 s), so a lost job or a killed converter delays, never loses, a credit.
//! - State: `settlement_conversions`, one row per payment, moved by `ConversionState::on`
//!   (exhaustive): `quoted` → `executed` | `execution_failed` | `expired` | `abandoned`, or
//!   `quote_failed` from the start.
//! - Quote: the venue is asked outside any transaction; the row is inserted (`ON CONFLICT DO
//!   NOTHING`) after taking the payment's row lock with a guarded no-op update (not reversed, not
//!   credited), so a reversal that won the lock leaves no quote behind.
//! - Settle: the venue executes outside the transaction; then one transaction stamps the payment
//!   credited (guarded: of two converters, one credits), moves the conversion, posts the ledger
//!   (the two balances locked in gate-id order, so opposite conversions cannot deadlock) and
//!   writes `balance.credited`.
//! - A real venue must make `execute` idempotent by the payment id (`venue::Venue`): a converter
//!   killed between the venue's fill and the credit's commit asks again.

pub mod job;
pub mod venue;

use chrono::Utc;
use entity::{
    Amount, Bucket, ConversionState, ConversionTrigger, EntryType, MerchantId, PaymentStatus, invoice, payment,
    settlement_conversion,
};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, JoinType,
    QueryFilter, QuerySelect, RelationTrait,
};
use uuid::Uuid;
use venue::{Executed, FailureClass, QuoteRequest, Quoted, Venues};

use domain::events::{self, Credit};
use domain::gates::{self, Gate};
use domain::ledger::{self, LedgerError, Posting};
use domain::settlement::converting_target;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Db(#[from] DbErr),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Venue(#[from] venue::VenueError),
    /// The house could not fill a live conversion in the credit's transaction (inventory short
    /// under its lock, or past an exposure cap): that transaction is rolled back and the payment
    /// is credited in the paid asset instead (`execution_rejected`).
    #[error("the house refused the conversion: {0}")]
    HouseRefused(String),
    #[error("{0}")]
    Invariant(String),
}

/// The invoice's `metadata.sandbox_conversion`, if it is a string.
fn hint(inv: &invoice::Model) -> Option<&str> {
    inv.metadata.as_ref()?.get("sandbox_conversion")?.as_str()
}

/// Everything the converter needs.
#[derive(Clone)]
pub struct Converter {
    pub db: DatabaseConnection,
    pub venues: Venues,
    /// How long a quote holds.
    pub quote_lock: chrono::Duration,
}

/// What one [`Converter::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do: passthrough, already credited, reversed, or unknown.
    Nothing,
    /// Quoted (or recorded a failed quote); the payment is not confirmed yet.
    Quoted,
    /// Credited, in the target asset or the paid one.
    Settled,
}

impl Converter {
    /// Does whatever payment `id` needs now: a quote if it has none, the settlement if it is
    /// confirmed. Idempotent; safe to run concurrently with itself and with the tracker.
    pub async fn step(&self, id: Uuid) -> Result<Step, ConvertError> {
        let Some(p) = payment::Entity::find_by_id(id).one(&self.db).await? else { return Ok(Step::Nothing) };
        if p.credited_at.is_some() || p.status == PaymentStatus::Reversed {
            return Ok(Step::Nothing);
        }
        let inv = invoice::Entity::find_by_id(p.invoice_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ConvertError::Invariant(format!("invoice of payment {id} missing")))?;
        let Some(target) = converting_target(&inv, &p) else { return Ok(Step::Nothing) };
        let existing = settlement_conversion::Entity::find_by_id(id).one(&self.db).await?;
        let (p, conv) = match existing {
            Some(c) => (p, c),
            None => {
                if !self.quote(&p, &inv, target).await? {
                    return Ok(Step::Nothing);
                }
                // Re-read both: the payment may have been confirmed meanwhile.
                let p = payment::Entity::find_by_id(id).one(&self.db).await?.unwrap_or(p);
                let c = settlement_conversion::Entity::find_by_id(id)
                    .one(&self.db)
                    .await?
                    .ok_or_else(|| ConvertError::Invariant(format!("quote of payment {id} missing")))?;
                (p, c)
            }
        };
        if p.status != PaymentStatus::Confirmed || p.credited_at.is_some() {
            return Ok(Step::Quoted);
        }
        Ok(if self.settle(&p, &inv, &conv, target).await? { Step::Settled } else { Step::Nothing })
    }

    /// Asks the venue for a quote and records it (or its refusal) once. Returns `false` when
    /// the payment was reversed or credited meanwhile (nothing recorded).
    async fn quote(
        &self,
        p: &payment::Model,
        inv: &invoice::Model,
        target: &'static Gate,
    ) -> Result<bool, ConvertError> {
        let source =
            gates::find(&p.gate_id).ok_or_else(|| ConvertError::Invariant(format!("unknown gate {}", p.gate_id)))?;
        let now = Utc::now();
        let req = QuoteRequest {
            environment: p.environment,
            source,
            target,
            amount: p.amount.0,
            reference: p.id,
            now,
            lock: self.quote_lock,
            hint: hint(inv),
        };
        let venue = self.venues.get(p.environment);
        let quoted = match venue {
            Some(v) => v.quote(&req).await?,
            None => Quoted::Refused(venue::Refusal {
                class: FailureClass::VenueUnavailable,
                message: format!("no conversion venue serves the {} environment", p.environment),
            }),
        };
        let mut row = settlement_conversion::ActiveModel {
            payment_id: Set(p.id),
            invoice_id: Set(inv.id),
            merchant_id: Set(inv.merchant_id),
            environment: Set(p.environment),
            source_gate_id: Set(source.id.to_owned()),
            target_gate_id: Set(target.id.to_owned()),
            source_amount: Set(p.amount),
            rate: Set(None),
            target_gross_amount: Set(None),
            fee_amount: Set(None),
            net_amount: Set(None),
            state: Set(ConversionState::QuoteFailed),
            failure_class: Set(None),
            venue: Set(venue.map_or("none", |v| v.name()).to_owned()),
            venue_ref: Set(None),
            quoted_at: Set(None),
            locked_until: Set(None),
            settled_at: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        };
        match quoted {
            Quoted::Quote(q) => {
                row.rate = Set(Some(Amount::new(q.rate)));
                row.target_gross_amount = Set(Some(Amount::new(q.gross)));
                row.fee_amount = Set(Some(Amount::new(q.fee)));
                row.net_amount = Set(Some(Amount::new(q.net)));
                row.state = Set(ConversionState::Quoted);
                row.venue_ref = Set(q.venue_ref);
                row.quoted_at = Set(Some(now));
                row.locked_until = Set(Some(q.locked_until));
            }
            Quoted::Refused(r) => {
                tracing::info!(payment_id = %p.id, class = r.class.as_str(), reason = %r.message, "conversion not quoted");
                row.failure_class = Set(Some(r.class.as_str().to_owned()));
            }
        }
        let txn = domain::db::begin_write(&self.db).await?;
        // The payment's row lock first (as the tracker's reversal takes it): a payment reversed
        // or credited meanwhile gets no quote.
        if !domain::payments::lifecycle::lock_uncredited(&txn, p.id.into()).await? {
            txn.rollback().await?;
            return Ok(false);
        }
        settlement_conversion::Entity::insert(row)
            .on_conflict(OnConflict::column(settlement_conversion::Column::PaymentId).do_nothing().to_owned())
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        Ok(true)
    }

    /// Settles a confirmed, uncredited payment: executes a live quote and credits the target,
    /// or credits the paid asset. Returns `false` when another writer got there first.
    async fn settle(
        &self,
        p: &payment::Model,
        inv: &invoice::Model,
        conv: &settlement_conversion::Model,
        target: &'static Gate,
    ) -> Result<bool, ConvertError> {
        let source =
            gates::find(&p.gate_id).ok_or_else(|| ConvertError::Invariant(format!("unknown gate {}", p.gate_id)))?;
        let Some((next, failure)) = self.verdict(p, inv, conv).await? else { return Ok(false) };
        let converted = next == ConversionState::Executed;
        let net = conv.net_amount.map(|a| a.0).filter(|_| converted);
        let (credited_gate, credited_amount) = match net {
            Some(net) => (target, net),
            None => (source, p.amount.0),
        };
        let settlement = Settlement { next, failure, source, target, net, credited_gate, credited_amount };
        match self.credit(p, inv, conv, settlement).await {
            Err(ConvertError::HouseRefused(reason)) => {
                tracing::info!(payment_id = %p.id, %reason, "conversion refused by the house at settlement");
                let next = conv
                    .state
                    .on(ConversionTrigger::ExecutionRefused)
                    .ok_or_else(|| ConvertError::Invariant(format!("ExecutionRefused on {:?}", conv.state)))?;
                let fallback = Settlement {
                    next,
                    failure: Some(FailureClass::ExecutionRejected.as_str().to_owned()),
                    source,
                    target,
                    net: None,
                    credited_gate: source,
                    credited_amount: p.amount.0,
                };
                self.credit(p, inv, conv, fallback).await
            }
            other => other,
        }
    }

    /// Where the quote goes now (executed at the venue, expired, refused, or left failed) and
    /// why it failed if it did; `None` when there is nothing to settle (abandoned, or settled
    /// by another converter meanwhile).
    async fn verdict(
        &self,
        p: &payment::Model,
        inv: &invoice::Model,
        conv: &settlement_conversion::Model,
    ) -> Result<Option<(ConversionState, Option<String>)>, ConvertError> {
        let confirmed_at = p.confirmed_at.unwrap_or_else(Utc::now);
        // What happens to the quote: `None` keeps its state (a failed quote).
        let (trigger, failure) = match conv.state {
            ConversionState::Quoted if conv.locked_until.is_none_or(|until| confirmed_at > until) => {
                (Some(ConversionTrigger::LockExpired), Some(FailureClass::QuoteExpired.as_str().to_owned()))
            }
            ConversionState::Quoted => {
                let executed = match self.venues.get(p.environment) {
                    Some(v) => v.execute(conv, hint(inv)).await?,
                    None => Executed::Refused(venue::Refusal {
                        class: FailureClass::VenueUnavailable,
                        message: "the venue that quoted is gone".into(),
                    }),
                };
                match executed {
                    Executed::Filled => (Some(ConversionTrigger::Executed), None),
                    Executed::Refused(r) => {
                        tracing::info!(payment_id = %p.id, reason = %r.message, "conversion refused");
                        (Some(ConversionTrigger::ExecutionRefused), Some(r.class.as_str().to_owned()))
                    }
                }
            }
            ConversionState::QuoteFailed => (None, conv.failure_class.clone()),
            ConversionState::Abandoned => return Ok(None),
            ConversionState::Executed | ConversionState::ExecutionFailed | ConversionState::Expired => {
                // Another converter settled it after this one read the payment: nothing to do.
                let credited =
                    payment::Entity::find_by_id(p.id).one(&self.db).await?.is_some_and(|p| p.credited_at.is_some());
                if credited {
                    return Ok(None);
                }
                return Err(ConvertError::Invariant(format!(
                    "payment {} is uncredited but its conversion is {}",
                    p.id,
                    conv.state.as_str()
                )));
            }
        };
        let next = match trigger {
            Some(t) => conv.state.on(t).ok_or_else(|| ConvertError::Invariant(format!("{t:?} on {:?}", conv.state)))?,
            None => conv.state,
        };
        Ok(Some((next, failure)))
    }

    /// One transaction: the payment stamped credited (once: a guarded update), the conversion
    /// moved to its final state, the ledger (converted or in the paid asset; a treasury
    /// conversion also the house's side) and `balance.credited`. `false` when another converter
    /// credited the payment first; `HouseRefused` (nothing written) when the house could not fill.
    async fn credit(
        &self,
        p: &payment::Model,
        inv: &invoice::Model,
        conv: &settlement_conversion::Model,
        s: Settlement,
    ) -> Result<bool, ConvertError> {
        let txn = domain::db::begin_write(&self.db).await?;
        let now = Utc::now();
        // Lock order: the payment (credited once, here), its conversion, then balances.
        let stamped =
            domain::payments::lifecycle::credit(&txn, p.id.into(), s.credited_gate.id, s.credited_amount, now).await?;
        let Some(p) = stamped else {
            txn.rollback().await?;
            return Ok(false);
        };
        domain::payments::fiat::record(&txn, &[(&p, inv)]).await?;
        let moved = settlement_conversion::Entity::update_many()
            .col_expr(settlement_conversion::Column::State, Expr::value(s.next.as_str()))
            .col_expr(settlement_conversion::Column::FailureClass, Expr::value(s.failure.clone()))
            .col_expr(settlement_conversion::Column::SettledAt, Expr::value(now))
            .col_expr(settlement_conversion::Column::UpdatedAt, Expr::value(now))
            .filter(settlement_conversion::Column::PaymentId.eq(p.id))
            .filter(settlement_conversion::Column::State.eq(conv.state))
            .filter(settlement_conversion::Column::SettledAt.is_null())
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            return Err(ConvertError::Invariant(format!("conversion of payment {} moved under a credited lock", p.id)));
        }
        match s.net {
            Some(net) => {
                post_conversion(&txn, &p, inv, s.source, s.target, net, conv).await?;
                if conv.venue == venue::TREASURY {
                    self.post_house_side(&txn, &p, s.source, s.target, net).await?;
                }
            }
            None => {
                ledger::post_credits(
                    &txn,
                    &[ledger::Credit {
                        payment: &p,
                        merchant_id: inv.merchant_id,
                        gate: s.source.id,
                        amount: p.amount.0,
                        release_pending: true,
                    }],
                )
                .await?
            }
        }
        let credit = Credit {
            outcome: if s.next == ConversionState::Executed { "target_credited" } else { "source_credited" },
            failure_class: s.failure.as_deref(),
            credited_gate: s.credited_gate,
            credited_amount: s.credited_amount,
        };
        events::emit_balance_credited(&txn, inv, &p, credit).await?;
        txn.commit().await?;
        Ok(true)
    }
}

impl Converter {
    /// The house's side of a treasury conversion, after the merchant's (every writer takes
    /// merchant balances before the house's, each group in gate-id order): the paid amount into
    /// the house's source balance (`conversion_inventory_in`), the net amount out of its target
    /// balance (`conversion_inventory_out`, refused below zero under the row lock). Then the
    /// exposure cap on the paid asset, read in this transaction; either refusal is `HouseRefused`.
    async fn post_house_side<C: ConnectionTrait>(
        &self,
        txn: &C,
        p: &payment::Model,
        source: &'static Gate,
        target: &'static Gate,
        net: Decimal,
    ) -> Result<(), ConvertError> {
        let reference = Some(("payment", p.id));
        let amount = p.amount.0;
        let inflow = [Posting {
            bucket: Bucket::Available,
            amount,
            entry_type: EntryType::ConversionInventoryIn,
            reference,
            description: Some(format!("converted into {net} {} ({})", target.asset, target.id)),
        }];
        let outflow = [Posting {
            bucket: Bucket::Available,
            amount: -net,
            entry_type: EntryType::ConversionInventoryOut,
            reference,
            description: Some(format!("paid for {amount} {} ({})", source.asset, source.id)),
        }];
        let env = p.environment;
        let (first, second) = if source.id < target.id {
            ((source.id, &inflow[..]), (target.id, &outflow[..]))
        } else {
            ((target.id, &outflow[..]), (source.id, &inflow[..]))
        };
        for (gate, postings) in [first, second] {
            match domain::treasury::post(txn, env, gate, postings).await {
                Ok(_) => {}
                Err(LedgerError::Insufficient { has, needed, .. }) => {
                    return Err(ConvertError::HouseRefused(format!(
                        "the house holds {has} of {gate}, {needed} needed"
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let holdings = domain::treasury::holdings(txn, env).await?;
        let position = domain::treasury::positions(&holdings).get(source.asset).copied().unwrap_or_default();
        domain::treasury::within_cap(self.venues.exposure_caps(), source.asset, position)
            .map_err(|refused| ConvertError::HouseRefused(refused.to_string()))
    }
}

/// How a confirmed payment is settled: the conversion's final state and failure class, and
/// what the merchant is credited (the target asset's net amount when converted, else the paid
/// amount in the paid asset).
struct Settlement {
    next: ConversionState,
    failure: Option<String>,
    source: &'static Gate,
    target: &'static Gate,
    net: Option<Decimal>,
    credited_gate: &'static Gate,
    credited_amount: Decimal,
}

/// The ledger of an executed conversion, all referencing the payment: on the paid gate the
/// pending amount is released and credited (`invoice_credit`) and converted away
/// (`conversion_debit`); on the target gate the net amount arrives (`conversion_credit`) and
/// becomes the invoice's refundable credit. The two balances are locked in gate-id order, as
/// every writer that holds two does, so opposite conversions cannot deadlock.
async fn post_conversion<C: ConnectionTrait>(
    txn: &C,
    p: &payment::Model,
    inv: &invoice::Model,
    source: &'static Gate,
    target: &'static Gate,
    net: Decimal,
    conv: &settlement_conversion::Model,
) -> Result<(), ConvertError> {
    let reference = Some(("payment", p.id));
    let amount = p.amount.0;
    let rate = conv.rate.map_or_else(String::new, |r| r.0.normalize().to_string());
    let source_postings = [
        Posting {
            bucket: Bucket::Pending,
            amount: -amount,
            entry_type: EntryType::InvoiceCredit,
            reference,
            description: Some("deposit confirmed".into()),
        },
        Posting {
            bucket: Bucket::Available,
            amount,
            entry_type: EntryType::InvoiceCredit,
            reference,
            description: None,
        },
        Posting {
            bucket: Bucket::Available,
            amount: -amount,
            entry_type: EntryType::ConversionDebit,
            reference,
            description: Some(format!("converted to {} ({}) at {rate}", target.asset, target.id)),
        },
    ];
    let fee = conv.fee_amount.map_or(Decimal::ZERO, |f| f.0);
    let target_postings = [Posting {
        bucket: Bucket::Available,
        amount: net,
        entry_type: EntryType::ConversionCredit,
        reference,
        description: Some(format!("{amount} {} ({}) at {rate}, fee {fee}", source.asset.to_owned(), source.id)),
    }];
    let (merchant, env) = (MerchantId::from(inv.merchant_id), p.environment);
    if source.id < target.id {
        ledger::post(txn, ledger::Account::of(merchant, env, source.id), &source_postings).await?;
        ledger::post(txn, ledger::Account::of(merchant, env, target.id), &target_postings).await?;
    } else {
        ledger::post(txn, ledger::Account::of(merchant, env, target.id), &target_postings).await?;
        ledger::post(txn, ledger::Account::of(merchant, env, source.id), &source_postings).await?;
    }
    ledger::add_invoice_credit(txn, inv.id.into(), merchant, env, target.id, net).await?;
    Ok(())
}

/// Payments the converter has work for: to invoices that convert, not credited or reversed,
/// and either without a quote or confirmed. Oldest first.
pub async fn due(db: &DatabaseConnection, limit: u64) -> Result<Vec<Uuid>, DbErr> {
    due_query(limit).into_tuple::<Uuid>().all(db).await
}

/// [`due`] as a query: a read of the partial index of uncredited payments (oldest detected
/// first), whatever the number credited before.
pub fn due_query(limit: u64) -> sea_orm::Select<payment::Entity> {
    use sea_orm::QueryOrder;
    use sea_orm::sea_query::ExprTrait;
    payment::Entity::find()
        .select_only()
        .column(payment::Column::Id)
        .join(JoinType::InnerJoin, payment::Relation::Invoice.def())
        .join(JoinType::LeftJoin, settlement_conversion::Relation::Payment.def().rev())
        .filter(payment::Column::CreditedAt.is_null())
        .filter(payment::Column::Status.ne(PaymentStatus::Reversed))
        .filter(invoice::Column::TargetSettlementAsset.ne("passthrough"))
        .filter(
            Expr::col((invoice::Entity, invoice::Column::TargetSettlementAsset))
                .ne(Expr::col((payment::Entity, payment::Column::GateId))),
        )
        .filter(
            Condition::any()
                .add(settlement_conversion::Column::PaymentId.is_null())
                .add(payment::Column::Status.eq(PaymentStatus::Confirmed)),
        )
        .order_by_asc(payment::Column::DetectedAt)
        .limit(limit)
}

/// In the tracker's reversal of an uncredited payment (the payment's row already locked by
/// it): a live quote is abandoned, so it is never executed.
pub async fn abandon<C: ConnectionTrait>(txn: &C, payment_id: Uuid) -> Result<(), DbErr> {
    let Some(next) = ConversionState::Quoted.on(ConversionTrigger::PaymentReversed) else { return Ok(()) };
    let now = Utc::now();
    settlement_conversion::Entity::update_many()
        .col_expr(settlement_conversion::Column::State, Expr::value(next.as_str()))
        .col_expr(settlement_conversion::Column::FailureClass, Expr::value(FailureClass::PaymentReversed.as_str()))
        .col_expr(settlement_conversion::Column::SettledAt, Expr::value(now))
        .col_expr(settlement_conversion::Column::UpdatedAt, Expr::value(now))
        .filter(settlement_conversion::Column::PaymentId.eq(payment_id))
        .filter(settlement_conversion::Column::State.eq(ConversionState::Quoted))
        .exec(txn)
        .await?;
    Ok(())
}
