import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

const api = createClient<paths>({ baseUrl: process.env.PAYGATE_URL, headers: { "X-API-Key": process.env.PAYGATE_KEY } });
const metadata: components["schemas"]["Metadata"] = { order: "A-1", n: 3 };
const created = await api.POST("/v1/invoices", { body: { currency: "BTC", amount: "0.001", metadata } });
if (!created.data) throw new Error(`refused: ${created.error?.error.code}`);
const invoice = created.data.data;
console.log("pay at", invoice.checkout_url);
check(invoice.metadata?.order === "A-1" && invoice.metadata?.n === 3, "metadata read back");

// A merchant's checkout flow with openapi-typescript's types for /openapi.json and openapi-fetch,
// type-checked by `tsc --strict` and run by .ci/clients/run against `ops serve` (PAYGATE_URL the
// server, PAYGATE_KEY a test key). The ten lines above are the ones docs/integrating.md shows.
// Every step below checks what a merchant relies on; a surprise exits non-zero with the reason.

import { checkRotation } from "./verify.js";

declare const process: { env: Record<string, string | undefined>; exit(code: number): never };

function check(ok: boolean, what: string): void {
  if (!ok) {
    console.error(`FLOW FAILED: ${what}`);
    process.exit(1);
  }
}

function sameMetadata(m: components["schemas"]["Metadata"] | null | undefined): boolean {
  return m != null && Object.keys(m).length === 2 && m.order === "A-1" && m.n === 3;
}
check(sameMetadata(invoice.metadata), `metadata read back: ${JSON.stringify(invoice.metadata)}`);
check(invoice.status === "pending", `a new invoice is pending, not ${invoice.status}`);
const read = await api.GET("/v1/invoices/{invoice_id}", { params: { path: { invoice_id: invoice.id } } });
check(sameMetadata(read.data?.data.metadata), `metadata read again: ${JSON.stringify(read.data?.data.metadata)}`);

// Pay it in the sandbox and wait until the confirmations make it paid.
const deposit = await api.POST("/v1/test/deposits", { body: { invoice_id: invoice.id, amount: "0.001" } });
check(deposit.data !== undefined, `test deposit refused: ${JSON.stringify(deposit.error)}`);
const deadline = Date.now() + 120_000;
for (;;) {
  const now = await api.GET("/v1/invoices/{invoice_id}", { params: { path: { invoice_id: invoice.id } } });
  const status: components["schemas"]["InvoiceStatus"] | undefined = now.data?.data.status;
  if (status === "paid") break;
  check(Date.now() < deadline, `the invoice never became paid (still ${status})`);
  await new Promise((r) => setTimeout(r, 500));
}

// It is listed, the balance holds it, and the event log has its invoice.paid.
const page = await api.GET("/v1/invoices", { params: { query: { limit: 100 } } });
check(page.data?.data.some((i) => i.id === invoice.id) === true, "the paid invoice is not listed");
check((page.data?.meta.pagination?.total ?? 0) >= 1, "the list has no pagination");
const balances = await api.GET("/v1/balances");
const btc = balances.data?.data.filter((b) => b.gate_id === "bitcoin") ?? [];
check(btc.length === 1 && Number(btc[0].available) >= 0.001, `bitcoin balance ${JSON.stringify(btc)}`);
const events = await api.GET("/v1/events", { params: { query: { type: "invoice.paid", invoice_id: invoice.id } } });
const paidEvents = events.data?.data ?? [];
check(paidEvents.length === 1 && paidEvents[0].data["invoice_id"] === invoice.id, `invoice.paid events ${JSON.stringify(paidEvents)}`);

// A payout from that balance.
const payout = await api.POST("/v1/payouts", {
  body: { currency: "BTC", amount: "0.0005", destination: "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx" },
});
check(payout.data !== undefined, `payout refused: ${JSON.stringify(payout.error)}`);
const payoutStatus: components["schemas"]["PayoutStatus"] | undefined = payout.data?.data.status;
check(payoutStatus === "pending_approval" || payoutStatus === "approved", `payout is ${payoutStatus}`);

// A refused body comes back as the typed error envelope, naming the field.
const refused = await api.POST("/v1/invoices", { body: { currency: "BTC", amount: "1000" } });
const code: components["schemas"]["ErrorCode"] | undefined = refused.error?.error.code;
check(refused.data === undefined && code === "amount_out_of_range", `an amount over the gate's maximum: ${code}`);
check(refused.error?.error.details.some((d) => d.includes("amount")) === true, JSON.stringify(refused.error));
console.log(`typescript flow passed: invoice ${invoice.id} paid, payout ${payout.data?.data.id} ${payoutStatus}`);

// The webhook verifier docs/integrating.md shows, on a delivery signed during a rotation.
const failed = await checkRotation(JSON.parse(process.env.WEBHOOK_VECTOR ?? "{}"));
check(failed.length === 0, `typescript webhook verification: ${failed.join("; ")}`);
console.log("typescript webhook verification: passed");
