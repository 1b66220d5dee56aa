"""Embeddings under every batch size a user may pass: llama.cpp aborted the process in a
mat-mul (GGML_ASSERT ggml_can_mul_mat) with --n-batch 300 and four inputs of 253-256
tokens (llama.cpp's own server test, test_embedding_multiple_with_fa). Each case runs in a
child process, so an abort is a failed case instead of a dead test run."""

import multiprocessing

import pytest

INPUTS = {"near the limit": lambda limit: ["a " * (limit - 2), "b " * (limit - 1), "c " * limit],
          "the issue's four": lambda limit: ["a " * 253, "b " * 254, "c " * 255, "d " * 256],
          "many short ones": lambda limit: [f"item {i}" for i in range(300)]}


def embed_in_child(path: str, n_batch: int, parallel: int, queue) -> None:
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine
    from edge_infer.errors import ContextOverflowError

    engine = Engine(path, EngineSettings(ctx=1024, parallel=parallel, n_batch=n_batch, n_threads=2, n_gpu_layers=0))
    answers = {}
    for name, make in INPUTS.items():
        try:
            vectors, _ = engine.embed(make(engine.embedder.max_tokens))
            answers[name] = len(vectors)
        except ContextOverflowError as exc:  # an input longer than the limit: a clear 400
            answers[name] = str(exc)
    engine.close()
    queue.put(answers)


@pytest.mark.parametrize("n_batch,parallel", [(300, 1), (300, 2), (7, 4), (100, 1), (1000, 8)])
def test_every_batch_size_embeds_or_refuses_and_never_aborts(smollm2_path, n_batch, parallel):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=embed_in_child, args=(str(smollm2_path), n_batch, parallel, queue))
    child.start()
    child.join(180)
    assert child.exitcode == 0, f"the child ended with {child.exitcode} (llama.cpp aborted?)"
    answers = queue.get(timeout=5)
    assert answers["many short ones"] == 300
    for name, answer in answers.items():
        assert isinstance(answer, int) or "may hold at most" in answer, (name, answer)
