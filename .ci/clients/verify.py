import hashlib, hmac, time


def verify(header: str, body: bytes, secrets: list[bytes], now: float | None = None, tolerance: int = 300) -> bool:
    """True when any `v1` in X-Service-Signature is the HMAC-SHA256 of `<t>.<raw body>` under
    one of `secrets` (two while a rotation runs) and `t` is within `tolerance` seconds."""
    parts = [p.strip().split("=", 1) for p in header.split(",") if "=" in p]
    ts = [v for k, v in parts if k == "t"]
    sigs = [v for k, v in parts if k == "v1"]
    if not ts or not ts[0].isdigit() or not sigs or abs((now or time.time()) - int(ts[0])) > tolerance:
        return False
    signed = ts[0].encode() + b"." + body
    expected = [hmac.new(s, signed, hashlib.sha256).hexdigest() for s in secrets]
    return any(hmac.compare_digest(e, v) for e in expected for v in sigs)


# Run by .ci/clients/run on .ci/clients/webhook-rotation.json: a delivery signed with both secrets
# of a rotation verifies with either, and with nothing else. docs/integrating.md shows `verify`.
if __name__ == "__main__":
    import json, pathlib, sys

    v = json.loads((pathlib.Path(__file__).parent / "webhook-rotation.json").read_text())
    h, body, t = v["header"], v["body"].encode(), v["t"]
    old, new = v["old_secret"].encode(), v["new_secret"].encode()
    cases = [
        (h.count("v1=") == 2, "the header carries two v1 values"),
        (verify(h, body, [old], now=t), "the old secret verifies"),
        (verify(h, body, [new], now=t), "the new secret verifies"),
        (verify(h, body, [new, old], now=t + 300), "both secrets, 300 s later"),
        (not verify(h, body, [b"whsec_other"], now=t), "another secret does not"),
        (not verify(h, body.replace(b"paid", b"PAID"), [old, new], now=t), "a changed body does not"),
        (not verify(h, body, [old], now=t + 301), "a stale delivery does not"),
    ]
    failed = [what for ok, what in cases if not ok]
    print("python webhook verification:", "FAILED: " + "; ".join(failed) if failed else "passed")
    sys.exit(1 if failed else 0)
