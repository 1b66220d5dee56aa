"""llama.cpp's backend devices (CPU, GPUs, RPC workers) and where a model's layers go."""
