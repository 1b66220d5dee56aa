"""Chat-template variables (chat_template_kwargs, enable_thinking, reasoning_effort) and a
template file given instead of the model's own: pure template tests, and the engine's
refusal of a template file it cannot use, before anything is loaded."""

from __future__ import annotations

import pytest

from edge_infer.chat.template import RESERVED, ChatTemplate
from edge_infer.engine.prompt import BadRequestError, read_template_file

QWEN3_LIKE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and "
              "enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}")
R1_LIKE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}")
HI = [{"role": "user", "content": "Hi"}]


def test_variables_reach_the_template_and_cannot_replace_what_render_sets():
    t = ChatTemplate(QWEN3_LIKE)
    assert "enable_thinking" in t.variables
    assert t.render(HI).endswith("<|im_start|>assistant\n")
    assert t.render(HI, variables={"enable_thinking": False}).endswith("<think>\n\n</think>\n\n")
    assert "messages" in RESERVED and "add_generation_prompt" in RESERVED
    assert t.render(HI, variables={"messages": [], "add_generation_prompt": False}) == t.render(HI)


def test_a_template_that_opens_think_starts_replies_in_reasoning():
    assert ChatTemplate(R1_LIKE).opens_reasoning()
    t = ChatTemplate(QWEN3_LIKE)
    assert not t.opens_reasoning() and not t.opens_reasoning({"enable_thinking": False})


def test_a_template_file_is_read_and_parsed_or_refused(tmp_path):
    good = tmp_path / "t.jinja"
    good.write_text(QWEN3_LIKE)
    assert read_template_file(str(good)) == QWEN3_LIKE
    with pytest.raises(BadRequestError, match="cannot read the chat template file"):
        read_template_file(str(tmp_path / "missing.jinja"))
    (tmp_path / "empty.jinja").write_text("  \n")
    with pytest.raises(BadRequestError, match="is empty"):
        read_template_file(str(tmp_path / "empty.jinja"))
    (tmp_path / "bad.jinja").write_text("{% for m in messages %}")
    with pytest.raises(Exception, match="does not parse"):
        read_template_file(str(tmp_path / "bad.jinja"))


def test_the_cli_refuses_a_bad_template_file_in_one_line(tmp_path, smollm2_path):
    from tests.cli.test_cli_engine import edge_infer

    (tmp_path / "bad.jinja").write_text("{% if %}")
    r = edge_infer("run", smollm2_path, "Hi", "--chat", "-n", "4", "--chat-template-file", tmp_path / "bad.jinja")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "chat template does not parse" in r.stderr


def test_a_variable_the_template_cannot_use_is_a_template_error_not_a_crash():
    from edge_infer.chat.template import ChatTemplateError

    t = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}{{ 'x' * (depth + 1) }}")
    assert t.render(HI, variables={"depth": 2}) == "Hixxx"
    with pytest.raises(ChatTemplateError, match="chat template failed"):
        t.render(HI, variables={"depth": "deep"})  # str + int: a TypeError inside the template
