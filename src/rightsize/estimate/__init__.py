"""Estimation without running the workload for real: memory, FLOPs/bytes, projection onto hardware.

    memory_trace   run a zoo model's forward (+ backward) under FakeTensorMode: no real memory,
                   exact tensor sizes; records saved-for-backward bytes and the live-bytes peak
    memory         MemoryEstimate: weights, gradients, optimizer states, activations, logits, KV
                   cache, CUDA overheads, fragmentation; GPU tier fitting and advice
    memory_validate  --validate: the same quantities measured on this machine
    projection     roofline projection of measured profiles onto catalog devices
    calibration    efficiency fits recomputed from the calibration data

Only ``memory_validate`` runs a real workload (``rightsize memory --validate``).
"""
