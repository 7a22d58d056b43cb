import os, time
from paygate_merchant_api_client import AuthenticatedClient
from paygate_merchant_api_client.api.invoices import create_invoice, get_invoice, list_invoices
from paygate_merchant_api_client.models import CreateInvoiceRequest, Currency, InvoiceStatus, Metadata

client = AuthenticatedClient(base_url=os.environ["PAYGATE_URL"], token=os.environ["PAYGATE_KEY"], prefix="", auth_header_name="X-API-Key")
body = CreateInvoiceRequest(currency=Currency.BTC, amount="0.001", metadata=Metadata.from_dict({"order": "A-1", "n": 3}))
invoice = create_invoice.sync(client=client, body=body).data
print("pay at", invoice.checkout_url)
assert invoice.metadata.to_dict() == {"order": "A-1", "n": 3}

# A merchant's checkout flow with the client openapi-python-client generates from /openapi.json,
# run by .ci/clients/run against `ops serve` (PAYGATE_URL the server, PAYGATE_KEY a test key).
# The ten lines above are the ones docs/integrating.md shows. Every step below checks what a
# merchant relies on; a surprise exits non-zero with the reason.

from paygate_merchant_api_client.api.balances import list_balances
from paygate_merchant_api_client.api.events import list_events
from paygate_merchant_api_client.api.payouts import create_payout
from paygate_merchant_api_client.api.test_helpers import simulate_deposit
from paygate_merchant_api_client.models import (
    CreatePayoutRequest,
    ErrorCode,
    ErrorEnvelope,
    ListEventsType,
    PayoutStatus,
    SimulateDepositRequest,
)


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"FLOW FAILED: {what}")


# The metadata comes back as it was sent, through the generated model.
check(invoice.status == InvoiceStatus.PENDING, f"a new invoice is pending, not {invoice.status}")
check(invoice.metadata.to_dict() == {"order": "A-1", "n": 3}, f"metadata read back {invoice.metadata.to_dict()}")
read = get_invoice.sync(client=client, invoice_id=invoice.id).data
check(read.metadata.to_dict() == {"order": "A-1", "n": 3}, f"metadata read again {read.metadata.to_dict()}")

# Pay it in the sandbox and wait until the confirmations make it paid.
paid = simulate_deposit.sync(client=client, body=SimulateDepositRequest(invoice_id=invoice.id, amount="0.001"))
check(not isinstance(paid, ErrorEnvelope), f"test deposit refused: {paid}")
deadline = time.monotonic() + 120
while (status := get_invoice.sync(client=client, invoice_id=invoice.id).data.status) != InvoiceStatus.PAID:
    check(time.monotonic() < deadline, f"the invoice never became paid (still {status})")
    time.sleep(0.5)

# It is listed, the balance holds it, and the event log has its invoice.paid.
page = list_invoices.sync(client=client, limit=100)
check(any(i.id == invoice.id for i in page.data), "the paid invoice is not listed")
check(page.meta.pagination is not None and page.meta.pagination.total >= 1, "the list has no pagination")
btc = [b for b in list_balances.sync(client=client).data if b.gate_id == "bitcoin"]
check(len(btc) == 1 and float(btc[0].available) >= 0.001, f"bitcoin balance {btc}")
events = list_events.sync(client=client, type_=ListEventsType.INVOICE_PAID, invoice_id=invoice.id).data
check(len(events) == 1 and events[0].data["invoice_id"] == str(invoice.id), f"invoice.paid events {events}")

# A payout from that balance.
payout = create_payout.sync(
    client=client,
    body=CreatePayoutRequest(currency=Currency.BTC, amount="0.0005", destination="tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"),
)
check(not isinstance(payout, ErrorEnvelope), f"payout refused: {payout}")
check(payout.data.status in (PayoutStatus.PENDING_APPROVAL, PayoutStatus.APPROVED), f"payout is {payout.data.status}")

# A refused body comes back as the typed error envelope, naming the field.
refused = create_invoice.sync(client=client, body=CreateInvoiceRequest(currency=Currency.BTC, amount="1000"))
check(isinstance(refused, ErrorEnvelope), f"an amount over the gate's maximum was accepted: {refused}")
check(refused.error.code == ErrorCode.AMOUNT_OUT_OF_RANGE, f"error code {refused.error.code}")
check(any("amount" in d for d in refused.error.details) or "amount" in refused.error.message, f"{refused.error}")
print(f"python flow passed: invoice {invoice.id} paid, payout {payout.data.id} {payout.data.status}")
