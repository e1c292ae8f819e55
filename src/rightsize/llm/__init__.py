"""Generative (decoder) workloads: a replica's prefill/decode cost, a continuous-batching simulator,
a real generation server with streamed tokens, its TTFT/TPOT load generator, and fine-tuning memory."""
