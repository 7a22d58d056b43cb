#!/usr/bin/env python3
"""A Solana JSON-RPC node for the tests, on solders' LiteSVM: transactions run against the real
System, SPL Token and Associated Token Account programs.

It serves the methods the live adapter calls (getSlot, getBlocks, getBlock jsonParsed,
getSignatureStatuses, minimumLedgerSlot, getLatestBlockhash, getEpochInfo, sendTransaction with
preflight, getTransaction, getBalance, getTokenAccountBalance: "could not find account" for a
missing account, as the cluster answers) over slots the test produces and finalizes (block height = slot),
and test switches as `shim_*` methods: fund an account, create the mint, pay SOL or tokens from
a payer of its own, freeze an owner's token account (the mint's freeze authority is that payer),
produce and finalize slots, lose what is sent, put what is sent next on a
fork that is later dropped (its accounts restored: confirmed, never finalized), read balances.

Started by `workers/tests/support/litesvm.rs`: prints `port <n>` once it listens on
127.0.0.1:<n>. Needs `pip install solders==0.29.0`.
"""

import base64
import json
import struct
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from solders.account import Account
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.litesvm import LiteSVM
from solders.message import Message
from solders.pubkey import Pubkey
from solders.system_program import ID as SYSTEM
from solders.system_program import CreateAccountParams, TransferParams, create_account, transfer
from solders.token.associated import get_associated_token_address
from solders.transaction import Transaction
from solders.transaction_metadata import FailedTransactionMetadata

TOKEN = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
ATA_PROGRAM = Pubkey.from_string("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
VALIDITY = 150


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.error = {"code": code, "message": message}
        if data is not None:
            self.error["data"] = data


def err_json(err):
    """A TransactionError as the RPC writes it: `"BlockhashNotFound"`,
    `{"InstructionError": [0, {"Custom": 1}]}`, `{"InsufficientFundsForRent": {"account_index": 1}}`."""
    name = type(err).__name__
    if name == "TransactionErrorFieldless":
        return str(err).split(".")[-1]
    variant = name.removeprefix("TransactionError")
    if variant == "InstructionError":
        index, inner = err.index, err.err
        inner_name = type(inner).__name__.removeprefix("InstructionError")
        if inner_name == "Fieldless":
            return {"InstructionError": [index, str(inner).split(".")[-1]]}
        return {"InstructionError": [index, {inner_name: json.loads(inner.to_json())}]}
    if variant == "InsufficientFundsForRent":
        return {"InsufficientFundsForRent": {"account_index": err.account_index}}
    return {variant: json.loads(err.to_json())}


class Node:
    def __init__(self):
        self.svm = LiteSVM().with_blockhash_check(False)
        self.payer = Keypair.from_seed(bytes([200] * 32))
        self.authority = self.payer
        self.mint = None
        self.decimals = 6
        self.svm.airdrop(self.payer.pubkey(), 1_000_000_000_000)
        self.slots = []  # {"blockhash": str, "txs": [entry], "fork": bool}
        self.finalized = 0
        self.first_held = 0
        self.losing = False
        self.fork = False
        self.snapshots = []  # (keys, accounts before) of forked transactions, newest last
        self.produce(1)

    # -- chain ---------------------------------------------------------------------------------
    def tip(self):
        return len(self.slots) - 1

    def produce(self, n):
        for _ in range(n):
            if self.slots:
                self.svm.expire_blockhash()
            self.svm.warp_to_slot(len(self.slots) + 1)
            self.slots.append({"blockhash": str(self.svm.latest_blockhash()), "txs": [], "fork": self.fork})

    def finalize(self):
        assert not any(s["fork"] and s["txs"] for s in self.slots), "a fork cannot be finalized"
        self.finalized = self.tip()

    def drop_fork(self):
        """The forked slots' transactions never happened: their accounts are restored."""
        for keys, before in reversed(self.snapshots):
            for key, account in zip(keys, before):
                self.svm.set_account(key, account or Account(0, b"", SYSTEM, False, 0))
        self.snapshots = []
        for s in self.slots:
            if s["fork"]:
                s["txs"], s["fork"] = [], False
        self.fork = False

    def find(self, sig):
        for slot, s in enumerate(self.slots):
            if slot < self.first_held:
                continue
            for entry in s["txs"]:
                if entry["transaction"]["signatures"][0] == sig:
                    return slot, entry
        return None

    # -- accounts ------------------------------------------------------------------------------
    def balance(self, key):
        return self.svm.get_balance(key) or 0

    def token_balances(self, keys):
        out = []
        for i, key in enumerate(keys):
            acc = self.svm.get_account(key)
            if acc is None or acc.owner != TOKEN or len(acc.data) != 165:
                continue
            data = bytes(acc.data)
            mint = Pubkey.from_bytes(data[0:32])
            decimals = bytes(self.svm.get_account(mint).data)[44]
            amount = struct.unpack_from("<Q", data, 64)[0]
            out.append({"accountIndex": i, "mint": str(mint), "owner": str(Pubkey.from_bytes(data[32:64])),
                        "programId": str(TOKEN),
                        "uiTokenAmount": {"amount": str(amount), "decimals": decimals,
                                          "uiAmountString": str(amount / 10 ** decimals)}})
        return out

    def token_units(self, owner):
        acc = self.svm.get_account(get_associated_token_address(owner, self.mint))
        return 0 if acc is None else struct.unpack_from("<Q", bytes(acc.data), 64)[0]

    # -- transactions --------------------------------------------------------------------------
    def execute(self, tx):
        """Runs `tx` (preflight: a failure is an RPC error and nothing happens) and records it
        in a new slot, unless the node is losing what it is sent."""
        msg = tx.message
        sig = str(tx.signatures[0])
        if self.find(sig) is not None:
            raise RpcError(-32002, "Transaction simulation failed: This transaction has already been processed",
                           {"err": "AlreadyProcessed", "logs": []})
        recent = [s["blockhash"] for s in self.slots[-(VALIDITY + 1):]]
        if str(msg.recent_blockhash) not in recent:
            raise RpcError(-32002, "Transaction simulation failed: Blockhash not found",
                           {"err": "BlockhashNotFound", "logs": []})
        if not tx.verify_with_results() or not all(tx.verify_with_results()):
            raise RpcError(-32003, "Transaction signature verification failure")
        keys = list(msg.account_keys)
        before = [self.svm.get_account(k) for k in keys]
        pre, pre_tokens = [self.balance(k) for k in keys], self.token_balances(keys)
        # Preflight simulates on the node's state and changes nothing: LiteSVM's
        # `send_transaction` would commit a failing transaction (fee charged, signature
        # recorded), as a validator does with one sent without preflight.
        simulated = self.svm.simulate_transaction(tx)
        if isinstance(simulated, FailedTransactionMetadata):
            raise RpcError(-32002, f"Transaction simulation failed: {simulated.err()}",
                           {"err": err_json(simulated.err()), "logs": list(simulated.meta().logs())})
        if self.losing:
            return sig
        result = self.svm.send_transaction(tx)
        if isinstance(result, FailedTransactionMetadata):
            raise RpcError(-32002, f"Transaction simulation failed: {result.err()}",
                           {"err": err_json(result.err()), "logs": list(result.meta().logs())})
        header = msg.header
        signed, ro_signed, ro_unsigned = (header.num_required_signatures, header.num_readonly_signed_accounts,
                                          header.num_readonly_unsigned_accounts)

        def writable(i):
            return i < signed - ro_signed or (signed <= i < len(keys) - ro_unsigned)

        entry = {
            "transaction": {"signatures": [str(s) for s in tx.signatures], "message": {
                "accountKeys": [{"pubkey": str(k), "signer": i < signed, "writable": writable(i), "source": "transaction"}
                                for i, k in enumerate(keys)],
                "recentBlockhash": str(msg.recent_blockhash), "instructions": []}},
            "meta": {"err": None, "status": {"Ok": None}, "fee": result.fee(),
                     "preBalances": pre, "postBalances": [self.balance(k) for k in keys],
                     "preTokenBalances": pre_tokens, "postTokenBalances": self.token_balances(keys),
                     "logMessages": list(result.logs())},
            "version": "legacy",
        }
        if self.fork:
            self.snapshots.append((keys, before))
        self.produce(1)
        self.slots[-1]["txs"].append(entry)
        return sig

    def sign_and_execute(self, instructions, signers):
        blockhash = self.svm.latest_blockhash()
        tx = Transaction(signers, Message.new_with_blockhash(instructions, self.payer.pubkey(), blockhash), blockhash)
        return self.execute(tx)

    def create_ata(self, owner):
        return Instruction(ATA_PROGRAM, bytes([1]), [
            AccountMeta(self.payer.pubkey(), True, True),
            AccountMeta(get_associated_token_address(owner, self.mint), False, True),
            AccountMeta(owner, False, False), AccountMeta(self.mint, False, False),
            AccountMeta(SYSTEM, False, False), AccountMeta(TOKEN, False, False)])

    def create_mint(self, decimals):
        mint = Keypair.from_seed(bytes([201] * 32))
        self.mint, self.decimals = mint.pubkey(), decimals
        self.sign_and_execute([
            create_account(CreateAccountParams(from_pubkey=self.payer.pubkey(), to_pubkey=mint.pubkey(),
                                               lamports=self.svm.minimum_balance_for_rent_exemption(82), space=82,
                                               owner=TOKEN)),
            # InitializeMint2 with the payer as mint and freeze authority (a real stablecoin's
            # issuer can freeze holders' accounts).
            Instruction(TOKEN, bytes([20, decimals]) + bytes(self.authority.pubkey()) + bytes([1])
                        + bytes(self.authority.pubkey()),
                        [AccountMeta(mint.pubkey(), False, True)])], [self.payer, mint])
        self.mint_to(self.payer.pubkey(), 1_000_000_000_000)
        return str(mint.pubkey())

    def mint_to(self, owner, units):
        ata = get_associated_token_address(owner, self.mint)
        return self.sign_and_execute([self.create_ata(owner), Instruction(TOKEN, bytes([7]) + struct.pack("<Q", units), [
            AccountMeta(self.mint, False, True), AccountMeta(ata, False, True),
            AccountMeta(self.authority.pubkey(), True, False)])], [self.payer])

    def freeze(self, owner):
        """The issuer freezes `owner`'s token account (created empty if missing): SPL Token
        `FreezeAccount`."""
        ata = get_associated_token_address(owner, self.mint)
        return self.sign_and_execute([self.create_ata(owner), Instruction(TOKEN, bytes([10]), [
            AccountMeta(ata, False, True), AccountMeta(self.mint, False, False),
            AccountMeta(self.authority.pubkey(), True, False)])], [self.payer])

    def pay_token(self, owner, units):
        source = get_associated_token_address(self.payer.pubkey(), self.mint)
        return self.sign_and_execute([self.create_ata(owner), Instruction(
            TOKEN, bytes([12]) + struct.pack("<QB", units, self.decimals), [
                AccountMeta(source, False, True), AccountMeta(self.mint, False, False),
                AccountMeta(get_associated_token_address(owner, self.mint), False, True),
                AccountMeta(self.payer.pubkey(), True, False)])], [self.payer])

    # -- JSON-RPC ------------------------------------------------------------------------------
    def call(self, method, params):
        key = lambda i: Pubkey.from_string(params[i])
        if method == "getSlot":
            return self.tip()
        if method == "minimumLedgerSlot":
            return self.first_held
        if method == "getBlocks":
            return [s for s in range(params[0], min(params[1], self.tip()) + 1)]
        if method == "getBlock":
            slot = params[0]
            if slot > self.tip():
                raise RpcError(-32004, f"Block not available for slot {slot}")
            s = self.slots[slot]
            return {"blockHeight": slot, "blockTime": 1_700_000_000 + slot, "blockhash": s["blockhash"],
                    "parentSlot": max(slot - 1, 0), "previousBlockhash": self.slots[max(slot - 1, 0)]["blockhash"],
                    "transactions": s["txs"]}
        if method == "getSignatureStatuses":
            out = []
            for sig in params[0]:
                found = self.find(sig)
                if found is None:
                    out.append(None)
                    continue
                slot, entry = found
                final = slot <= self.finalized
                out.append({"slot": slot, "confirmations": None if final else self.tip() - slot,
                            "err": entry["meta"]["err"], "status": {"Ok": None},
                            "confirmationStatus": "finalized" if final else "confirmed"})
            return {"context": {"slot": self.tip()}, "value": out}
        if method == "getLatestBlockhash":
            return {"context": {"slot": self.tip()},
                    "value": {"blockhash": self.slots[-1]["blockhash"], "lastValidBlockHeight": self.tip() + VALIDITY}}
        if method == "getEpochInfo":
            return {"absoluteSlot": self.finalized, "blockHeight": self.finalized, "epoch": 0,
                    "slotIndex": self.finalized, "slotsInEpoch": 432000, "transactionCount": None}
        if method == "getAccountInfo":
            acc = self.svm.get_account(key(0))
            value = None if acc is None else {
                "owner": str(acc.owner), "lamports": acc.lamports, "executable": acc.executable,
                "data": [base64.b64encode(bytes(acc.data)).decode(), "base64"], "rentEpoch": 0,
                "space": len(acc.data)}
            return {"context": {"slot": self.tip()}, "value": value}
        if method == "getBalance":
            return {"context": {"slot": self.tip()}, "value": self.balance(key(0))}
        if method == "getTokenAccountBalance":
            acc = self.svm.get_account(key(0))
            if acc is None:
                raise RpcError(-32602, "Invalid param: could not find account")
            if acc.owner != TOKEN or len(acc.data) != 165:
                raise RpcError(-32602, "Invalid param: not a Token account")
            data = bytes(acc.data)
            decimals = bytes(self.svm.get_account(Pubkey.from_bytes(data[0:32])).data)[44]
            amount = struct.unpack_from("<Q", data, 64)[0]
            return {"context": {"slot": self.tip()},
                    "value": {"amount": str(amount), "decimals": decimals, "uiAmount": amount / 10 ** decimals,
                              "uiAmountString": str(amount / 10 ** decimals)}}
        if method == "getTransaction":
            found = self.find(params[0])
            if found is None:
                return None
            slot, entry = found
            return dict(entry, slot=slot, blockTime=1_700_000_000 + slot)
        if method == "sendTransaction":
            try:
                tx = Transaction.from_bytes(base64.b64decode(params[0]))
            except Exception as e:
                raise RpcError(-32602, f"invalid transaction: failed to deserialize: {e}")
            return self.execute(tx)
        # Test switches.
        if method == "shim_fund":
            self.svm.airdrop(key(0), params[1])
            return None
        if method == "shim_createMint":
            return self.create_mint(params[0])
        if method == "shim_mintTo":
            return self.mint_to(key(0), params[1])
        if method == "shim_paySol":
            return self.sign_and_execute([transfer(TransferParams(from_pubkey=self.payer.pubkey(), to_pubkey=key(0),
                                                                  lamports=params[1]))], [self.payer])
        if method == "shim_freeze":
            return self.freeze(key(0))
        if method == "shim_payToken":
            return self.pay_token(key(0), params[1])
        if method == "shim_produce":
            self.produce(params[0])
            return self.tip()
        if method == "shim_finalize":
            self.finalize()
            return self.finalized
        if method == "shim_set":
            setattr(self, params[0], params[1])
            return None
        if method == "shim_dropFork":
            self.drop_fork()
            return None
        if method == "shim_balance":
            return self.balance(key(0))
        if method == "shim_tokenUnits":
            return self.token_units(key(0))
        if method == "shim_accountExists":
            return self.svm.get_account(key(0)) is not None
        raise RpcError(-32601, f"Method not found: {method}")


NODE = Node()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = {"jsonrpc": "2.0", "id": req.get("id")}
        try:
            answer["result"] = NODE.call(req["method"], req.get("params") or [])
        except RpcError as e:
            answer["error"] = e.error
        except Exception as e:  # a bug in the test's use of the shim: say it loudly
            answer["error"] = {"code": -32603, "message": f"shim: {type(e).__name__}: {e}"}
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
