//! The merchant's approval of its payouts in the dashboard (spec 3.2), where the operator
//! handed it over (`merchant_approves`): the operator's guarded transition, refused otherwise.

use entity::PayoutId;
use entity::payout;

use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::keys::Principal;
use crate::state::AppState;

/// The merchant's approval of a payout waiting for it (spec 3.2: approved in the dashboard
/// before execution), where the merchant's settings say the merchant approves
/// (`merchant_approves`); otherwise the operator does (`ops payouts approve`). The same
/// guarded transition as the operator's: `executable_at` = now + the merchant's delay.
pub async fn approve_by_merchant(state: &AppState, who: &Principal, id: PayoutId) -> DomainResult<payout::Model> {
    let p = super::service::get(state, who, id).await?;
    if !super::service::settings(&state.db, who.merchant_id, who.environment).await?.merchant_approves {
        return Err(DomainError::forbidden(
            "payouts of this merchant are approved by the operator, not in the dashboard",
            vec!["merchant_approves: off (ops payouts settings --merchant-approves true)".into()],
        ));
    }
    match super::operator::approve(&state.db, p.id.into()).await {
        Ok(after) => Ok(after),
        Err(super::operator::OperatorError::WrongStatus { status, .. }) => Err(DomainError::conflict(
            ErrorCode::PayoutNotApprovable,
            format!("only a pending_approval payout can be approved; this one is {status}"),
        )),
        Err(super::operator::OperatorError::NotFound(_)) => Err(DomainError::not_found("payout")),
        Err(super::operator::OperatorError::Failed(e)) => Err(DomainError::internal(e)),
    }
}
