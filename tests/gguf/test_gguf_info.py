import json
import shutil

import pytest

from edge_infer.errors import ModelFileError
from edge_infer.gguf.header import read_header
from edge_infer.gguf.info import read_model_info


def test_smollm2_header(smollm2_path):
    info = read_model_info(smollm2_path)
    assert info.architecture == "llama"
    assert (info.block_count, info.head_count, info.head_count_kv) == (30, 9, 3)
    assert (info.embedding_length, info.feed_forward_length) == (576, 1536)
    assert (info.key_length, info.value_length) == (64, 64)
    assert info.context_length == 8192
    assert info.quantization == "Q4_1"
    assert info.vocab_size == 49152
    assert info.parameter_count == 134_515_008
    assert info.sliding_window == 0 and not any(info.swa_layers)
    assert info.chat_template and "<|im_start|>" in info.chat_template
    assert (info.bos_token_id, info.eos_token_id) == (1, 2)
    assert info.file_size == 98_362_432
    assert len(info.layer_weight_bytes) == 30
    assert sum(info.layer_weight_bytes) + info.input_weight_bytes + info.output_weight_bytes == info.weights_bytes
    assert info.tied_embeddings  # no output.weight: token_embd doubles as the output layer


def test_gemma3_header(gemma3_path):
    info = read_model_info(gemma3_path)
    assert info.architecture == "gemma3"
    assert (info.block_count, info.head_count, info.head_count_kv) == (18, 4, 1)
    assert (info.embedding_length, info.key_length, info.value_length) == (640, 256, 256)
    assert info.context_length == 32768
    assert info.quantization == "Q4_K_M"
    assert info.vocab_size == 262144
    assert info.sliding_window == 512
    # llama.cpp's gemma3 pattern: every 6th layer ((il + 1) % 6 == 0) is full attention.
    assert [il for il, swa in enumerate(info.swa_layers) if not swa] == [5, 11, 17]
    # This GGUF carries no tokenizer.chat_template (the engine must supply Gemma's).
    assert info.chat_template is None
    assert (info.bos_token_id, info.eos_token_id) == (2, 1)
    assert 260e6 < info.parameter_count < 275e6


def test_to_dict_is_json(smollm2_path):
    d = json.loads(json.dumps(read_model_info(smollm2_path).to_dict()))
    assert d["quantization"] == "Q4_1" and len(d["swa_layers"]) == 30 and "metadata" not in d


def test_header_agrees_with_gguf_reader(smollm2_path):
    """Our fast reader against the gguf package's reference parser."""
    from gguf import GGUFReader

    ours, ref = read_header(smollm2_path), GGUFReader(smollm2_path)
    assert ours.data_offset == ref.data_offset
    assert [(t.name, t.n_bytes, t.n_elements, ours.data_offset + t.offset) for t in ours.tensors] == \
        [(t.name, t.n_bytes, t.n_elements, t.data_offset) for t in ref.tensors]
    assert ours.fields["llama.rope.freq_base"] == ref.get_field("llama.rope.freq_base").contents()


def test_tiny_synthetic_file(tiny_gguf):
    info = read_model_info(tiny_gguf)
    assert info.name == "Tiny Test Model" and info.quantization == "F32"
    assert info.block_count == 2 and info.vocab_size == 16 and info.chat_template == "{{ messages }}"


def test_missing_file(tmp_path):
    with pytest.raises(ModelFileError, match="no such model file: .*nothing.gguf"):
        read_model_info(tmp_path / "nothing.gguf")


def test_directory(tmp_path):
    with pytest.raises(ModelFileError, match="is a directory"):
        read_model_info(tmp_path)


def test_empty_file(tmp_path):
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ModelFileError, match="is empty"):
        read_model_info(tmp_path / "empty.gguf")


def test_not_gguf(tmp_path):
    (tmp_path / "notes.gguf").write_text("hello, this is text\n")
    with pytest.raises(ModelFileError, match=r"is not a GGUF file \(starts with b'hello, t'\)"):
        read_model_info(tmp_path / "notes.gguf")


def test_truncated_in_tensor_data(tmp_path, smollm2_path):
    cut = tmp_path / "cut.gguf"
    with open(smollm2_path, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(10_000_000))
    with pytest.raises(ModelFileError, match="truncated: expected at least 98362432 bytes, file has 10000000"):
        read_model_info(cut)


def test_truncated_in_header(tmp_path, smollm2_path):
    cut = tmp_path / "cut.gguf"
    with open(smollm2_path, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(100_000))  # inside the tokenizer arrays
    with pytest.raises(ModelFileError, match="truncated: its GGUF header runs past the end"):
        read_model_info(cut)


def test_corrupt_header(tmp_path, tiny_gguf):
    data = bytearray(tiny_gguf.read_bytes())
    data[4:8] = (99).to_bytes(4, "little")  # unknown GGUF version
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="unreadable GGUF header: GGUF version 99"):
        read_model_info(bad)


def test_tiny_header_is_whole_but_copy_with_junk_is_fine(tmp_path, tiny_gguf):
    # Extra bytes after the last tensor are allowed (llama.cpp ignores them).
    longer = tmp_path / "longer.gguf"
    shutil.copy(tiny_gguf, longer)
    with open(longer, "ab") as fh:
        fh.write(b"\0" * 100)
    assert read_model_info(longer).block_count == 2
