"""A chat template is data from a model file: one that reaches for Python's internals (the
CVE-2024-34359 payloads against llama-cpp-python's unsandboxed Jinja) is a clear error
naming the template, and nothing it asks for runs. End to end through the server with a
GGUF that carries such a template: tests/server/test_hostile_template.py."""

from __future__ import annotations

import pytest

from edge_infer.chat.template import ChatTemplate, ChatTemplateError

HI = [{"role": "user", "content": "Hi"}]


def payloads(marker) -> list[str]:
    touch = f"touch {marker}"
    return [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{% for x in ().__class__.__base__.__subclasses__() %}{% if 'warning' in x.__name__ %}"
        f"{{{{ x()._module.__builtins__['__import__']('os').popen('{touch}').read() }}}}{{% endif %}}{{% endfor %}}",
        f"{{{{ cycler.__init__.__globals__.os.popen('{touch}').read() }}}}",
        f"{{{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('{touch}').read() }}}}",
        f"{{{{ lipsum.__globals__['os'].popen('{touch}').read() }}}}",
        f"{{{{ namespace.__init__.__globals__.os.system('{touch}') }}}}",
        "{{ messages.append({'role': 'system'}) }}{{ messages }}",  # immutable: no changing what it was given
    ]


@pytest.mark.parametrize("n", range(7))
def test_a_sandbox_escape_is_a_clear_error_and_nothing_runs(tmp_path, n):
    marker = tmp_path / "ran"
    template = ChatTemplate(payloads(marker)[n], name="the chat template of hostile.gguf")
    with pytest.raises(ChatTemplateError) as caught:
        template.render(HI)
    message = str(caught.value)
    assert "\n" not in message and not marker.exists()
    assert message.startswith("the chat template of hostile.gguf tried to leave the Jinja sandbox"), message
    assert message.endswith("is unsafe."), message  # Jinja's own reason: which attribute of what


def test_the_reasoning_probe_survives_a_hostile_template():
    template = ChatTemplate(payloads("/nonexistent/x")[0])
    assert template.opens_reasoning() is False  # the probe's error is swallowed, not raised
