"""How this machine runs a step, below the model: the precision rule and CPU feature probes (`precision`), the
fp32 linear library (`fp32_linear`), the attention and padding switches the model reads (`attention`, context
variables), the allocator (`allocator`), the device rule (`device`) and the torch-free choice lists
(`choices`). The model, the trainer and inference all take their defaults from here.
"""
