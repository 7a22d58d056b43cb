#!/usr/bin/env bash
# Rebuilds TestToken.bin from TestToken.sol with solcjs from npm (offline once installed):
#   npm install --prefix /tmp/solc solc@0.8.26 && PATH=/tmp/solc/node_modules/.bin:$PATH ./build-token.sh
set -euo pipefail
cd "$(dirname "$0")"
python3 - <<'PY' | solcjs --standard-json | grep '^{' | python3 -c '
import json, sys
o = json.load(sys.stdin)
errors = [e for e in o.get("errors", []) if e["severity"] == "error"]
assert not errors, errors
print(o["contracts"]["TestToken.sol"]["TestToken"]["evm"]["bytecode"]["object"])' > TestToken.bin
import json
src = open("TestToken.sol").read()
print(json.dumps({"language": "Solidity", "sources": {"TestToken.sol": {"content": src}},
                  "settings": {"evmVersion": "paris", "optimizer": {"enabled": True, "runs": 200},
                               "outputSelection": {"*": {"TestToken": ["evm.bytecode.object"]}}}}))
PY
echo "TestToken.bin: $(wc -c < TestToken.bin) hex characters"
