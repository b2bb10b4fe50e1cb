"""bench/machine.py: CPU kind from /proc/cpuinfo text, the LM shape's FLOPs per token by hand, the roofline."""

from __future__ import annotations

import pytest

from bench.machine import cap_isa, cpu_flags, cpu_kind, lm_flops_per_token, machine_kind, roofline_fraction

AVX2_EPYC = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx avx2 fma bmi2 sha_ni
"""
AVX512_EPYC = AVX2_EPYC.replace("sha_ni", "sha_ni avx512f avx512bw avx512_vnni avx512_bf16")


def test_cpu_kind_from_flags():
    f2, f5 = cpu_flags(AVX2_EPYC), cpu_flags(AVX512_EPYC)
    assert f2["avx2"] and f2["fma"] and not f2["avx512f"] and not f2["avx512_bf16"]
    assert f5["avx512f"] and f5["avx512_bf16"] and not f5["amx_tile"]
    assert (cpu_kind(f2), cpu_kind(f5), cpu_kind(cpu_flags(""))) == ("avx2", "avx512", "other")


def test_machine_kind_names_the_bfloat16_units():
    amx = AVX512_EPYC.replace("avx512_bf16", "avx512_bf16 amx_tile amx_bf16 amx_int8")
    assert machine_kind(cpu_flags(AVX512_EPYC)) == "avx512+avx512_bf16"
    assert machine_kind(cpu_flags(amx)) == "avx512+amx"
    assert machine_kind(cpu_flags(AVX2_EPYC)) == "avx2"
    assert machine_kind(cpu_flags("")) == "other"


def test_flops_per_token_by_hand():
    # LSTM, V 5000, E 128, H 256: forward 2*(128*1024 + 256*1024 + 256*5000) = 6,692,864, times 3
    assert lm_flops_per_token("lstm", 5000, 128, 256) == 3 * 2 * (131_072 + 262_144 + 1_280_000) == 10_039_296
    # GRU: three gates
    assert lm_flops_per_token("gru", 5000, 128, 256) == 3 * 2 * (98_304 + 196_608 + 1_280_000) == 9_449_472
    with pytest.raises(ValueError):
        lm_flops_per_token("simple_rnn", 10, 2, 2)


def test_roofline_fraction():
    # 86.5 GFLOP/s (the AVX2 EPYC's measured matmul) allows 8,616 LSTM tokens/s; PyTorch's 8,151 is 94.6% of it
    allowed = 86.5e9 / 10_039_296
    assert roofline_fraction(allowed, 86.5, 10_039_296) == pytest.approx(1.0)
    assert roofline_fraction(8151, 86.5, 10_039_296) == pytest.approx(0.946, abs=5e-4)


def test_cap_isa_only_avx2(monkeypatch):
    import os

    fake = {}
    monkeypatch.setattr(os, "environ", fake)  # the cap must not leak into this test process's TensorFlow
    with pytest.raises(ValueError):
        cap_isa("sse4")
    assert fake == {}
    env = cap_isa("avx2")
    assert fake == env and env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX2"  # XLA's code generator too
    fake.clear()
    fake["XLA_FLAGS"] = "--xla_dump_to=/tmp/x"
    assert cap_isa("avx2")["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_max_isa=AVX2"  # kept, appended
