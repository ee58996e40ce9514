"""Chat templates render in the same sandboxed Jinja environment as transformers': the
same text for the constructs templates use, the same places a template is read from,
and a template's own errors (or an attempt to reach outside the sandbox) surface as a
ChatTemplateError, never as a different prompt."""

from __future__ import annotations

import json
import shutil

import pytest

from inference.text.chat_template import ChatTemplate, ChatTemplateError, load_template_source
from inference.text.tokenizer import ServedTokenizer

from .conftest import MODEL_DIR

MESSAGES = [
    {"role": "system", "content": "Be <brief> & kind."},
    {"role": "user", "content": "Hi \"there\""},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"},
]

# The constructs real templates use: tojson (without HTML escaping), loop controls,
# whitespace control, {% generation %}, namespace, special tokens, raise_exception.
FEATURES_TEMPLATE = """{{ bos_token }}
{% set ns = namespace(n=0) %}
{% for m in messages %}
  {% if m.role == 'assistant' %}{% generation %}A: {{ m.content | trim }}{{ eos_token }}{% endgeneration %}
  {% elif m.role == 'system' %}{{ m | tojson }}
  {% else %}{% set ns.n = ns.n + 1 %}U{{ ns.n }}: {{ m.content }}
  {% endif %}
  {% if loop.index > 10 %}{% break %}{% endif %}
{% endfor %}
{%- if add_generation_prompt %}A:{% endif %}"""

RAISING_TEMPLATE = ("{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with "
                    "the user') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}")


def test_template_constructs_render_as_transformers_renders_them(served_tokenizer, hf_tokenizer):
    served = ChatTemplate(FEATURES_TEMPLATE, special_tokens=served_tokenizer.special_tokens)
    for generation_prompt in (True, False):
        text = served.render(MESSAGES, add_generation_prompt=generation_prompt)
        assert text == hf_tokenizer.apply_chat_template(
            MESSAGES, chat_template=FEATURES_TEMPLATE, add_generation_prompt=generation_prompt, tokenize=False)
    assert '{"role": "system", "content": "Be <brief> & kind."}' in text
    assert text.startswith("<|im_start|>") and "A: Hello!<|im_end|>" in text


def test_a_template_that_raises_is_a_chat_template_error_with_its_message():
    template = ChatTemplate(RAISING_TEMPLATE)
    assert template.render([{"role": "user", "content": "ok"}]) == "ok"
    with pytest.raises(ChatTemplateError, match="Conversation must start with the user"):
        template.render(MESSAGES)


def test_a_template_cannot_change_the_messages_or_reach_python_internals():
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ messages.append({'role': 'user', 'content': 'injected'}) }}").render(messages)
    assert messages == [{"role": "user", "content": "hi"}]
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render(messages)


def test_a_template_that_does_not_compile_is_a_chat_template_error():
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for m in messages %}{{ m.content }}")


@pytest.fixture
def model_copy(tmp_path):
    """The default model's tokenizer files, without the weights, to vary where the
    template comes from."""
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        shutil.copy(MODEL_DIR / name, tmp_path / name)
    return tmp_path


def write_config_template(model_dir, template) -> None:
    path = model_dir / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["chat_template"] = template
    path.write_text(json.dumps(config))


def test_a_template_in_tokenizer_config_renders_as_transformers_renders_it(model_copy):
    from transformers import AutoTokenizer

    write_config_template(model_copy, FEATURES_TEMPLATE)
    served, hf = ServedTokenizer.from_dir(model_copy), AutoTokenizer.from_pretrained(model_copy)
    assert served.chat_template == hf.chat_template == FEATURES_TEMPLATE
    assert served.apply_chat_template(MESSAGES, add_generation_prompt=True) == hf.apply_chat_template(
        MESSAGES, add_generation_prompt=True)


def test_a_list_of_named_templates_uses_the_default_one(model_copy):
    write_config_template(model_copy, [{"name": "tool_use", "template": "tools"},
                                       {"name": "default", "template": FEATURES_TEMPLATE}])
    assert load_template_source(model_copy) == FEATURES_TEMPLATE
    write_config_template(model_copy, [{"name": "tool_use", "template": "tools"}])
    with pytest.raises(ChatTemplateError, match="none 'default'"):
        load_template_source(model_copy)


def test_the_template_file_takes_precedence_over_the_config(model_copy):
    write_config_template(model_copy, "from the config")
    assert load_template_source(model_copy) == "from the config"
    shutil.copy(MODEL_DIR / "chat_template.jinja", model_copy / "chat_template.jinja")
    assert load_template_source(model_copy) == (MODEL_DIR / "chat_template.jinja").read_text()


def test_a_model_without_a_template_has_none_and_refuses_to_render_one(model_copy):
    served = ServedTokenizer.from_dir(model_copy)
    assert served.chat_template is None
    with pytest.raises(ChatTemplateError, match="no chat template"):
        served.apply_chat_template(MESSAGES)
