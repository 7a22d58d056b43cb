//! Conversion venues: where a payment's asset is exchanged for the invoice's settlement asset.
//! A venue quotes (a rate, the gross, fee and net target amounts, and how long the quote holds)
//! and later executes a quote it gave. The test environment has the sandbox venue, priced from
//! the rates provider. The live environment has the `treasury` venue when
//! `settlement.live_venue = "treasury"` (priced the same way from the live rates, filled from the
//! house account's inventory within its exposure caps: `domain::treasury`), else none.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use entity::{Environment, settlement_conversion};
use rust_decimal::{Decimal, RoundingStrategy};
use sea_orm::DatabaseConnection;
use uuid::Uuid;

use domain::config::{Config, SandboxVenueConfig, TreasuryVenueConfig};
use domain::gates::{self, Gate};
use domain::rates::Rates;
use domain::treasury;

/// Why a conversion did not happen (`failure_class`, and `balance.credited`'s too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// No fresh price for one of the two assets.
    RateUnavailable,
    /// The venue refused to quote.
    QuoteRejected,
    /// After the fee, nothing would be left.
    AmountTooSmall,
    /// No venue serves this environment.
    VenueUnavailable,
    /// The payment was confirmed after the quote's `locked_until`.
    QuoteExpired,
    /// The venue refused to execute the quote.
    ExecutionRejected,
    /// The payment was reversed before it was credited.
    PaymentReversed,
}

impl FailureClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::RateUnavailable => "rate_unavailable",
            FailureClass::QuoteRejected => "quote_rejected",
            FailureClass::AmountTooSmall => "amount_too_small",
            FailureClass::VenueUnavailable => "venue_unavailable",
            FailureClass::QuoteExpired => "quote_expired",
            FailureClass::ExecutionRejected => "execution_rejected",
            FailureClass::PaymentReversed => "payment_reversed",
        }
    }
}

/// A venue's "no", with the reason for logs and operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub class: FailureClass,
    pub message: String,
}

/// What to quote.
#[derive(Debug, Clone)]
pub struct QuoteRequest<'a> {
    pub environment: Environment,
    pub source: &'static Gate,
    pub target: &'static Gate,
    pub amount: Decimal,
    /// The payment: the venue's client reference, so a repeated request is recognisable.
    pub reference: Uuid,
    pub now: DateTime<Utc>,
    /// How long the quote should hold.
    pub lock: chrono::Duration,
    /// The invoice's `metadata.sandbox_conversion` (the sandbox venue's forced outcomes).
    pub hint: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    /// Target units per source unit, spread included.
    pub rate: Decimal,
    pub gross: Decimal,
    pub fee: Decimal,
    pub net: Decimal,
    pub locked_until: DateTime<Utc>,
    pub venue_ref: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quoted {
    Quote(Quote),
    Refused(Refusal),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// The venue filled the quote: `net` of the target asset is the merchant's.
    Filled,
    Refused(Refusal),
}

/// A venue could not be asked (network, outage): the job is retried.
#[derive(Debug, thiserror::Error)]
#[error("venue error: {0}")]
pub struct VenueError(pub String);

#[async_trait::async_trait]
pub trait Venue: Send + Sync {
    fn name(&self) -> &'static str;
    async fn quote(&self, req: &QuoteRequest<'_>) -> Result<Quoted, VenueError>;
    /// Executes a quote this venue gave. Must be idempotent per payment: asked twice, it fills
    /// once.
    async fn execute(&self, quote: &settlement_conversion::Model, hint: Option<&str>) -> Result<Executed, VenueError>;
}

/// The venue of each environment.
#[derive(Clone)]
pub struct Venues {
    test: Option<Arc<dyn Venue>>,
    live: Option<Arc<dyn Venue>>,
    /// `settlement.treasury.max_exposure`, checked again in the credit's transaction.
    caps: Arc<std::collections::BTreeMap<String, Decimal>>,
}

impl Venues {
    /// The sandbox venue for test (priced from `rates`); for live, the `treasury` venue when
    /// `settlement.live_venue = "treasury"` (it reads the house's inventory from `db`), else none.
    pub fn from_config(cfg: &Config, rates: Rates, db: &DatabaseConnection) -> Venues {
        let live: Option<Arc<dyn Venue>> = match cfg.settlement.live_venue.as_str() {
            TREASURY => Some(Arc::new(TreasuryVenue {
                rates: rates.clone(),
                cfg: cfg.settlement.treasury.clone(),
                db: db.clone(),
            })),
            _ => None,
        };
        Venues {
            test: Some(Arc::new(SandboxVenue { rates, cfg: cfg.settlement.sandbox.clone() })),
            live,
            caps: Arc::new(cfg.settlement.treasury.max_exposure.clone()),
        }
    }

    /// These venues with `live` serving the live environment (a test's own venue).
    pub fn with_live(self, live: Arc<dyn Venue>) -> Venues {
        Venues { live: Some(live), ..self }
    }

    /// The treasury venue's per-asset exposure caps.
    pub fn exposure_caps(&self) -> &std::collections::BTreeMap<String, Decimal> {
        &self.caps
    }

    pub fn get(&self, env: Environment) -> Option<&Arc<dyn Venue>> {
        match env {
            Environment::Test => self.test.as_ref(),
            Environment::Live => self.live.as_ref(),
        }
    }
}

/// `metadata.sandbox_conversion` values the sandbox venue obeys.
pub mod hint {
    /// The quote is refused (`quote_rejected`).
    pub const FAIL_QUOTE: &str = "fail_quote";
    /// The quote's lock ends the moment it is given, so it has expired by the credit
    /// (`quote_expired`).
    pub const EXPIRE_QUOTE: &str = "expire_quote";
    /// The quote is given but its execution refused (`execution_rejected`).
    pub const FAIL_EXECUTION: &str = "fail_execution";
}

/// The test environment's venue: mid rate from the rates provider (both assets priced in
/// `pricing_fiat`), less `spread_percent`; fee `fee_percent` of the gross. Quotes hold for the
/// requested lock. Execution always fills, unless the invoice's metadata forces otherwise.
pub struct SandboxVenue {
    pub rates: Rates,
    pub cfg: SandboxVenueConfig,
}

#[async_trait::async_trait]
impl Venue for SandboxVenue {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    async fn quote(&self, req: &QuoteRequest<'_>) -> Result<Quoted, VenueError> {
        if req.hint == Some(hint::FAIL_QUOTE) {
            return Ok(Quoted::Refused(Refusal {
                class: FailureClass::QuoteRejected,
                message: format!("refused as asked by metadata.sandbox_conversion = {:?}", hint::FAIL_QUOTE),
            }));
        }
        let margins = Margins { spread_percent: self.cfg.spread_percent, fee_percent: self.cfg.fee_percent };
        let p = match priced(&self.rates, req, &self.cfg.pricing_fiat, margins) {
            Ok(p) => p,
            Err(refusal) => return Ok(Quoted::Refused(refusal)),
        };
        let lock = if req.hint == Some(hint::EXPIRE_QUOTE) { chrono::Duration::zero() } else { req.lock };
        Ok(Quoted::Quote(Quote {
            rate: p.rate,
            gross: p.gross,
            fee: p.fee,
            net: p.net,
            locked_until: req.now + lock,
            venue_ref: Some(format!("sandbox-quote-{}", req.reference)),
        }))
    }

    async fn execute(&self, _quote: &settlement_conversion::Model, hint: Option<&str>) -> Result<Executed, VenueError> {
        Ok(if hint == Some(hint::FAIL_EXECUTION) {
            Executed::Refused(Refusal {
                class: FailureClass::ExecutionRejected,
                message: format!("refused as asked by metadata.sandbox_conversion = {:?}", hint::FAIL_EXECUTION),
            })
        } else {
            Executed::Filled
        })
    }
}

/// `settlement_conversion.venue` of the live treasury venue.
pub const TREASURY: &str = "treasury";

/// The live environment's venue: the operator converts from its own inventory (the house
/// account, `domain::treasury`). Priced like the sandbox venue from the live rates provider
/// (`settlement.treasury`); a quote, and again its execution, is refused when the house holds
/// less of the target gate than the net amount, or when taking the paid asset would put the
/// house's position in it past `max_exposure` (an asset without a cap is never taken). The
/// converter posts the house's side (`conversion_inventory_in`/`_out`) in the credit's own
/// transaction, where the house's target balance is locked and refused below zero, so two
/// conversions can never spend one unit of inventory twice.
pub struct TreasuryVenue {
    pub rates: Rates,
    pub cfg: TreasuryVenueConfig,
    pub db: DatabaseConnection,
}

impl TreasuryVenue {
    /// Whether the house can fill it now (read outside any transaction: the converter's credit
    /// transaction checks the inventory again under its lock).
    async fn check(
        &self,
        source: &'static Gate,
        amount: Decimal,
        target: &'static Gate,
        net: Decimal,
    ) -> Result<(), VenueError> {
        let holdings = treasury::holdings(&self.db, Environment::Live).await.map_err(|e| VenueError(e.to_string()))?;
        treasury::can_fill(&holdings, &self.cfg.max_exposure, source, amount, target, net)
            .map_err(|refused| VenueError(refused.to_string()))
    }
}

#[async_trait::async_trait]
impl Venue for TreasuryVenue {
    fn name(&self) -> &'static str {
        TREASURY
    }

    async fn quote(&self, req: &QuoteRequest<'_>) -> Result<Quoted, VenueError> {
        let margins = Margins { spread_percent: self.cfg.spread_percent, fee_percent: self.cfg.fee_percent };
        let p = match priced(&self.rates, req, &self.cfg.pricing_fiat, margins) {
            Ok(p) => p,
            Err(refusal) => return Ok(Quoted::Refused(refusal)),
        };
        let holdings = treasury::holdings(&self.db, Environment::Live).await.map_err(|e| VenueError(e.to_string()))?;
        if let Err(refused) =
            treasury::can_fill(&holdings, &self.cfg.max_exposure, req.source, req.amount, req.target, p.net)
        {
            return Ok(Quoted::Refused(Refusal { class: FailureClass::QuoteRejected, message: refused.to_string() }));
        }
        Ok(Quoted::Quote(Quote {
            rate: p.rate,
            gross: p.gross,
            fee: p.fee,
            net: p.net,
            locked_until: req.now + req.lock,
            venue_ref: Some(format!("treasury-quote-{}", req.reference)),
        }))
    }

    /// Read-only, so asking twice fills once: the fill itself is the converter's ledger posting.
    async fn execute(&self, quote: &settlement_conversion::Model, _hint: Option<&str>) -> Result<Executed, VenueError> {
        let (Some(source), Some(target), Some(net)) =
            (gates::find(&quote.source_gate_id), gates::find(&quote.target_gate_id), quote.net_amount)
        else {
            return Err(VenueError(format!("conversion {} has no gates or net amount", quote.payment_id)));
        };
        Ok(match self.check(source, quote.source_amount.0, target, net.0).await {
            Ok(()) => Executed::Filled,
            Err(VenueError(message)) => Executed::Refused(Refusal { class: FailureClass::ExecutionRejected, message }),
        })
    }
}

/// A venue's spread and fee, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Margins {
    pub spread_percent: Decimal,
    pub fee_percent: Decimal,
}

/// The rates provider's prices of both assets in `fiat`, priced with `margins`; refused when a
/// price is missing or nothing is left after the fee.
fn priced(rates: &Rates, req: &QuoteRequest<'_>, fiat: &str, margins: Margins) -> Result<Priced, Refusal> {
    let (Some(src), Some(tgt)) =
        (rates.get(req.environment, req.source.asset, fiat), rates.get(req.environment, req.target.asset, fiat))
    else {
        return Err(Refusal {
            class: FailureClass::RateUnavailable,
            message: format!("no fresh {fiat} price for {} or {}", req.source.asset, req.target.asset),
        });
    };
    price(src.rate, tgt.rate, req.amount, margins, req.target.decimals).ok_or_else(|| Refusal {
        class: FailureClass::AmountTooSmall,
        message: format!("{} {} converts to nothing after the fee", req.amount, req.source.asset),
    })
}

/// The amounts of a conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priced {
    pub rate: Decimal,
    pub gross: Decimal,
    pub fee: Decimal,
    pub net: Decimal,
}

/// Digits the quoted rate keeps.
const RATE_DP: u32 = 12;

/// `rate` = source price / target price × (1 − spread), to 12 places; `gross` = amount × rate
/// rounded down to the target's decimals; `fee` = gross × fee percent rounded up; `net` =
/// gross − fee. `None` when net would not be positive (or on overflow).
pub fn price(
    source_price: Decimal,
    target_price: Decimal,
    amount: Decimal,
    cfg: Margins,
    target_decimals: u32,
) -> Option<Priced> {
    let hundred = Decimal::ONE_HUNDRED;
    let rate = source_price
        .checked_mul(hundred.checked_sub(cfg.spread_percent)?)?
        .checked_div(target_price.checked_mul(hundred)?)?
        .round_dp_with_strategy(RATE_DP, RoundingStrategy::ToZero);
    let gross = amount.checked_mul(rate)?.round_dp_with_strategy(target_decimals, RoundingStrategy::ToZero);
    let fee = gross
        .checked_mul(cfg.fee_percent)?
        .checked_div(hundred)?
        .round_dp_with_strategy(target_decimals, RoundingStrategy::AwayFromZero);
    let net = gross.checked_sub(fee)?;
    (net > Decimal::ZERO).then_some(Priced { rate, gross, fee, net })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn cfg(spread: &str, fee: &str) -> Margins {
        Margins { spread_percent: d(spread), fee_percent: d(fee) }
    }

    #[test]
    fn btc_to_usdt_at_the_sandbox_defaults() {
        // 60 000 USD per BTC, 1 USD per USDT, 0.5 % spread, 0.25 % fee.
        let p = price(d("60000"), d("1"), d("0.01"), cfg("0.5", "0.25"), 6).unwrap();
        assert_eq!(p.rate, d("59700"));
        assert_eq!(p.gross, d("597"));
        assert_eq!(p.fee, d("1.4925"));
        assert_eq!(p.net, d("595.5075"));
        assert_eq!(p.gross - p.fee, p.net);
    }

    #[test]
    fn gross_rounds_down_and_fee_rounds_up_to_the_target_decimals() {
        // 1 USDT -> BTC at 60 000: rate 0.0000166666666666… kept to 12 places.
        let p = price(d("1"), d("60000"), d("7"), cfg("0", "1"), 8).unwrap();
        assert_eq!(p.rate, d("0.000016666666"));
        assert_eq!(p.gross, d("0.00011666"));
        // 1 % of 0.00011666 is 0.0000011666: rounded up.
        assert_eq!(p.fee, d("0.00000117"));
        assert_eq!(p.net, d("0.00011549"));
        for v in [p.gross, p.fee, p.net] {
            assert!(v.scale() <= 8, "{v}");
        }
    }

    #[test]
    fn nothing_left_after_the_fee_is_no_quote() {
        assert_eq!(price(d("1"), d("60000"), d("0.0000001"), cfg("0", "1"), 8), None);
        // A 99 % fee on a dust amount rounds the fee up to the whole gross.
        assert_eq!(price(d("1"), d("1"), d("0.000001"), cfg("0", "99"), 6), None);
    }

    fn rates() -> Rates {
        Rates::new(&domain::config::RatesConfig::default())
    }

    fn req<'a>(hint: Option<&'a str>, now: DateTime<Utc>) -> QuoteRequest<'a> {
        QuoteRequest {
            environment: Environment::Test,
            source: domain::gates::find("bitcoin").unwrap(),
            target: domain::gates::find("tron_usdt").unwrap(),
            amount: d("0.01"),
            reference: Uuid::nil(),
            now,
            lock: chrono::Duration::seconds(900),
            hint,
        }
    }

    #[tokio::test]
    async fn the_sandbox_venue_prices_from_the_rates_provider_and_obeys_hints() {
        let r = rates();
        let v = SandboxVenue {
            rates: r.clone(),
            cfg: SandboxVenueConfig { spread_percent: d("0.5"), fee_percent: d("0.25"), pricing_fiat: "USD".into() },
        };
        let now = Utc::now();
        // No rates fetched yet: refused, not guessed.
        let Quoted::Refused(no_rate) = v.quote(&req(None, now)).await.unwrap() else { panic!("quoted without rates") };
        assert_eq!(no_rate.class, FailureClass::RateUnavailable);
        r.refresh(Environment::Test).await.unwrap();
        let Quoted::Quote(q) = v.quote(&req(None, now)).await.unwrap() else { panic!("refused") };
        assert_eq!((q.rate, q.net), (d("59700"), d("595.5075")));
        assert_eq!(q.locked_until, now + chrono::Duration::seconds(900));
        let Quoted::Quote(q) = v.quote(&req(Some(hint::EXPIRE_QUOTE), now)).await.unwrap() else { panic!() };
        assert_eq!(q.locked_until, now);
        let Quoted::Refused(f) = v.quote(&req(Some(hint::FAIL_QUOTE), now)).await.unwrap() else { panic!() };
        assert_eq!(f.class, FailureClass::QuoteRejected);
    }
}
