"""Finding and loading neural front-end checkpoints: KAME (Hugging Face or local folder), the Moshi baseline.

Resolving (``resolve_*``) only finds files and reads configs, and returns a :class:`NeuralCheckpoint`;
loading (``load_*``) builds models from one. Hugging Face repos are resolved with moshi's own
``CheckpointInfo.from_hf_repo`` (the repo's ``config.json`` names the LM weights, Mimi weights, tokenizer and
LM keyword arguments); only the model class differs. Any missing file, offline or not, ends in one
:class:`~kame_core.protocols.CheckpointUnavailable` that says what is missing and how to provide it.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import constants as hf_constants
from huggingface_hub import hf_hub_download, try_to_load_from_cache
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from moshi.models import loaders
from moshi.models.compression import MimiModel
from safetensors.torch import load_file

from ..protocols import CheckpointUnavailable
from ..record.trace import Provenance
from .configs import moshi_7b_lm_kwargs
from .frontend import NeuralFrontEnd
from .generation import KameLMGen
from .kv_settings import KVCacheSettings
from .model import KameLM, upgrade_legacy_state_dict, without_oracle
from .pool import SessionPool
from .tokenizer import SentencePieceTokenizer

KAME_REPO = "SakanaAI/kame"
MOSHI_REPO = "kyutai/moshiko-pytorch-bf16"
LOCAL_LM_KWARGS = "moshi_lm_kwargs.json"
LOCAL_WEIGHTS = loaders.MOSHI_NAME  # model.safetensors
HUB_CONFIG = "config.json"
#: keys of a hub config.json that are not LM keyword arguments (moshi's CheckpointInfo pops the same)
_HUB_CONFIG_KEYS = frozenset({"moshi_name", "mimi_name", "mimi_config_name", "tokenizer_name", "lora_name",
                              "model_type", "lm_gen_config", "tts_config", "stt_config", "model_id"})
#: keys of a checkpoint's lm_gen_config that the front-end's sampler takes
_SAMPLING_KEYS = frozenset({"use_sampling", "temp", "temp_text", "top_k", "top_k_text"})


@dataclass(frozen=True)
class NeuralCheckpoint:
    """Where a front-end checkpoint's parts are and how to build its LM."""

    lm_weights: Path
    mimi_weights: Path
    tokenizer: Path
    lm_kwargs: dict[str, Any]
    oracle: bool
    kind: str  # provenance kind: "neural-kame" or "neural-moshi"
    model_id: str
    mimi_config: dict[str, Any] | None = None
    lm_gen_config: dict[str, Any] = field(default_factory=dict)
    #: the folder says its weights are random (``kame_studio.json``, written by :mod:`.tiny`)
    random_weights: bool = False
    random_label: str = ""
    #: a change to the checkpoint's own settings, said in every label (e.g. a shorter KV cache)
    note: str = ""

    @property
    def provenance(self) -> Provenance:
        role = ("KAME front-end" if self.oracle else "Moshi baseline (oracle stream off)") + \
            (f" ({self.note})" if self.note else "")
        if self.random_weights:  # never shown as a trained model
            return Provenance(kind="neural-random", model_id=self.model_id, version=f"moshi {_moshi_version()}",
                              label=f"{role}: {self.random_label or 'random weights'}")
        return Provenance(kind=self.kind, model_id=self.model_id, version=f"moshi {_moshi_version()}", label=role)


# ------------------------------------------------------------------------------------------ remedies
def _remedies(repo: str, oracle: bool) -> list[str]:
    folder = (f"a local folder with {LOCAL_WEIGHTS} + {LOCAL_LM_KWARGS}, plus the Mimi weights and the "
              "tokenizer paths (resolve_local_folder)") if oracle else (
              f"a local folder with {LOCAL_WEIGHTS}, {loaders.MIMI_NAME} and {loaders.TEXT_TOKENIZER_NAME} "
              "(resolve_moshi_baseline(folder))")
    return [f"download it once with network access: unset HF_HUB_OFFLINE, or run "
            f"`huggingface-cli download {repo}` (cache: {hf_constants.HF_HUB_CACHE})",
            "or give another Hugging Face repo id that holds the checkpoint",
            f"or use {folder}"]


def _hub_reason(err: BaseException) -> str:
    if hf_constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE=1 is set and the files are not in the local Hugging Face cache"
    if isinstance(err, GatedRepoError):
        return "the repository is gated: accept its terms on huggingface.co and log in (`huggingface-cli login`)"
    if isinstance(err, RepositoryNotFoundError):
        return "repository not found (or private: log in with `huggingface-cli login`)"
    if isinstance(err, RevisionNotFoundError):
        return "revision not found in the repository"
    if isinstance(err, LocalEntryNotFoundError):
        return "the Hub could not be reached and the files are not in the local Hugging Face cache"
    if isinstance(err, EntryNotFoundError):
        return "a file is not in the repository"
    first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {first_line}"


def _not_cached(repo: str, names: Sequence[str], revision: str | None) -> list[str]:
    return [n for n in names if not isinstance(try_to_load_from_cache(repo, n, revision=revision), str)]


def _expected_hub_files(config_path: str | None) -> list[str]:
    names = {"moshi_name": loaders.MOSHI_NAME, "mimi_name": loaders.MIMI_NAME,
             "tokenizer_name": loaders.TEXT_TOKENIZER_NAME}
    if config_path is not None:
        raw = json.loads(Path(config_path).read_text())
        names = {k: raw.get(k, v) for k, v in names.items()}
    return [HUB_CONFIG, *names.values()]


def _require_files(source: str, paths: dict[str, Path], remedies: list[str]) -> None:
    missing = [f"{what} ({path})" for what, path in paths.items() if not Path(path).is_file()]
    if missing:
        raise CheckpointUnavailable(source, missing, "files not found", remedies)


# ------------------------------------------------------------------------------------------ resolving
def _fetch_config(repo: str, revision: str | None) -> str | None:
    """The repo's config.json, or None when the repo has none (a legacy Moshi repo)."""
    try:
        return hf_hub_download(repo, HUB_CONFIG, revision=revision)
    except LocalEntryNotFoundError:
        raise  # offline or unreachable: unknown, not absent
    except EntryNotFoundError:
        return None


def resolve_hf_repo(repo: str = KAME_REPO, *, oracle: bool = True, revision: str | None = None,
                    moshi_weights: str | Path | None = None, mimi_weights: str | Path | None = None,
                    tokenizer: str | Path | None = None) -> NeuralCheckpoint:
    """Resolve a Hugging Face checkpoint with moshi's loader (overrides: local paths or ``hf://`` names)."""
    config_path: str | None = None
    try:
        config_path = _fetch_config(repo, revision)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # moshi warns "assuming Moshi 7B" for repos without config.json
            info = loaders.CheckpointInfo.from_hf_repo(repo, moshi_weights, mimi_weights, tokenizer,
                                                       config_path=config_path, revision=revision)
    except (HfHubHTTPError, OSError) as err:
        missing = _not_cached(repo, _expected_hub_files(config_path), revision)
        raise CheckpointUnavailable(f"Hugging Face repo '{repo}'", missing, _hub_reason(err),
                                    _remedies(repo, oracle)) from None
    _require_files(f"Hugging Face repo '{repo}'", {"LM weights": info.moshi_weights,
                                                   "Mimi weights": info.mimi_weights,
                                                   "tokenizer": info.tokenizer}, _remedies(repo, oracle))
    return NeuralCheckpoint(
        lm_weights=info.moshi_weights, mimi_weights=info.mimi_weights, tokenizer=info.tokenizer,
        lm_kwargs=info.lm_config if info.lm_config is not None else moshi_7b_lm_kwargs(),
        oracle=oracle, kind="neural-kame" if oracle else "neural-moshi", model_id=repo,
        mimi_config=info.mimi_config, lm_gen_config=dict(info.lm_gen_config))


def resolve_local_folder(folder: str | Path, *, mimi_weights: str | Path | None = None,
                         tokenizer: str | Path | None = None, mimi_config: dict[str, Any] | None = None,
                         oracle: bool = True) -> NeuralCheckpoint:
    """A KAME checkpoint of the official finetuning workflow: ``model.safetensors`` +
    ``moshi_lm_kwargs.json`` in ``folder``; Mimi weights and tokenizer given (default: looked up in
    ``folder`` under moshi's file names)."""
    folder = Path(folder)
    source = f"local folder '{folder}'"
    remedies = [f"put {LOCAL_WEIGHTS} and {LOCAL_LM_KWARGS} in the folder (official finetuning output)",
                f"pass mimi_weights= and tokenizer= (or place {loaders.MIMI_NAME} and "
                f"{loaders.TEXT_TOKENIZER_NAME} in the folder)",
                f"or load from Hugging Face instead (resolve_hf_repo('{KAME_REPO}'))"]
    if not folder.is_dir():
        raise CheckpointUnavailable(source, [str(folder)], "no such folder", remedies)
    paths = {"LM weights": folder / LOCAL_WEIGHTS, "LM kwargs": folder / LOCAL_LM_KWARGS,
             "Mimi weights": Path(mimi_weights) if mimi_weights else folder / loaders.MIMI_NAME,
             "tokenizer": Path(tokenizer) if tokenizer else folder / loaders.TEXT_TOKENIZER_NAME}
    _require_files(source, paths, remedies)
    return NeuralCheckpoint(
        lm_weights=paths["LM weights"], mimi_weights=paths["Mimi weights"], tokenizer=paths["tokenizer"],
        lm_kwargs=json.loads(paths["LM kwargs"].read_text()), oracle=oracle,
        kind="neural-kame" if oracle else "neural-moshi", model_id=str(folder),
        mimi_config=mimi_config if mimi_config is not None else _folder_mimi_config(folder),
        **_folder_marker(folder))


def resolve_moshi_baseline(source: str | Path = MOSHI_REPO) -> NeuralCheckpoint:
    """The Moshi baseline (KAME's LM with the oracle stream off), from a repo id or a local copy of one.

    A local folder holds moshi's file names; its LM kwargs come from ``config.json`` or
    ``moshi_lm_kwargs.json`` when present, else the Moshi 7B configuration.
    """
    folder = Path(source)
    if not folder.is_dir():
        return resolve_hf_repo(str(source), oracle=False)
    remedies = [f"copy {LOCAL_WEIGHTS}, {loaders.MIMI_NAME} and {loaders.TEXT_TOKENIZER_NAME} of "
                f"'{MOSHI_REPO}' into the folder", f"or load it from Hugging Face ('{MOSHI_REPO}')"]
    paths = {"LM weights": folder / LOCAL_WEIGHTS, "Mimi weights": folder / loaders.MIMI_NAME,
             "tokenizer": folder / loaders.TEXT_TOKENIZER_NAME}
    _require_files(f"local folder '{folder}'", paths, remedies)
    lm_kwargs, lm_gen_config = moshi_7b_lm_kwargs(), {}
    for name in (HUB_CONFIG, LOCAL_LM_KWARGS):
        if (folder / name).is_file():
            raw = json.loads((folder / name).read_text())
            lm_gen_config = raw.pop("lm_gen_config", {})
            lm_kwargs = {k: v for k, v in raw.items() if k not in _HUB_CONFIG_KEYS}
            break
    return NeuralCheckpoint(lm_weights=paths["LM weights"], mimi_weights=paths["Mimi weights"],
                            tokenizer=paths["tokenizer"], lm_kwargs=lm_kwargs, oracle=False, kind="neural-moshi",
                            model_id=str(folder), lm_gen_config=lm_gen_config,
                            mimi_config=_folder_mimi_config(folder), **_folder_marker(folder))


def resolve_weights(source: str | Path, *, oracle: bool = True) -> NeuralCheckpoint:
    """``--weights`` / ``--moshi-weights``: a local folder (KAME finetuning layout, or with ``oracle=False`` a
    Moshi-baseline folder) or a Hugging Face repo id."""
    if not str(source).strip():
        raise CheckpointUnavailable("weights", [], "no folder or repo id given",
                                    [f"give a local checkpoint folder or a repo id such as '{KAME_REPO}'"])
    if Path(source).expanduser().is_dir():
        folder = Path(source).expanduser()
        return resolve_local_folder(folder) if oracle else resolve_moshi_baseline(folder)
    if oracle:
        return resolve_hf_repo(str(source))
    return resolve_moshi_baseline(str(source))


def with_kv_frames(ckpt: NeuralCheckpoint, frames: int) -> NeuralCheckpoint:
    """``ckpt`` with each session's KV cache keeping ``frames`` frames of history (0: unchanged); said in its
    provenance."""
    own = int(ckpt.lm_kwargs.get("context") or 0)
    if not frames or frames == own:
        return ckpt
    return dataclasses.replace(ckpt, lm_kwargs={**ckpt.lm_kwargs, "context": frames},
                               note=kv_note(frames, own))


def kv_note(frames: int, own: int) -> str:
    return (f"KV cache {frames} frames = {frames * 0.08:.0f} s of history instead of the trained {own}; "
            "quality at this length untested")


def _folder_mimi_config(folder: Path) -> dict[str, Any] | None:
    """A folder's own Mimi configuration: the file its ``config.json`` names (``mimi_config_name``, as in moshi's
    hub configs), else ``mimi_config.json`` when present; None (the published Mimi) otherwise."""
    name = "mimi_config.json"
    if (folder / HUB_CONFIG).is_file():
        name = json.loads((folder / HUB_CONFIG).read_text()).get("mimi_config_name") or name
    path = folder / Path(name).name  # a name, never a path out of the folder
    return json.loads(path.read_text()) if path.is_file() else None


def _folder_marker(folder: Path) -> dict[str, Any]:
    """What ``kame_studio.json`` says of the weights (random or not)."""
    path = folder / "kame_studio.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    return {"random_weights": bool(raw.get("random_weights")), "random_label": str(raw.get("label", ""))}



# ------------------------------------------------------------------------------------------ loading
def normalize_lm_kwargs(lm_kwargs: dict[str, Any]) -> dict[str, Any]:
    """LM kwargs as moshi's loader cleans them (deprecated / renamed keys); conditioned and LoRA models
    are not front-ends and are refused."""
    kwargs = dict(lm_kwargs)
    for key in ("conditioners", "fuser", "lora"):
        if kwargs.get(key):
            raise ValueError(f"LM kwargs with '{key}' are not supported by the KAME front-end")
        kwargs.pop(key, None)
    for key in ("lora_rank", "lora_scaling", "depformer_causal"):
        kwargs.pop(key, None)
    if "demux_second_stream" in kwargs:
        kwargs["demux_second_text_stream"] = kwargs.pop("demux_second_stream")
    return kwargs


def build_lm(lm_kwargs: dict[str, Any], *, oracle: bool = True, weights: str | Path | None = None,
             device: torch.device | str = "cpu", dtype: torch.dtype = torch.bfloat16) -> KameLM:
    """A :class:`KameLM` in eval mode: random weights, or ``weights`` (safetensors; legacy upgraded)."""
    kwargs = normalize_lm_kwargs(lm_kwargs)
    if weights is None:
        return KameLM(oracle=oracle, device=device, dtype=dtype, **kwargs).eval()
    lm = KameLM(oracle=oracle, device="meta", dtype=dtype, **kwargs)
    loaded = load_file(str(weights), device=str(device))
    state: Mapping[str, torch.Tensor] = {k: v.to(dtype) if v.is_floating_point() else v for k, v in loaded.items()}
    state = upgrade_legacy_state_dict(state) if oracle else without_oracle(state)
    lm.load_state_dict(state, assign=True)
    return lm.eval()


def mimi_codebooks(lm_kwargs: dict[str, Any]) -> int:
    """How many Mimi codebooks an LM reads and writes (as moshi's ``CheckpointInfo.get_mimi``)."""
    return max(lm_kwargs["dep_q"], lm_kwargs["n_q"] - lm_kwargs["dep_q"])


def load_lm(ckpt: NeuralCheckpoint, device: torch.device | str = "cpu",
            dtype: torch.dtype = torch.bfloat16) -> KameLM:
    return build_lm(ckpt.lm_kwargs, oracle=ckpt.oracle, weights=ckpt.lm_weights, device=device, dtype=dtype)


def load_mimi(ckpt: NeuralCheckpoint, device: torch.device | str = "cpu") -> MimiModel:
    return loaders.get_mimi(ckpt.mimi_weights, ckpt.mimi_config, device=device,
                            num_codebooks=mimi_codebooks(ckpt.lm_kwargs))


def load_tokenizer(ckpt: NeuralCheckpoint, lm: KameLM) -> SentencePieceTokenizer:
    return SentencePieceTokenizer.from_file(ckpt.tokenizer, lm.text_initial_token_id, lm.text_padding_token_id,
                                            lm.end_of_text_padding_id)


def load_front_end(ckpt: NeuralCheckpoint, device: torch.device | str = "cuda",
                   dtype: torch.dtype = torch.bfloat16, **sampling: Any) -> NeuralFrontEnd:
    """A ready front-end for ``ckpt`` (sampling: the checkpoint's ``lm_gen_config``, then ``sampling``)."""
    lm = load_lm(ckpt, device, dtype)
    options = {**{k: v for k, v in ckpt.lm_gen_config.items() if k in _SAMPLING_KEYS}, **sampling}
    return NeuralFrontEnd(lm, load_mimi(ckpt, device), load_tokenizer(ckpt, lm), ckpt.provenance, **options)


def load_session_pool(ckpt: NeuralCheckpoint, capacity: int, device: torch.device | str = "cuda",
                      dtype: torch.dtype = torch.bfloat16, *, gather_s: float = 0.02,
                      kv: KVCacheSettings | None = None, **sampling: Any) -> SessionPool:
    """Up to ``capacity`` concurrent sessions on one copy of ``ckpt``'s models (see :class:`SessionPool`);
    sampling as :func:`load_front_end`; ``kv``: how the KV cache is kept (:mod:`.kv_cache`)."""
    lm = load_lm(ckpt, device, dtype)
    options = {**{k: v for k, v in ckpt.lm_gen_config.items() if k in _SAMPLING_KEYS}, **sampling}
    return SessionPool(KameLMGen(lm, kv=kv, **options), load_mimi(ckpt, device), capacity,
                       tokenizer=load_tokenizer(ckpt, lm), provenance=with_kv_note(ckpt.provenance, kv, dtype),
                       gather_s=gather_s)


def with_kv_note(provenance: Provenance, kv: KVCacheSettings | None, dtype: torch.dtype) -> Provenance:
    """``provenance`` saying so when the KV cache is stored in another dtype than the model's (outputs change;
    growth does not change them and is not noted)."""
    if kv is None or not kv.dtype or (kv.dtype == "bf16" and dtype == torch.bfloat16):
        return provenance
    return dataclasses.replace(provenance, label=f"{provenance.label} (KV cache stored in {kv.dtype})")


#: ``--weights random:SIZE``: random-weight models built in memory, no file and no download
RANDOM_SIZES = ("tiny", "moshi-7b")


def random_session_pool(size: str, capacity: int, device: torch.device | str = "cpu",
                        dtype: torch.dtype = torch.float32, *, seed: int = 0, gather_s: float = 0.02,
                        kv_frames: int = 0, kv: KVCacheSettings | None = None) -> SessionPool:
    """A :class:`SessionPool` of random weights at ``size`` (``tiny``: the tiny checkpoint's shapes; ``moshi-7b``:
    the published Moshi 7B LM with the oracle embedding + the published Mimi), for load and speed checks of the
    real server at size without any download. Its provenance says the weights are random. The text tokenizer is
    the tiny one (its ids fit any text card): what such a model says is noise."""
    import tempfile

    from .configs import mimi_config, moshi_7b_lm_kwargs, small_mimi_config, tiny_lm_kwargs
    from .tiny import VOCAB, train_tiny_tokenizer

    if size not in RANDOM_SIZES:
        raise ValueError(f"random:{size}: choose random:{' or random:'.join(RANDOM_SIZES)}")
    torch.manual_seed(seed)
    lm_kwargs = tiny_lm_kwargs(text_card=VOCAB) if size == "tiny" else moshi_7b_lm_kwargs()
    note = ""
    if kv_frames and kv_frames != lm_kwargs["context"]:
        note = f" ({kv_note(kv_frames, lm_kwargs['context'])})"
        lm_kwargs["context"] = kv_frames
    lm = build_lm(lm_kwargs, device=device, dtype=dtype)
    mimi = loaders.get_mimi(None, small_mimi_config() if size == "tiny" else mimi_config(), device=device,
                            num_codebooks=mimi_codebooks(lm_kwargs))
    with tempfile.TemporaryDirectory() as tmp:  # sentencepiece reads the model into memory
        tokenizer = SentencePieceTokenizer.from_file(train_tiny_tokenizer(f"{tmp}/tok.model"),
                                                     lm.text_initial_token_id, lm.text_padding_token_id,
                                                     lm.end_of_text_padding_id)
    label = f"KAME front-end{note}: random weights, {'tiny' if size == 'tiny' else 'Moshi-7B size'} — a load " \
            "and speed check, not a trained model"
    provenance = Provenance(kind="neural-random", model_id=f"random:{size}(seed={seed})",
                            version=f"moshi {_moshi_version()}", label=label)
    return SessionPool(KameLMGen(lm, kv=kv), mimi, capacity, tokenizer=tokenizer,
                       provenance=with_kv_note(provenance, kv, dtype), gather_s=gather_s)


def random_front_end(lm_kwargs: dict[str, Any], tokenizer_path: str | Path, *, seed: int = 0,
                     mimi_config: dict[str, Any] | None = None, device: torch.device | str = "cpu",
                     dtype: torch.dtype = torch.float32, **sampling: Any) -> NeuralFrontEnd:
    """A front-end with random weights (architecture checks only: provenance ``neural-random``)."""
    torch.manual_seed(seed)
    lm = build_lm(lm_kwargs, device=device, dtype=dtype)
    mimi = loaders.get_mimi(None, mimi_config, device=device, num_codebooks=mimi_codebooks(lm_kwargs))
    tokenizer = SentencePieceTokenizer.from_file(tokenizer_path, lm.text_initial_token_id,
                                                 lm.text_padding_token_id, lm.end_of_text_padding_id)
    provenance = Provenance(kind="neural-random", model_id=f"random-init(seed={seed})",
                            version=f"moshi {_moshi_version()}",
                            label=f"random weights, dim {lm.dim}, {len(lm.transformer.layers)} layers")
    return NeuralFrontEnd(lm, mimi, tokenizer, provenance, **sampling)



def _moshi_version() -> str:
    return importlib.metadata.version("moshi")
