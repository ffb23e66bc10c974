"""Which of the four kinds of fault is this: a category for every diagnosis.

An SRE's first question is whom to hand a failure to (hardware, user, platform or
framework), and that must be answered for faults no pattern describes too.  A pattern
match answers it only above the similarity threshold; below it the report would be
silent.  So a multinomial logistic regression (scikit-learn) is trained on every text of
the library, each labelled with its pattern's category:

* features: the MiniLM embedding of the masked text (384-d) plus exact features — the
  canonical error codes of ``l4.rootcause.extract_codes`` (Xid numbers, errno names,
  NCCL error names, Ascend/CANN codes, signals), their families (``fam:xid`` ...) and
  numbers the matcher does not use as evidence (exit codes, errno and signal numbers),
  and generic cues of who must act that any real log carries whatever its wording
  (``_CUE_RULES``: exception classes, errno and signal names, "please report a bug",
  "expected ... got", "not supported", kernel-log prefixes ...);
* samples: every indicator of every pattern, the title+description of every pattern,
  every SRE-confirmed diagnosis' event texts (weighted ``CONFIRMED_WEIGHT``), so a
  confirmation teaches the classifier as well as the matcher, the category
  descriptions of kb/categories.yaml, which say what each category covers in general
  and so carry it to faults no pattern describes, and the real failure lines of
  kb/category_exemplars.yaml (weighted ``EXEMPLAR_WEIGHT``): lines from public failure
  reports labelled with the category of the report's resolution, which widen the
  wordings the classifier has seen beyond the library's indicators.

A query (the events of a report, or the lines of ``kb match``) is classified line by
line; lines are weighted by how much they look like a fault (``relevance``: their best
similarity to any library text, errors and codes counting more than plain lines), and
the result is combined with the matcher's best score per category as a product of
experts, so a confident pattern match pulls the category with it while a weak one
hardly matters.  The reported confidences are calibrated with a temperature
(``CONFIDENCE_TEMPERATURE``, fitted on the leave-one-source-out log-likelihood), which
never changes their order.

Everything here is a pure function over plain data (arrays, lists, dicts); where the
training data comes from and where the fitted model is kept (the knowledge base) is
``l4.rootcause``'s and ``l4.kbstore``'s business.  Fitting imports scikit-learn; a
stored model predicts with numpy alone (``predict_proba`` is the same softmax), which
keeps ``l4 kb match`` fast.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

CATEGORIES = ("hardware", "user", "platform", "framework")
VERSION = "5"  # bump when features or training change: stored models are then refitted

# Chosen by leave-one-source-out cross-validation over the library and on the NON-held-out
# failure excerpts (benchmarks/kb_accuracy.py --sweep), never on held-out excerpts; on 60
# patterns neighbouring settings differ by one or two patterns, so these are not sharp.
C = 4.0  # inverse regularisation of the logistic regression
CODE_WEIGHT = 0.6  # size of one exact feature relative to the unit-norm embedding
CONFIRMED_WEIGHT = 5.0  # a confirmed diagnosis counts like this many library texts
WHOLE_SAMPLE_WEIGHT = 0.5  # a pattern's title+description: a weaker sample than a real line
DESCRIPTION_WEIGHT = 1.0  # a phrase of kb/categories.yaml (what the category means)
EXEMPLAR_WEIGHT = 3.0  # a real failure line of kb/category_exemplars.yaml (0: not used)
SHARPNESS = 4.0  # how strongly the most fault-like lines dominate a query
# Evaluated 2026-12-02 with the real lines of kb/category_exemplars.yaml (leave-one-source-out
# on every 3rd pattern and the non-held-out real excerpts, and the diagnosed development jobs
# 0..29; EXEMPLAR_WEIGHT 0/1/2/3/5 x MATCH_GAMMA 6/3/1.5/0.75/0): a weaker suggestion vote
# (1.5) read new wordings better (LOSO sample 71.3 -> 75.9 %, excerpts 51.9 -> 55.6 %), but
# cost one diagnosed job (a culprit's InfiniBand port error among louder collective
# timeouts: 83.3 -> 80.0 %), so the vote keeps its weight.
MATCH_GAMMA = 6.0  # weight of a suggested pattern's score for its category (product of experts)
# Evaluated and NOT adopted (benchmarks/kb_accuracy.py --set ..., 2026-12-01): on a
# leave-one-source-out sample of 87 patterns, words as features (0.6), every pattern
# weighing the same in training (PATTERN_WEIGHT 3, spread over its samples) and the
# geometric mean of the lines together gave 56 right categories against 58 without them,
# although a classifier-only grouped 8-fold check had shown +7.7 points.  Kept as options.
LEXICAL_WEIGHT = 0.0  # size of a text's word block (0: words are not features)
PATTERN_WEIGHT = 0.0  # > 0: each pattern's samples share this weight (0: one per sample)
POOL = "mean"  # how a query's lines are combined: "mean" (arithmetic) or "geometric"
KNN_WEIGHT = 0.0  # share of the nearest patterns' vote (l4.rootcause.neighbour_votes) in the mix
CUES = True  # generic cues as exact features (exception classes, errno names, signals, ...)
TEMPERATURE = 1.0  # a line's class probabilities are softmax(logits / TEMPERATURE)
CONFIDENCE_TEMPERATURE = 1.5  # the reported confidences are p^(1/T), renormalised (calibration)

_EXTRA_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bexit(?:\s*code|code|_code|\s*status)\s*[:=]?\s*(-?\d{1,3})\b", re.I), "EXIT{0}"),
    (re.compile(r"\breturn code\s*[:=]?\s*(-?\d{1,3})\b", re.I), "EXIT{0}"),
    (re.compile(r"\[Errno\s+(\d{1,3})\]", re.I), "ERRNO{0}"),
    (re.compile(r"\bsignal\s*:?\s*(\d{1,2})\b", re.I), "SIGNAL{0}"),
    (re.compile(r"\bXid\b", re.I), "fam:xid"),
    (re.compile(r"\bNCCL\b"), "kw:nccl"),
    (re.compile(r"\bHCCL\b|\bhccl\w*", re.I), "kw:hccl"),
    (re.compile(r"\b(?:CANN|aclrt\w*|ACL)\b"), "kw:cann"),
    (re.compile(r"\bNCCL WARN\b"), "kw:nccl_warn"),
    (re.compile(r"\bTraceback\b|\w+Error:"), "kw:python_error"),
]
# Generic cues every real log carries, whatever its wording: who must act is often told by
# the exception class (a ValueError raised on the user's input), the errno name, the
# signal, the NCCL error class, "please report this bug" (a framework defect) or "expected
# ... but got" (a user's argument or data).  Not tied to any library entry.
_CUE_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b((?:[A-Z][a-z0-9]+)+(?:Error|Exception|Interrupt))\b"), "exc:{0}"),
    (re.compile(r"\b(SIG(?:TERM|HUP|INT|KILL|SEGV|BUS|ABRT|USR1|USR2|PIPE|CONT|STOP|QUIT|FPE|ILL))\b"), "{0}"),
    (re.compile(r"No such file or directory|\bENOENT\b|Errno 2\b", re.I), "ENOENT"),
    (re.compile(r"Permission denied|\bEACCES\b|\bEPERM\b|Operation not permitted", re.I), "EACCES"),
    (re.compile(r"Too many open files|\bEMFILE\b", re.I), "EMFILE"),
    (re.compile(r"Address already in use|\bEADDRINUSE\b", re.I), "EADDRINUSE"),
    (re.compile(r"Connection timed out|\bETIMEDOUT\b|No route to host|\bEHOSTUNREACH\b", re.I), "ETIMEDOUT"),
    (re.compile(r"please (?:file|report|open)|report (?:a|this) bug|this is a bug|"
                r"INTERNAL ASSERT|internal error", re.I), "kw:report_bug"),
    (re.compile(r"\bexpected\b.{0,80}\b(?:got|but|instead|received|found)\b|"
                r"unexpected keyword argument|must be (?:a |an |of |divisible|positive|in )|"
                r"should be (?:a |an |of |divisible|positive|in )|invalid (?:value|argument|choice)", re.I),
     "kw:expectation"),
    (re.compile(r"not supported|unsupported|not implemented|NotImplemented", re.I), "kw:unsupported"),
    (re.compile(r"timed out|timeout|time out", re.I), "kw:timeout"),
    (re.compile(r"out of memory|\bOOM\b", re.I), "kw:oom"),
    (re.compile(r"\bkernel:|\bNVRM\b|\bdmesg\b|\bmlx5_core\b|\bpcieport\b", re.I), "kw:kernel_log"),
    (re.compile(r"\bslurm\w*|\bsrun\b|\bsbatch\b", re.I), "kw:slurm"),
    (re.compile(r"\bkubelet\b|\bpod\b|\bcontainer\b|\bimage\b", re.I), "kw:container"),
    (re.compile(r"\bsite-packages/|\bdist-packages/"), "kw:library_frame"),
]
_ERRNO_NAMES = {"ENOENT", "EACCES", "EMFILE", "EADDRINUSE", "ETIMEDOUT", "ENOSPC", "EIO", "ESTALE", "EDQUOT", "ENOMEM", "ENETUNREACH", "ECONNREFUSED",
                "ECONNRESET", "EPIPE", "EROFS"}


def _family(code: str) -> str | None:
    if code.startswith("XID"):
        return "fam:xid"
    if code.startswith("nccl"):
        return "fam:nccl"
    if code.startswith("ACL") or re.fullmatch(r"E[A-Z]\d{4}|ERR\d{5}", code):
        return "fam:ascend"
    if code in _ERRNO_NAMES:
        return "fam:errno"
    if code.startswith("SIG"):
        return "fam:signal"
    for prefix in ("CUDA_", "NPU_", "SLURM_", "IBV_"):
        if code.startswith(prefix):
            return "fam:" + prefix.rstrip("_").lower()
    return None


_LEX = re.compile(r"[a-z][a-z_]{2,}")
_LEX_STOP = frozenset(
    "the and for with from this that was are not has have had been into than then when while "
    "you your please see more use using can will may line file call".split())


def lexical_features(text: str) -> set[str]:
    """Words of a text as sparse features ``w:word`` (lower case, no digits, no stop
    words): exact tokens such as 'nvrm', 'slurmstepd', 'hccl', 'safetensorerror' that the
    embedding blurs; their weight is spread over the text's words (see featurize)."""
    return {"w:" + w for w in _LEX.findall(text.lower()) if w not in _LEX_STOP}


def exact_features(text: str, codes: Iterable[str]) -> frozenset[str]:
    """Exact features of one text: its canonical codes, their families, extra numbers
    and (with LEXICAL_WEIGHT) its words."""
    out: set[str] = set(lexical_features(text)) if LEXICAL_WEIGHT > 0 else set()
    for c in codes:
        out.add(c)
        fam = _family(c)
        if fam:
            out.add(fam)
    for rx, fmt in (_EXTRA_RULES + _CUE_RULES) if CUES else _EXTRA_RULES:
        for m in rx.finditer(text):
            value = next((g for g in m.groups() if g), "") if m.groups() else ""
            out.add(fmt.format(value))
    return frozenset(out)


@dataclass
class Sample:
    """One training text: its vector, exact features, category, weight and provenance."""

    vector: np.ndarray
    features: frozenset[str]
    category: str
    weight: float = 1.0
    pattern_id: str = ""
    sources: tuple[str, ...] = ()


@dataclass
class CategoryModel:
    """A fitted linear classifier with scikit-learn's attribute names (classes_, coef_,
    intercept_) and ``predict_proba``, stored as plain JSON in the knowledge base."""

    classes_: list[str]
    vocab: list[str]
    coef_: np.ndarray
    intercept_: np.ndarray
    prior: dict[str, float] = field(default_factory=dict)
    n_samples: int = 0

    def transform(self, vectors: np.ndarray, features: Sequence[Iterable[str]]) -> np.ndarray:
        return featurize(vectors, features, self.vocab)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return X @ self.coef_.T + self.intercept_

    def predict_proba(self, X: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        z = self.decision_function(X) / temperature
        if z.shape[1] == 1:  # two classes: scikit-learn's binary layout
            p1 = 1.0 / (1.0 + np.exp(-z[:, 0]))
            return np.column_stack([1.0 - p1, p1])
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X: np.ndarray) -> list[str]:
        return [self.classes_[i] for i in self.predict_proba(X).argmax(axis=1)]

    def to_json(self) -> str:
        return json.dumps({
            "version": VERSION, "classes": self.classes_, "vocab": self.vocab,
            "coef": np.round(self.coef_, 7).tolist(), "intercept": np.round(self.intercept_, 7).tolist(),
            "prior": self.prior, "n_samples": self.n_samples,
        })

    @classmethod
    def from_json(cls, text: str) -> CategoryModel | None:
        """The stored model, or None when it was written by another version (refit)."""
        try:
            d = json.loads(text)
            if d.get("version") != VERSION:
                return None
            return cls(list(d["classes"]), list(d["vocab"]),
                       np.asarray(d["coef"], dtype=np.float64),
                       np.asarray(d["intercept"], dtype=np.float64),
                       {k: float(v) for k, v in d.get("prior", {}).items()}, int(d.get("n_samples", 0)))
        except (ValueError, KeyError, TypeError):
            return None


def featurize(vectors: np.ndarray, features: Sequence[Iterable[str]], vocab: list[str]) -> np.ndarray:
    """[embedding | CODE_WEIGHT * one-hot(codes) | LEXICAL_WEIGHT * l2-normalised
    one-hot(words)] per row, over the features in vocab."""
    vectors = np.asarray(vectors, dtype=np.float64).reshape(len(features), -1)
    index = {f: i for i, f in enumerate(vocab)}
    onehot = np.zeros((len(features), len(vocab)), dtype=np.float64)
    for r, feats in enumerate(features):
        words = [index[f] for f in feats if f.startswith("w:") and f in index]
        for f in feats:
            j = index.get(f)
            if j is not None and not f.startswith("w:"):
                onehot[r, j] = CODE_WEIGHT
        if words:
            onehot[r, words] = LEXICAL_WEIGHT / np.sqrt(len(words))
    return np.hstack([vectors, onehot])


def _from_library(s: Sample) -> bool:
    """A pattern's own text (not a category description, not a confirmed diagnosis)."""
    return not s.pattern_id.startswith(("category:", "exemplar:")) and not any(
        src.startswith("diagnosis:") for src in s.sources)


def train(samples: Sequence[Sample], *, c: float | None = None,
          init: CategoryModel | None = None) -> CategoryModel:
    """Fit the classifier on library and confirmed samples (scikit-learn, lbfgs).

    ``init`` starts the solver from another model's coefficients where the vocabulary
    and classes agree (cross-validation folds start from the full model).  The L2-
    regularised objective is strictly convex, so the fit converges to the same optimum
    from any start; only the number of iterations changes."""
    from sklearn.linear_model import LogisticRegression

    if not samples:
        raise ValueError("no training samples for the category classifier")
    per_pattern: dict[str, int] = {}
    for s in samples:
        if _from_library(s):
            per_pattern[s.pattern_id] = per_pattern.get(s.pattern_id, 0) + 1
    if PATTERN_WEIGHT > 0:
        samples = [replace(s, weight=s.weight * PATTERN_WEIGHT / per_pattern[s.pattern_id])
                   if _from_library(s) else s for s in samples]
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.category] = counts.get(s.category, 0) + 1
    # An exact feature seen once teaches nothing general; keep those seen twice or more.
    df: dict[str, int] = {}
    for s in samples:
        for f in s.features:
            df[f] = df.get(f, 0) + 1
    vocab = sorted(f for f, n in df.items() if n >= 2)
    total = sum(counts.values())
    prior = {k: counts.get(k, 0) / total for k in CATEGORIES}
    classes = sorted(counts)
    if len(classes) == 1:  # nothing to separate: every query gets this category
        k = len(vocab) + len(samples[0].vector)
        return CategoryModel(classes, vocab, np.zeros((1, k)), np.zeros(1), prior, len(samples))
    X = featurize(np.vstack([s.vector for s in samples]), [s.features for s in samples], vocab)
    y = np.array([s.category for s in samples])
    w = np.array([s.weight for s in samples], dtype=np.float64)
    # Categories with few patterns (framework) must not be drowned by large ones.
    w = w * np.array([total / (len(classes) * counts[c_]) for c_ in y])
    lr = LogisticRegression(C=C if c is None else c, max_iter=3000)
    if init is not None and list(init.classes_) == sorted(counts) and init.coef_.shape[0] == len(classes):
        col = {f: i for i, f in enumerate(init.vocab)}
        dim = X.shape[1] - len(vocab)
        coef = np.zeros((len(classes), X.shape[1]))
        coef[:, :dim] = init.coef_[:, :dim]
        for j, f in enumerate(vocab):
            if f in col:
                coef[:, dim + j] = init.coef_[:, dim + col[f]]
        lr.set_params(warm_start=True)
        lr.coef_, lr.intercept_ = coef, init.intercept_.copy()
    from threadpoolctl import threadpool_limits

    # one BLAS thread: small products, and threads spinning against each other on a
    # shared host made a fit several times slower
    with threadpool_limits(limits=1, user_api="blas"):
        lr.fit(X, y, sample_weight=w)
    return CategoryModel(list(lr.classes_), vocab, lr.coef_.copy(), lr.intercept_.copy(), prior,
                         len(samples))


def predict(model: CategoryModel, vectors: np.ndarray, features: Sequence[Iterable[str]],
            relevance: Sequence[float], match_scores: dict[str, float] | None = None,
            neighbours: dict[str, float] | None = None) -> list[dict]:
    """All four categories, most likely first: [{"category", "confidence"}, ...].

    ``relevance`` (one value per text, about 0..1) says how fault-like each text is; the
    texts' class probabilities are averaged with weights softmax(SHARPNESS * relevance).
    ``match_scores`` is the best score per category of the patterns the matcher suggests
    (at or above its threshold; a weaker match proved misleading for new faults); it
    enters as exp(MATCH_GAMMA * score).  ``neighbours`` (category shares of the nearest
    library patterns, a kNN vote) is mixed in linearly with weight KNN_WEIGHT.  Without
    any text the training prior is returned.
    """
    if len(features) == 0:
        probs = {k: model.prior.get(k, 0.25) for k in CATEGORIES}
    else:
        p = model.predict_proba(model.transform(vectors, features), TEMPERATURE)
        r = np.asarray(relevance, dtype=np.float64)
        w = np.exp(SHARPNESS * (r - r.max()))
        w = w / w.sum()
        # weighted geometric mean of the lines' probabilities (a product of experts):
        # one line that is sure of its category is not averaged away by vague ones
        if POOL == "geometric":
            logp = w @ np.log(np.clip(p, 1e-9, None))
            mean = np.exp(logp - logp.max())
            mean = mean / mean.sum()
        else:
            mean = w @ p
        probs = {k: 0.0 for k in CATEGORIES}
        for k, v in zip(model.classes_, mean, strict=True):
            probs[k] = float(v)
    if neighbours and KNN_WEIGHT > 0:
        probs = {k: (1.0 - KNN_WEIGHT) * v + KNN_WEIGHT * neighbours.get(k, 0.0) for k, v in probs.items()}
    # a category the classifier never saw still gets a small share, never exactly zero
    probs = {k: max(v, 1e-4) for k, v in probs.items()}
    if match_scores:
        probs = {k: v * float(np.exp(MATCH_GAMMA * match_scores.get(k, 0.0))) for k, v in probs.items()}
    if CONFIDENCE_TEMPERATURE != 1.0:  # calibration only: the order never changes
        top = max(probs.values())
        probs = {k: (v / top) ** (1.0 / CONFIDENCE_TEMPERATURE) for k, v in probs.items()}
    total = sum(probs.values())
    ranked = sorted(CATEGORIES, key=lambda k: (-probs[k], CATEGORIES.index(k)))
    # never exactly 0 or 1 once rounded: no category is certain from log lines alone
    return [{"category": k, "confidence": round(min(max(probs[k] / total, 1e-4), 0.9999), 4)}
            for k in ranked]


def fingerprint(state: Sequence[tuple], model_name: str) -> str:
    """Hash of what a model is trained on: library rows, confirmations, model, settings."""
    h = hashlib.sha256()
    h.update(json.dumps([VERSION, model_name, C, CODE_WEIGHT, CONFIRMED_WEIGHT, WHOLE_SAMPLE_WEIGHT,
                         DESCRIPTION_WEIGHT, EXEMPLAR_WEIGHT, LEXICAL_WEIGHT, PATTERN_WEIGHT, CUES], default=str).encode())
    for row in state:
        h.update(json.dumps(row, default=str, sort_keys=True).encode())
    return h.hexdigest()


def format_category(categories: Sequence[dict] | None) -> str | None:
    """'category: hardware (0.81)' for a report's ``categories``, or None without one."""
    if not categories:
        return None
    top = categories[0]
    try:
        return f"category: {top['category']} ({float(top['confidence']):.2f})"
    except (KeyError, TypeError, ValueError):
        return None
