/** True when any `v1` in X-Service-Signature is the HMAC-SHA256 of `<t>.<raw body>` under one of
 * `secrets` (two while a rotation runs) and `t` is within `tolerance` seconds. Web Crypto: Node 20+,
 * Deno, browsers, edge workers; `crypto.subtle.verify` compares in constant time. */
export async function verify(header: string, body: string, secrets: string[], now = Date.now() / 1000, tolerance = 300): Promise<boolean> {
  const parts = header.split(",").map((p) => p.trim().split("=", 2));
  const t = parts.find(([k]) => k === "t")?.[1] ?? "";
  const sigs = parts.filter(([k, v]) => k === "v1" && /^([0-9a-f]{2})+$/.test(v ?? "")).map(([, v]) => v);
  if (!/^[0-9]+$/.test(t) || sigs.length === 0 || Math.abs(now - Number(t)) > tolerance) return false;
  const signed = new TextEncoder().encode(`${t}.${body}`);
  for (const secret of secrets) {
    const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
    for (const sig of sigs) {
      const bytes = new Uint8Array(sig.match(/../g)!.map((h) => parseInt(h, 16)));
      if (await crypto.subtle.verify("HMAC", key, bytes, signed)) return true;
    }
  }
  return false;
}

// Run by .ci/clients/run on .ci/clients/webhook-rotation.json (passed as `vector`): a delivery
// signed with both secrets of a rotation verifies with either, and with nothing else.
// docs/integrating.md shows `verify`.
export async function checkRotation(v: { t: number; body: string; header: string; old_secret: string; new_secret: string }): Promise<string[]> {
  const { t, body, header: h, old_secret: old, new_secret: fresh } = v;
  const cases: [boolean, string][] = [
    [h.split("v1=").length === 3, "the header carries two v1 values"],
    [await verify(h, body, [old], t), "the old secret verifies"],
    [await verify(h, body, [fresh], t), "the new secret verifies"],
    [await verify(h, body, [fresh, old], t + 300), "both secrets, 300 s later"],
    [!(await verify(h, body, ["whsec_other"], t)), "another secret does not"],
    [!(await verify(h, body.replace("paid", "PAID"), [old, fresh], t)), "a changed body does not"],
    [!(await verify(h, body, [old], t + 301)), "a stale delivery does not"],
  ];
  return cases.filter(([ok]) => !ok).map(([, what]) => what);
}
