"""Small self-contained assets for random-weight front-ends, and a complete tiny checkpoint anyone can make.

Nothing here is downloaded: the tokenizer is trained in a fraction of a second on a few sentences, with
Moshi's special ids (0 unknown / end of padding, 3 padding), so a tiny LM and the real code paths can run
anywhere.

``python -m kame_core.neural.tiny DIR`` writes a checkpoint folder in the official finetuning layout
(:func:`write_tiny_checkpoint`): every door that takes ``--weights`` / ``KAME_WEIGHTS`` runs on it, on CPU, in
real time. Its weights are random: whatever it says is noise, and everything that shows it says so.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import sentencepiece

_SENTENCES = (
    "hello there how are you doing today",
    "the weather is nice and sunny this morning",
    "I would like a cup of tea please",
    "what time is it in Tokyo right now",
    "KAME speaks while it thinks about the answer",
    "an oracle gives hints to the front end model",
    "the capital of France is Paris",
    "thank you very much for asking",
)

#: what every view, file and log says about a checkpoint made here
TINY_LABEL = "random weights, tiny — a plumbing check, not a trained model"
#: our marker file in a checkpoint folder (moshi's loaders ignore it)
MARKER = "kame_studio.json"
MIMI_CONFIG = "mimi_config.json"
VOCAB = 64


def train_tiny_tokenizer(path: str | Path, vocab_size: int = VOCAB) -> Path:
    """Train a sentencepiece model at ``path`` (``.model``) with Moshi's special ids; returns the path.

    The vocabulary may come out slightly smaller than ``vocab_size``; read the real size from the model.
    """
    path = Path(path)
    with path.open("wb") as out:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(_SENTENCES * 4), model_writer=out, vocab_size=vocab_size,
            model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=3, hard_vocab_limit=False,
            minloglevel=2)
    return path


def write_tiny_checkpoint(folder: str | Path, *, seed: int = 0, oracle: bool = True) -> Path:
    """Write a complete random-weight checkpoint into ``folder`` (made if missing) and return it.

    Layout (the official finetuning output plus moshi's file names): ``model.safetensors`` (a ~2M-parameter
    Moshi-shaped LM, with the oracle embedding unless ``oracle`` is False: then it is a Moshi-baseline
    layout), ``moshi_lm_kwargs.json``, Mimi weights and text tokenizer under moshi's names, ``config.json``
    (moshi's hub config naming them, with ``mimi_config_name``), ``mimi_config.json`` (a narrow Mimi with
    the real frame geometry) and ``kame_studio.json`` (says the weights are random).
    """
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file

    from .configs import small_mimi_config, tiny_lm_kwargs
    from .model import KameLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    lm_kwargs = tiny_lm_kwargs(text_card=VOCAB)
    lm = KameLM(oracle=oracle, **lm_kwargs)
    if oracle:
        with torch.no_grad():  # a trained oracle embedding is not the text embedding: make it its own
            assert lm.oracle_emb is not None  # made with oracle=True
            lm.oracle_emb.weight.normal_(std=0.02)
    save_file({k: v.detach().contiguous() for k, v in lm.state_dict().items()}, str(folder / loaders.MOSHI_NAME))
    mimi_config = small_mimi_config()
    mimi = loaders.get_mimi(None, mimi_config)
    save_file({k: v.detach().contiguous() for k, v in mimi.state_dict().items()}, str(folder / loaders.MIMI_NAME))
    train_tiny_tokenizer(folder / loaders.TEXT_TOKENIZER_NAME, VOCAB)
    (folder / "moshi_lm_kwargs.json").write_text(json.dumps(lm_kwargs, indent=1))
    (folder / MIMI_CONFIG).write_text(json.dumps(mimi_config, indent=1))
    (folder / "config.json").write_text(json.dumps(
        {**lm_kwargs, "model_type": "moshi", "moshi_name": loaders.MOSHI_NAME, "mimi_name": loaders.MIMI_NAME,
         "tokenizer_name": loaders.TEXT_TOKENIZER_NAME, "mimi_config_name": MIMI_CONFIG}, indent=1))
    (folder / MARKER).write_text(json.dumps(
        {"random_weights": True, "label": TINY_LABEL, "seed": seed, "oracle": oracle,
         "made_by": "python -m kame_core.neural.tiny"}, indent=1))
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kame_core.neural.tiny",
                                     description="Write a tiny random-weight KAME checkpoint folder "
                                                 f"({TINY_LABEL}).")
    parser.add_argument("folder", type=Path, help="where to write it (created if missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moshi", action="store_true",
                        help="without the oracle embedding: a Moshi-baseline layout (for --moshi-weights)")
    args = parser.parse_args(argv)
    if args.folder.exists() and not args.folder.is_dir():
        parser.error(f"{args.folder} exists and is not a folder")
    folder = write_tiny_checkpoint(args.folder, seed=args.seed, oracle=not args.moshi)
    size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    print(f"wrote a tiny {'Moshi-baseline' if args.moshi else 'KAME'} checkpoint ({TINY_LABEL}) to {folder} "
          f"({size:.1f} MB). Serve it: python -m kame_core.serve --weights {folder} --device cpu")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
