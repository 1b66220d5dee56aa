"""A tiny BERT cross-encoder GGUF with rank pooling (random F32 weights, a 20-word WordPiece
vocabulary): llama.cpp runs it as it runs bge-reranker, so the rerank path is exercised on a
real llama.cpp model without downloading one. Its scores mean nothing; their plumbing does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "what", "is", "a", "an", "animal", "stocks", "fell", "?", "."]


def write_tiny_reranker(path: Path, n_embd: int = 16, n_ff: int = 32, n_ctx: int = 64) -> Path:
    import gguf

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("Tiny Reranker")
    w.add_block_count(1)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.RANK)
    w.add_token_type_count(2)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("bert")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL] * 5 + [gguf.TokenType.NORMAL] * len(WORDS))
    w.add_bos_token_id(2)   # [CLS]
    w.add_eos_token_id(3)   # [SEP]
    w.add_sep_token_id(3)
    w.add_pad_token_id(0)
    w.add_unk_token_id(1)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    rng = np.random.default_rng(0)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    def norm(name: str) -> None:
        w.add_tensor(f"{name}.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"{name}.bias", rand(n_embd))

    w.add_tensor("token_embd.weight", rand(len(vocab), n_embd))
    w.add_tensor("token_types.weight", rand(2, n_embd))
    w.add_tensor("position_embd.weight", rand(n_ctx, n_embd))
    norm("token_embd_norm")
    for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{t}.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.0.{t}.bias", rand(n_embd))
    norm("blk.0.attn_output_norm")
    w.add_tensor("blk.0.ffn_up.weight", rand(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_up.bias", rand(n_ff))
    w.add_tensor("blk.0.ffn_down.weight", rand(n_embd, n_ff))
    w.add_tensor("blk.0.ffn_down.bias", rand(n_embd))
    norm("blk.0.layer_output_norm")
    w.add_tensor("cls.weight", rand(n_embd, n_embd))   # the classifier head rank pooling runs
    w.add_tensor("cls.bias", rand(n_embd))
    w.add_tensor("cls.output.weight", rand(1, n_embd))  # one relevance score
    w.add_tensor("cls.output.bias", rand(1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
