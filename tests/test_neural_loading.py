"""Checkpoint loading: Hugging Face (offline, from a cache laid out in tmp_path), local folders, the Moshi
baseline, and the one clear error when files are missing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hf_constants
from moshi.models import loaders
from safetensors.torch import save_file

from kame_core.neural import (
    KameLM,
    load_front_end,
    resolve_hf_repo,
    resolve_local_folder,
    resolve_moshi_baseline,
)
from kame_core.neural.configs import small_mimi_config, tiny_lm_kwargs
from kame_core.neural.loading import load_lm
from kame_core.neural.tiny import train_tiny_tokenizer
from kame_core.neural.tokenizer import SentencePieceTokenizer
from kame_core.protocols import CheckpointUnavailable

VOCAB = 64
COMMIT = "0" * 40


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache with the hub offline (as under HF_HUB_OFFLINE=1): nothing can download."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny checkpoint parts: legacy LM weights (no oracle_emb), KAME weights, small Mimi, tokenizer."""
    root = tmp_path_factory.mktemp("parts")
    torch.manual_seed(0)
    kame = KameLM(**tiny_lm_kwargs(text_card=VOCAB))
    assert kame.oracle_emb is not None
    with torch.no_grad():
        kame.oracle_emb.weight.normal_()
    state = kame.state_dict()
    save_file({k: v for k, v in state.items() if not k.startswith("oracle_emb.")}, root / "legacy.safetensors")
    save_file(dict(state), root / "kame.safetensors")
    mimi = loaders.get_mimi(None, small_mimi_config())
    save_file({k: v.contiguous() for k, v in mimi.state_dict().items()}, root / "mimi.safetensors")
    (root / "mimi_config.json").write_text(json.dumps(small_mimi_config()))
    train_tiny_tokenizer(root / "tokenizer.model", VOCAB)
    return {p.stem: p for p in root.iterdir()}


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src)


def _hub_snapshot(cache: Path, repo: str, files: dict[str, Path], config: dict | None) -> None:
    """Lay out ``files`` as a downloaded snapshot of ``repo`` in a Hugging Face cache."""
    repo_dir = cache / f"models--{repo.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(COMMIT)
    snapshot = repo_dir / "snapshots" / COMMIT
    for name, src in files.items():
        _link(src, snapshot / name)
    if config is not None:
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "config.json").write_text(json.dumps(config))


def _assert_one_clear_error(err: CheckpointUnavailable, *needles: str) -> None:
    text = str(err)
    for needle in needles:
        assert needle in text, (needle, text)
    # no hub traceback chained underneath
    assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


# ------------------------------------------------------------------------------------ errors
def test_offline_without_cache_names_what_is_missing(offline_hub: Path) -> None:
    with pytest.raises(CheckpointUnavailable) as info:
        resolve_hf_repo()
    _assert_one_clear_error(info.value, "SakanaAI/kame", "HF_HUB_OFFLINE", "model.safetensors", "config.json",
                            "moshi_lm_kwargs.json", "huggingface-cli download SakanaAI/kame")
    assert info.value.missing[0] == "config.json"


def test_offline_moshi_baseline_is_one_clear_error(offline_hub: Path) -> None:
    with pytest.raises(CheckpointUnavailable) as info:
        resolve_moshi_baseline()
    _assert_one_clear_error(info.value, "kyutai/moshiko-pytorch-bf16", "HF_HUB_OFFLINE", loaders.MIMI_NAME)


def test_partially_cached_repo_names_the_missing_file(offline_hub: Path, parts: dict[str, Path]) -> None:
    config = {**tiny_lm_kwargs(text_card=VOCAB), "moshi_name": "kame.safetensors", "mimi_name": "mimi.safetensors",
              "tokenizer_name": "tokenizer.model"}
    _hub_snapshot(offline_hub, "someone/kame-tiny", {"kame.safetensors": parts["kame"],
                                                    "mimi.safetensors": parts["mimi"]}, config)
    with pytest.raises(CheckpointUnavailable) as info:
        resolve_hf_repo("someone/kame-tiny")
    assert info.value.missing == ("tokenizer.model",)
    _assert_one_clear_error(info.value, "someone/kame-tiny", "HF_HUB_OFFLINE")


def test_local_folder_lists_every_missing_file(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointUnavailable) as info:
        resolve_local_folder(tmp_path)
    assert [m.split(" (")[0] for m in info.value.missing] == ["LM kwargs", "Mimi weights", "tokenizer"]
    _assert_one_clear_error(info.value, "moshi_lm_kwargs.json", "mimi_weights=", "SakanaAI/kame")
    with pytest.raises(CheckpointUnavailable, match="no such folder"):
        resolve_local_folder(tmp_path / "absent")


# ------------------------------------------------------------------------------------ loading
def test_hub_repo_loads_offline_from_the_cache(offline_hub: Path, parts: dict[str, Path]) -> None:
    config = {**tiny_lm_kwargs(text_card=VOCAB), "moshi_name": "model.safetensors",
              "mimi_name": "mimi.safetensors", "tokenizer_name": "tokenizer.model",
              "mimi_config_name": "mimi_config.json", "lm_gen_config": {"temp": 0.6}}
    _hub_snapshot(offline_hub, "someone/kame-tiny", {"model.safetensors": parts["legacy"],
                                                    "mimi.safetensors": parts["mimi"],
                                                    "mimi_config.json": parts["mimi_config"],
                                                    "tokenizer.model": parts["tokenizer"]}, config)
    ckpt = resolve_hf_repo("someone/kame-tiny")
    assert ckpt.kind == "neural-kame" and ckpt.oracle and ckpt.lm_gen_config == {"temp": 0.6}
    assert ckpt.lm_kwargs["dim"] == 64 and "moshi_name" not in ckpt.lm_kwargs
    fe = load_front_end(ckpt, device="cpu", dtype=torch.float32)
    assert fe.provenance.kind == "neural-kame" and fe.provenance.model_id == "someone/kame-tiny"
    assert fe.gen.temp == 0.6 and fe.tokenizer.start_token_id == VOCAB
    lm = fe.lm
    assert isinstance(lm, KameLM) and lm.oracle_emb is not None
    assert torch.equal(lm.oracle_emb.weight, lm.text_emb.weight)  # legacy weights upgraded
    fe.reset(0)
    assert fe.step(torch.zeros(1920).numpy(), fe.tokenizer.start_token_id).audio.shape == (1920,)
    fe.close()


def test_local_kame_folder(tmp_path: Path, parts: dict[str, Path]) -> None:
    _link(parts["kame"], tmp_path / "model.safetensors")
    (tmp_path / "moshi_lm_kwargs.json").write_text(json.dumps(tiny_lm_kwargs(text_card=VOCAB)))
    ckpt = resolve_local_folder(tmp_path, mimi_weights=parts["mimi"], tokenizer=parts["tokenizer"],
                                mimi_config=small_mimi_config())
    assert ckpt.provenance.kind == "neural-kame" and ckpt.model_id == str(tmp_path)
    lm = load_lm(ckpt, dtype=torch.float32)
    assert lm.oracle_enabled and lm.oracle_emb is not None
    assert not torch.equal(lm.oracle_emb.weight, lm.text_emb.weight)  # trained oracle kept


def test_local_moshi_baseline_is_the_oracle_off_model(tmp_path: Path, parts: dict[str, Path]) -> None:
    _link(parts["kame"], tmp_path / "model.safetensors")  # a KAME checkpoint loaded as baseline: oracle dropped
    _link(parts["mimi"], tmp_path / loaders.MIMI_NAME)
    _link(parts["tokenizer"], tmp_path / loaders.TEXT_TOKENIZER_NAME)
    (tmp_path / "config.json").write_text(json.dumps({**tiny_lm_kwargs(text_card=VOCAB), "model_type": "moshi"}))
    ckpt = resolve_moshi_baseline(tmp_path)
    assert ckpt.kind == "neural-moshi" and not ckpt.oracle and "model_type" not in ckpt.lm_kwargs
    lm = load_lm(ckpt, dtype=torch.float32)
    assert lm.oracle_emb is None and not lm.oracle_enabled
    assert not any(k.startswith("oracle_emb.") for k in lm.state_dict())


def test_local_kame_folder_as_a_session_pool(tmp_path: Path, parts: dict[str, Path]) -> None:
    from kame_core.neural import load_session_pool
    from kame_core.protocols import PoolFull

    _link(parts["kame"], tmp_path / "model.safetensors")
    (tmp_path / "moshi_lm_kwargs.json").write_text(json.dumps(tiny_lm_kwargs(text_card=VOCAB)))
    ckpt = resolve_local_folder(tmp_path, mimi_weights=parts["mimi"], tokenizer=parts["tokenizer"],
                                mimi_config=small_mimi_config())
    with load_session_pool(ckpt, 2, device="cpu", dtype=torch.float32, use_sampling=False) as pool:
        assert pool.provenance.kind == "neural-kame" and pool.gen.oracle_active and not pool.gen.use_sampling
        a, b = pool.join(), pool.join()
        with pytest.raises(PoolFull):
            pool.join()
        out = a.step(torch.zeros(1920).numpy(), a.tokenizer.start_token_id)
        assert out.audio.shape == (1920,) and isinstance(b.tokenizer, SentencePieceTokenizer)
        assert b.tokenizer.vocab_size == VOCAB
