#!/usr/bin/env bash
# GPU check for a lent GPU machine (one NVIDIA GPU, no network): does LSTM/GRU training take the
# cuDNN kernel, which recipe options force the generic one (seqkit's warning), and tokens/s on the
# GPU beside the CPU. Installs nothing when seqkit and TensorFlow already import (this copy of the
# repository goes first on PYTHONPATH); otherwise tries `pip install -e .` once.
#
#   bash bench/gpu_check.sh [--steps N ...]     # from anywhere; writes $OUT/gpu_check.json if $OUT is set
#
# Exit status: 0 all checks as expected; 1 a check failed; 2 no GPU visible to TensorFlow;
# 3 seqkit/TensorFlow not importable; 124 over the 290 s limit. See bench/gpu_check.py.
set -u
cd "$(dirname "$0")/.." || exit 3
echo "== nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || echo "nvidia-smi failed (exit $?)"
else
  echo "nvidia-smi: not found (no NVIDIA driver on this machine)"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-$(command -v python || command -v python3)}"
if ! "$PY" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ('seqkit', 'keras', 'tensorflow')))"; then
  echo "== seqkit / keras / tensorflow do not import with $PY ($("$PY" --version 2>&1)): pip install --no-index -e ."
  # offline first (a lent GPU machine reaches no index): succeeds only where TensorFlow's GPU build
  # and its CUDA libraries are already installed; then once with the index, bounded
  "$PY" -m pip install -q --no-index --no-build-isolation -e . \
    || timeout 120 "$PY" -m pip install -q --retries 1 --timeout 10 -e . \
    || { echo "FAIL (3): seqkit's dependencies (TensorFlow with its CUDA libraries) are not on this machine and pip could not install them: install tensorflow[and-cuda] where the machine reaches PyPI, then run this again" >&2; exit 3; }
fi
echo "== python -m bench.gpu_check $*"
timeout 290 "$PY" -m bench.gpu_check "$@"
rc=$?
[ "$rc" -eq 124 ] && echo "FAIL (124): the check ran past 290 s and was stopped" >&2
exit "$rc"
