"""Multi-output MLPs for the neural methods: the encoded problem they share, and their training.

The networks of the competition's neural solutions (Szałata et al. 2024, §4.1 and appendix E.1)
map target-encoded rows to the targets' leading SVD components, mapped back to every gene.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from perturbation_prediction_lib.svd_compression import svd_basis
from perturbation_prediction_lib.target_encoding import loo_encoding_features


@dataclasses.dataclass
class EncodedProblem:
    """Leave-one-out encoded features of the training and query rows, and the SVD targets of the training rows.

    Attributes
    ----------
    x_train, x_query
        Features of the training rows and of the rows to predict.
    mean, basis
        The targets' column means and leading SVD components (components x genes).
    targets
        The training rows' scores on ``basis``: what the networks predict.
    """

    x_train: np.ndarray
    x_query: np.ndarray
    mean: np.ndarray
    basis: np.ndarray
    targets: np.ndarray

    def to_genes(self, components: np.ndarray) -> np.ndarray:
        """Predicted target components (rows x components) mapped back to genes."""
        return self.mean + components @ self.basis


def encoded_problem(values: np.ndarray, train: pd.DataFrame, query: pd.DataFrame, *, n_components: int,
                    n_targets: int) -> EncodedProblem:
    """The problem the neural methods solve, built from the training rows' values.

    Rows are encoded leave-one-out (:func:`~perturbation_prediction_lib.target_encoding.loo_encoding_features`)
    on their scores on the ``n_components`` leading SVD components; the targets are the training
    rows' scores on the ``n_targets`` leading components.

    Parameters
    ----------
    values
        Training rows x genes.
    train, query
        ``cell_type``, ``sm_name`` of the training rows and of the rows to predict.
    n_components
        SVD components of the encodings.
    n_targets
        SVD components of the targets.

    Returns
    -------
    EncodedProblem
    """
    mean, comps = svd_basis(values, n_components)
    x_train, x_query = loo_encoding_features(train, query, (values - mean) @ comps.T)
    _, basis = svd_basis(values, n_targets)
    return EncodedProblem(x_train=x_train, x_query=x_query, mean=mean, basis=basis, targets=(values - mean) @ basis.T)


def train_mlp(x: np.ndarray, y: np.ndarray, *, hidden: int = 512, layers: int = 2, dropout: float = 0.2,
              epochs: int = 200, lr: float = 1e-3, weight_decay: float = 1e-4, batch_size: int = 64,
              sample_weight: np.ndarray | None = None, seed: int = 0, threads: int | None = None
              ) -> Callable[[np.ndarray], np.ndarray]:
    """Train a multi-output MLP (ReLU, dropout) with Adam on the (weighted) mean squared error.

    Parameters
    ----------
    x
        Rows x features; standardised with their mean and scale inside the network's function.
    y
        Rows x outputs.
    hidden, layers, dropout
        Width and number of the hidden layers, dropout after each.
    epochs, lr, weight_decay, batch_size
        Adam's schedule: epochs over shuffled mini-batches.
    sample_weight
        Weight of each row in the loss (default: all 1).
    seed
        Seed of the initial weights, the batches and the dropout.
    threads
        Torch's CPU threads (default: torch's choice).

    Returns
    -------
    callable
        Maps features (rows x features) to predictions (rows x outputs).
    """
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
