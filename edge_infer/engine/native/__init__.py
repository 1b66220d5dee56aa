"""The only package that imports llama_cpp: owners of llama.cpp's C handles (model, context,
batch, sampler chain, embedding context), KV state bytes, the CPU threadpool, the backends
and the CPU variant they load, llama.cpp's load report, and quantization. The rest of the
engine asks these classes (tests/test_rooms.py holds the rule)."""
