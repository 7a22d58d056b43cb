//! Static address rules: validation, gate resolution, address allocation, reads.

use chrono::Utc;
use entity::{Amount, StaticAddressId, static_address};
use sea_orm::{ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Select};
use uuid::Uuid;

use super::types::CreateStaticAddressRequest;
use crate::domain_error::{DomainError, DomainResult};
use crate::gates;
use crate::keys::Principal;
use crate::owned::{self, Filter};
use crate::state::AppState;

pub const MAX_LABEL_CHARS: usize = 255;

/// 400-class checks, all collected so the caller sees every problem at once.
fn check_structure(req: &CreateStaticAddressRequest) -> DomainResult<()> {
    let mut p: Vec<String> = Vec::new();
    if req.currency.is_none() {
        p.push("currency: required (an asset code like \"BTC\" or a gate id like \"tron_usdt\")".into());
    }
    for (name, v, max) in [("currency", &req.currency, 20), ("network", &req.network, 64)] {
        if let Some(s) = v {
            if s.is_empty() {
                p.push(format!("{name}: must not be empty"));
            } else if s.chars().count() > max {
                p.push(format!("{name}: at most {max} characters"));
            }
        }
    }
    if let Some(l) = &req.label
        && l.chars().count() > MAX_LABEL_CHARS
    {
        p.push(format!("label: at most {MAX_LABEL_CHARS} characters"));
    }
    if p.is_empty() { Ok(()) } else { Err(DomainError::validation(p)) }
}

/// Creates a static address: a fresh address from the same derivation counters as invoices, so
/// it never coincides with an invoice's address or another static address.
pub async fn create(
    state: &AppState,
    who: &Principal,
    req: CreateStaticAddressRequest,
) -> DomainResult<static_address::Model> {
    check_structure(&req)?;
    let env = who.environment;
    let currency = req.currency.as_deref().ok_or_else(|| DomainError::internal("currency missing after validation"))?;
    let gate = gates::resolve(currency, req.network.as_deref())?;
    state.ensure_online(env, gate)?;
    let allocated = state.addresses.allocate(&state.db, env, gate.family).await?;
    let now = Utc::now();
    let model = static_address::Model {
        id: Uuid::now_v7(),
        merchant_id: who.merchant_id.into(),
        environment: env,
        gate_id: gate.id.to_owned(),
        currency: gate.asset.to_owned(),
        network: gate.network.to_owned(),
        address: allocated.address,
        address_tag: allocated.tag,
        address_key: allocated.key,
        derivation_index: allocated.index,
        label: req.label,
        total_received: Amount::ZERO,
        invoice_count: 0,
        created_at: now,
        updated_at: now,
    };
    static_address::Entity::insert(model.clone().into_active_model()).exec_without_returning(&state.db).await?;
    Ok(model)
}

/// A static address of the caller's merchant and environment; anything else is 404.
pub async fn get(state: &AppState, who: &Principal, id: StaticAddressId) -> DomainResult<static_address::Model> {
    owned::get::<static_address::Entity>(&state.db, who, id).await
}

#[derive(Debug, Default)]
pub struct ListFilter {
    /// An asset code (`USDT`) or a gate id (`tron_usdt`).
    pub currency: Option<String>,
    pub network: Option<String>,
}

impl Filter<static_address::Entity> for ListFilter {
    fn apply(&self, mut q: Select<static_address::Entity>) -> Select<static_address::Entity> {
        if let Some(c) = &self.currency {
            q = q.filter(owned::currency_is(static_address::Column::GateId, static_address::Column::Currency, c));
        }
        if let Some(n) = &self.network {
            q = q.filter(static_address::Column::Network.eq(n.as_str()));
        }
        q
    }

    fn tally(&self) -> Option<crate::list_counts::Tally> {
        use crate::list_counts::{Key, List, Tally};
        let (gate_id, currency) = self.currency.as_deref().map(owned::currency_key).unwrap_or_default();
        let key = Key { gate_id, currency, network: self.network.clone(), ..Key::default() };
        Some(Tally::new(List::StaticAddresses, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structure_checks_name_fields() {
        let details = check_structure(&CreateStaticAddressRequest::default()).unwrap_err().details;
        assert!(details.iter().any(|d| d.starts_with("currency:")), "{details:?}");
        let req = CreateStaticAddressRequest {
            currency: Some("x".repeat(21)),
            network: Some(String::new()),
            label: Some("l".repeat(MAX_LABEL_CHARS + 1)),
        };
        let details = check_structure(&req).unwrap_err().details;
        for f in ["currency:", "network:", "label:"] {
            assert!(details.iter().any(|d| d.starts_with(f)), "{f} in {details:?}");
        }
        // 255 characters, multi-byte ones included, is the limit.
        let ok = CreateStaticAddressRequest {
            currency: Some("BTC".into()),
            label: Some("é".repeat(MAX_LABEL_CHARS)),
            ..Default::default()
        };
        assert!(check_structure(&ok).is_ok());
    }
}
