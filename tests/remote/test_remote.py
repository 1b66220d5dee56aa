"""Remote models: the models config's checks, keys, and which upstream takes a request."""

import pytest

from edge_infer.host.model_config import ModelConfigError, load_models_config
from edge_infer.remote import RemoteModel, RemoteModels
from edge_infer.remote.registry import RemoteConfigError


def config(tmp_path, text: str):
    path = tmp_path / "models.toml"
    path.write_text(text)
    return load_models_config(path)


def test_a_remote_entry_takes_urls_a_name_and_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("BIG_KEY", "k1")
    c = config(tmp_path, '[models.big]\nremote = ["http://a:8000/v1", "http://b:8000"]\n'
                         'remote_model = "Qwen/Qwen2.5-72B"\napi_key_env = "BIG_KEY"\ntimeout = 30\n')
    big = RemoteModels.from_config(c).find("BIG")  # names match without case
    assert [u.url for u in big.upstreams] == ["http://a:8000/v1", "http://b:8000/v1"]
    assert big.remote_model == "Qwen/Qwen2.5-72B" and big.api_key == "k1" and big.timeout == 30
    assert big.upstreams[1].url_for("/v1/chat/completions") == "http://b:8000/v1/chat/completions"
    assert big.upstreams[1].url_for("/api/chat") == "http://b:8000/api/chat"


@pytest.mark.parametrize("entry, says", [
    ('remote = ["http://a/v1"]\nctx = 4096', "ctx do not apply"),
    ('remote = ["a:8000"]', "is not an http:// or https:// URL"),
    ('remote = []', "remote"),
    ('remote_model = "x"', "only apply with remote"),
    ('remote = ["http://a/v1"]\napi_key_env = "A"\napi_key_file = "f"', "not both"),
])
def test_bad_remote_entries_are_refused_naming_the_key(tmp_path, entry, says):
    with pytest.raises(ModelConfigError, match=says):
        config(tmp_path, f"[models.big]\n{entry}\n")


def test_a_missing_key_is_refused_at_start(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    c = config(tmp_path, '[models.big]\nremote = ["http://a/v1"]\napi_key_env = "NO_SUCH_KEY"\n')
    with pytest.raises(RemoteConfigError, match="NO_SUCH_KEY is not set"):
        RemoteModels.from_config(c)
    (tmp_path / "key").write_text("  secret\n")
    c = config(tmp_path, f'[models.big]\nremote = ["http://a/v1"]\napi_key_file = "{tmp_path / "key"}"\n')
    assert RemoteModels.from_config(c).find("big").api_key == "secret"


def test_the_upstream_with_fewest_outstanding_requests_goes_first_and_ties_take_turns():
    m = RemoteModel("big", ["http://a/v1", "http://b/v1", "http://c/v1"])
    a, b, c = m.upstreams
    firsts = [m.candidates()[0].url for _ in range(3)]
    assert sorted(firsts) == sorted(u.url for u in m.upstreams)  # idle: in turn
    m.started(a), m.started(a), m.started(b)
    assert m.candidates()[0] is c
    t = m.started(c)
    m.finished(c, t, "ConnectError")  # failed: taken out, tried last
    assert m.candidates()[-1] is c and not c.up and c.errors == 1
    assert m.listing()["healthy"] == 2
    m.checked(c, None)  # a health check found it answering
    assert c.up and m.candidates()[0] is c
