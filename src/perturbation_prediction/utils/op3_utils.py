"""Helpers shared by the components of the perturbation_prediction task.

Components list this file in their ``resources`` (``path: /src/perturbation_prediction/utils/op3_utils.py``)
and import it with ``sys.path.append(meta["resources_dir"])``, as Open Problems' task repositories
share their helper functions.

- Reading a layer of ``de_train``/``de_test`` with a clear error, and writing a prediction.
- Target encodings of the competition's top solutions (Szałata et al. 2024, §4.1 and appendix E.1):
  the mean response of a row's compound (over its other cell types), of its cell type (over other
  compounds) and of its compound in each other cell type, leave-one-out or out-of-fold for
  training rows so that a row never encodes its own value.
- A truncated SVD of the targets, so that models predict a few components instead of thousands of
  genes.
- The row-wise metrics (RMSE, MAE, Pearson, Spearman, cosine) and the score file.
- A small multi-output MLP trainer (torch is imported only when it is used).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd


# --- reading and writing ---------------------------------------------------------------------------
def read_de(path: str, layer: str) -> tuple[ad.AnnData, np.ndarray]:
    """A DE file and one of its layers as a dense float matrix; a missing layer names the file."""
    adata = ad.read_h5ad(path)
    if layer not in adata.layers:
        raise ValueError(f"{path}: no layer {layer!r}; layers are {sorted(adata.layers)}")
    values = np.asarray(adata.layers[layer], dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{path}: layer {layer!r} has {int((~np.isfinite(values)).sum())} non-finite values")
    return adata, values


def read_id_map(path: str) -> pd.DataFrame:
    """``id_map.csv`` with its columns checked."""
    id_map = pd.read_csv(path)
    missing = {"id", "cell_type", "sm_name"} - set(id_map.columns)
    if missing:
        raise ValueError(f"{path}: id_map lacks the columns {sorted(missing)}")
    return id_map


def write_prediction(values: np.ndarray, id_map: pd.DataFrame, genes, dataset_id: str, method_id: str, path: str) -> None:
    """Write ``layers["prediction"]`` with rows = id_map ids (in order) and columns = genes."""
    values = np.asarray(values, dtype=float)
    if values.shape != (len(id_map), len(genes)):
        raise ValueError(f"prediction has shape {values.shape}, expected {(len(id_map), len(genes))}")
    out = ad.AnnData(
        obs=pd.DataFrame(index=id_map["id"].astype(str).to_numpy()),
        var=pd.DataFrame(index=pd.Index(list(genes), dtype=str)),
        layers={"prediction": values},
        uns={"dataset_id": dataset_id, "method_id": method_id},
    )
    out.write_h5ad(Path(path), compression="gzip")


def key_of(obs: pd.DataFrame) -> pd.DataFrame:
    """The (cell_type, sm_name) columns as strings."""
    return pd.DataFrame({"cell_type": obs["cell_type"].astype(str).to_numpy(),
                         "sm_name": obs["sm_name"].astype(str).to_numpy()})


# --- target encodings ------------------------------------------------------------------------------
def group_mean(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key: (keys, sums, counts) of ``values`` (rows x features)."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros((uniq.size, values.shape[1]))
    np.add.at(sums, inverse, values)
    counts = np.bincount(inverse, minlength=uniq.size).astype(float)
    return uniq, sums, counts


def target_encode(train_keys: np.ndarray, values: np.ndarray, query_keys: np.ndarray, prior: np.ndarray,
                  smoothing: float = 0.0) -> np.ndarray:
    """Mean of ``values`` over the training rows sharing each query's key.

    Keys unseen in training get ``prior``; ``smoothing`` pulls means of small groups towards it
    (``(sum + smoothing * prior) / (count + smoothing)``).
    """
    uniq, sums, counts = group_mean(train_keys, values)
    pos = {k: i for i, k in enumerate(uniq)}
    out = np.tile(prior, (len(query_keys), 1)).astype(float)
    for r, k in enumerate(query_keys):
        i = pos.get(k)
        if i is not None:
            out[r] = (sums[i] + smoothing * prior) / (counts[i] + smoothing)
    return out


def loo_target_encode(keys: np.ndarray, values: np.ndarray, prior: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """Leave-one-out target encoding of training rows: the mean over the *other* rows of its key.

    A row alone in its key gets ``prior``.
    """
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros((uniq.size, values.shape[1]))
    np.add.at(sums, inverse, values)
    counts = np.bincount(inverse, minlength=uniq.size).astype(float)
    other_sum = sums[inverse] - values
    other_n = (counts[inverse] - 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        enc = (other_sum + smoothing * prior) / (other_n + smoothing)
    alone = other_n[:, 0] + smoothing <= 0
    enc[alone] = prior
    return enc


def out_of_fold_encode(keys: np.ndarray, values: np.ndarray, prior: np.ndarray, n_folds: int, seed: int,
                       smoothing: float = 0.0) -> np.ndarray:
    """K-fold target encoding of training rows: each fold is encoded from the other folds."""
    rng = np.random.default_rng(seed)
    fold = rng.integers(0, n_folds, len(keys))
    out = np.empty_like(values, dtype=float)
    for f in range(n_folds):
        test = fold == f
        if test.any():
            out[test] = target_encode(keys[~test], values[~test], keys[test], prior, smoothing)
    return out


def one_hot(values: np.ndarray, levels: list[str]) -> np.ndarray:
    """Indicator columns of ``values`` over ``levels`` (unknown values: all zero)."""
    pos = {lv: i for i, lv in enumerate(levels)}
    out = np.zeros((len(values), len(levels)))
    for r, v in enumerate(values):
        if v in pos:
            out[r, pos[v]] = 1.0
    return out


def svd_basis(values: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre and compress targets: returns (mean, components) with ``values ~ mean + scores @ components``."""
    mean = values.mean(axis=0)
    k = max(1, min(n_components, min(values.shape) - 1))
    _, _, vt = np.linalg.svd(values - mean, full_matrices=False)
    return mean, vt[:k]


def profile_slots(train: pd.DataFrame, scores: np.ndarray, query: pd.DataFrame, slot_cell_types: list[str],
                  own_row_masked: bool) -> np.ndarray:
    """Target encoding by (compound, cell type): a row's compound profile in each slot cell type.

    For every row and every slot cell type c, the encoded training value of (c, row's compound)
    and an indicator of whether it exists. ``own_row_masked`` hides the slot of the row's own cell
    type (for training rows: the row's own value would otherwise be a feature).
    """
    lookup = {(c, s): i for i, (c, s) in enumerate(zip(train["cell_type"], train["sm_name"]))}
    k = scores.shape[1]
    out = np.zeros((len(query), len(slot_cell_types) * (k + 1)))
    for r, (ct, sm) in enumerate(zip(query["cell_type"], query["sm_name"])):
        for j, c in enumerate(slot_cell_types):
            i = lookup.get((c, sm))
            if i is None or (own_row_masked and c == ct):
                continue
            out[r, j * (k + 1): j * (k + 1) + k] = scores[i]
            out[r, j * (k + 1) + k] = 1.0
    return out


def common_cell_types(train: pd.DataFrame, query: pd.DataFrame) -> list[str]:
    """Cell types in which every compound to predict has a training row (T and NK cells in OP3)."""
    compounds = set(query["sm_name"])
    have = train.groupby("cell_type")["sm_name"].agg(lambda s: compounds <= set(s))
    return sorted(have[have].index)


def encoding_features(train: pd.DataFrame, query: pd.DataFrame, scores: np.ndarray, *, mode: str = "loo",
                      n_folds: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features of the competition's target encoders, for training and query rows.

    Each row gets: one-hot cell type; the compound's mean response over its other rows; the cell
    type's mean response over its other rows; and the compound's response in each of the cell types
    observed for every query compound (:func:`profile_slots`). Responses are given in a compressed
    space (``scores``, e.g. SVD scores of the targets). Training rows never see their own value:
    their compound and cell-type means are leave-one-out (``mode="loo"``) or out-of-fold
    (``mode="oof"``), and the slot of their own cell type is hidden.

    Returns
    -------
    (train features, query features)
    """
    cell_types = sorted(set(train["cell_type"]) | set(query["cell_type"]))
    prior = np.zeros(scores.shape[1])
    tk_c, qk_c = train["sm_name"].to_numpy(), query["sm_name"].to_numpy()
    tk_t, qk_t = train["cell_type"].to_numpy(), query["cell_type"].to_numpy()
    if mode == "loo":
        tr_c, tr_t = loo_target_encode(tk_c, scores, prior), loo_target_encode(tk_t, scores, prior)
    elif mode == "oof":
        tr_c = out_of_fold_encode(tk_c, scores, prior, n_folds, seed)
        tr_t = out_of_fold_encode(tk_t, scores, prior, n_folds, seed + 1)
    else:
        raise ValueError(f"encoding mode {mode!r}: expected 'loo' or 'oof'")
    q_c, q_t = target_encode(tk_c, scores, qk_c, prior), target_encode(tk_t, scores, qk_t, prior)
    slots = common_cell_types(train, query)
    x_train = np.hstack([one_hot(tk_t, cell_types), tr_c, tr_t, profile_slots(train, scores, train, slots, True)])
    x_query = np.hstack([one_hot(qk_t, cell_types), q_c, q_t, profile_slots(train, scores, query, slots, False)])
    return x_train, x_query


@dataclasses.dataclass
class EncodedProblem:
    """What the neural methods share: leave-one-out encoded features and SVD targets of ``de_train``."""

    de_train: ad.AnnData
    id_map: pd.DataFrame
    train: pd.DataFrame
    x_train: np.ndarray
    x_query: np.ndarray
    mean: np.ndarray
    basis: np.ndarray
    targets: np.ndarray

    def to_genes(self, components: np.ndarray) -> np.ndarray:
        """Predicted target components mapped back to genes."""
        return self.mean + components @ self.basis


def encoded_problem(de_train_path: str, layer: str, id_map_path: str, n_components: int, n_targets: int) -> EncodedProblem:
    """Read ``de_train`` and ``id_map``; encode (cell type, compound) on ``n_components`` SVD scores and
    express the training rows on their ``n_targets`` leading SVD components (the networks' targets)."""
    de_train, y = read_de(de_train_path, layer)
    id_map = read_id_map(id_map_path)
    train, query = key_of(de_train.obs), key_of(id_map)
    mean, comps = svd_basis(y, n_components)
    x_tr, x_q = encoding_features(train, query, (y - mean) @ comps.T, mode="loo")
    _, basis = svd_basis(y, n_targets)
    return EncodedProblem(de_train=de_train, id_map=id_map, train=train, x_train=x_tr, x_query=x_q, mean=mean,
                          basis=basis, targets=(y - mean) @ basis.T)


# --- metrics ---------------------------------------------------------------------------------------
def aligned_truth_prediction(de_test_path: str, layer: str, prediction_path: str
                             ) -> tuple[ad.AnnData, ad.AnnData, np.ndarray, np.ndarray]:
    """True and predicted matrices over the genes of de_test, rows in de_test (= id_map) order.

    The prediction's rows are the id_map ids 0..n-1; genes are aligned by name. A prediction that
    lacks genes of de_test, has other rows, or non-finite values is an error naming the file.
    """
    de_test, truth = read_de(de_test_path, layer)
    pred = ad.read_h5ad(prediction_path)
    if "prediction" not in pred.layers:
        raise ValueError(f"{prediction_path}: no layer 'prediction'")
    missing = de_test.var_names.difference(pred.var_names)
    if len(missing):
        raise ValueError(f"{prediction_path}: lacks {len(missing)} genes of de_test, e.g. {list(missing[:3])}")
    try:
        ids = pred.obs_names.astype(int)
    except (TypeError, ValueError):
        raise ValueError(f"{prediction_path}: row names must be the integer ids of id_map") from None
    if sorted(ids) != list(range(de_test.n_obs)):
        raise ValueError(f"{prediction_path}: has {pred.n_obs} rows with ids {list(ids[:3])}...; "
                         f"expected the {de_test.n_obs} ids 0..{de_test.n_obs - 1} of id_map")
    values = np.asarray(pred.layers["prediction"], dtype=float)
    values = values[np.argsort(ids)][:, pred.var_names.get_indexer(de_test.var_names)]
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{prediction_path}: {int((~np.isfinite(values)).sum())} non-finite predicted values")
    return de_test, pred, truth, values


def rowwise_errors(truth: np.ndarray, pred: np.ndarray) -> pd.DataFrame:
    """Per-row RMSE and MAE (Szałata et al. 2024, equation 2)."""
    diff = pred - truth
    return pd.DataFrame({"mean_rowwise_rmse": np.sqrt(np.mean(diff**2, axis=1)),
                         "mean_rowwise_mae": np.mean(np.abs(diff), axis=1)})


def _rowwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def rowwise_correlations(truth: np.ndarray, pred: np.ndarray) -> pd.DataFrame:
    """Per-row Pearson, Spearman (ranks with ties averaged) and cosine similarity.

    Undefined values (a constant or all-zero row) count as 0, as Open Problems scores them.
    """
    from scipy.stats import rankdata

    def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _rowwise_cosine(a - a.mean(axis=1, keepdims=True), b - b.mean(axis=1, keepdims=True))

    scores = {
        "mean_rowwise_pearson": pearson(truth, pred),
        "mean_rowwise_spearman": pearson(rankdata(truth, axis=1), rankdata(pred, axis=1)),
        "mean_rowwise_cosine": _rowwise_cosine(truth, pred),
    }
    return pd.DataFrame({k: np.where(np.isfinite(v), v, 0.0) for k, v in scores.items()})


def score_adata(per_row: pd.DataFrame, de_test: ad.AnnData, pred: ad.AnnData) -> ad.AnnData:
    """A score file: means in uns, per-row values in obs (index: row ids)."""
    per_row = per_row.copy()
    per_row.index = [str(i) for i in range(len(per_row))]
    return ad.AnnData(obs=per_row, uns={
        "dataset_id": str(de_test.uns.get("dataset_id", "")),
        "method_id": str(pred.uns.get("method_id", "")),
        "metric_ids": list(per_row.columns),
        "metric_values": [float(per_row[c].mean()) for c in per_row.columns],
    })


# --- neural networks -------------------------------------------------------------------------------
def train_mlp(x: np.ndarray, y: np.ndarray, *, hidden: int = 512, layers: int = 2, dropout: float = 0.2,
              epochs: int = 200, lr: float = 1e-3, weight_decay: float = 1e-4, batch_size: int = 64,
              sample_weight: np.ndarray | None = None, seed: int = 0, threads: int | None = None):
    """Train a multi-output MLP (ReLU, dropout) with Adam on the mean squared error.

    Returns a function mapping features to predictions. Features are standardised with the
    training mean and scale inside the returned function.
    """
    import torch

    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(int(threads))
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    xt = torch.tensor((x - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    wt = torch.tensor(np.ones(len(x)) if sample_weight is None else sample_weight, dtype=torch.float32)
    blocks: list = []
    width = x.shape[1]
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        width = hidden
    blocks.append(torch.nn.Linear(width, y.shape[1]))
    net = torch.nn.Sequential(*blocks)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        net.train()
        for idx in torch.randperm(len(xt), generator=gen).split(batch_size):
            opt.zero_grad()
            loss = (((net(xt[idx]) - yt[idx]) ** 2).mean(dim=1) * wt[idx]).sum() / wt[idx].sum()
            loss.backward()
            opt.step()
    net.eval()

    def predict(xq: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.tensor((xq - mu) / sd, dtype=torch.float32)).numpy().astype(float)

    return predict
