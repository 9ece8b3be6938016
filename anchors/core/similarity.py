"""Whether a resampled sentence says something else than the step it replaced (pure).

The paper compares sentence embeddings (cosine of all-MiniLM-L6-v2 vectors, threshold 0.8). No model can be
downloaded here, so the comparison is the cosine of TF-IDF vectors (scikit-learn): word unigrams and
bigrams, sublinear term frequency, the vocabulary and document frequencies fitted on the sentences of one
comparison (the original step and its resamples). TF-IDF sees shared words, not shared meaning: a
paraphrase with other words scores low, so the threshold is lower than the paper's (docs/step-importance.md
says why 0.5)."""

from __future__ import annotations

from collections.abc import Sequence

#: Resamples at least this similar to the original step count as the same step written again.
SIMILARITY_THRESHOLD = 0.5
METHOD = "tfidf-cosine (word 1-2 grams, sublinear tf, fitted per step)"


def similarities(original: str, candidates: Sequence[str]) -> list[float | None]:
    """The TF-IDF cosine of each candidate with ``original``; None for an empty candidate (no first
    sentence to compare). Identical texts score 1; texts sharing no word 0."""
    # scikit-learn (and SciPy under it) is imported here, not with the module: runkinds imports this at every
    # process's start-up, and most processes never compare a sentence (docs/benchmarks.md, "Import").
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    texts = [original, *candidates]
    present = [i for i, t in enumerate(texts) if t.strip()]
    out: list[float | None] = [None] * len(candidates)
    if not original.strip() or len(present) < 2:
        return [None if not c.strip() else (1.0 if c.strip() == original.strip() else 0.0) for c in candidates]
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b")
    try:
        matrix = vectorizer.fit_transform([texts[i] for i in present])
    except ValueError:  # only stop characters: no vocabulary
        return [None if not c.strip() else float(c.strip() == original.strip()) for c in candidates]
    sims = cosine_similarity(matrix[0], matrix).ravel()
    for pos, i in enumerate(present[1:], start=1):
        out[i - 1] = float(min(1.0, max(0.0, sims[pos])))
    return out


def differs(similarity: float | None, threshold: float = SIMILARITY_THRESHOLD) -> bool | None:
    """A resample whose first sentence differs in meaning from the original step (None: no sentence)."""
    return None if similarity is None else similarity < threshold
