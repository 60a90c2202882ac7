#!/usr/bin/env bash
# The GPU check of issue 24 item 5 (see benchmarks/gpu_check.py): albert-base bf16 seq-512 pretraining
# tokens/s and MFU, the SDPA kernel of padded and unpadded batches, torch.compile on/off, albert-large vs
# bert-large. Bounded to 8 minutes; exits 2 with a message where there is no CUDA device.
#
#   bash benchmarks/gpu_check.sh [--batch 32] [--seq 512] [--steps 5] [--no-compile]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# 480 s: the issue's budget for the whole check; timeout's own exit status (124) says it ran out
exec timeout 480 "$PY" benchmarks/gpu_check.py "$@"
