"""Where each page and download of a task lives in the site.

Ids from ``results.json`` become file names here, so they are reduced to a safe character set;
ids that collide after that get a numeric suffix, in file order, so the mapping is stable.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from openpert.report.task_results import TaskResults, is_control

#: Folder (inside a task's folder) of each kind of component page.
METHODS_DIR = "methods"
CONTROLS_DIR = "control_methods"
#: Folder of the datasets' own pages (a task page too heavy to hold every dataset's section).
DATASETS_DIR = "datasets"
METRICS_DIR = "metrics"


def slugify(text: Any) -> str:
    """Reduce text to a file-name-safe slug (letters, digits, ``.``, ``_``, ``-``).

    Parameters
    ----------
    text
        An id or name.

    Returns
    -------
    str
        The slug; ``"item"`` when nothing safe is left.
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")
    return slug or "item"


def unique_slugs(names: Iterable[Any], taken: Iterable[str] = ()) -> list[str]:
    """Slugify names, appending ``-2``, ``-3``... to the later of any that collide.

    Parameters
    ----------
    names
        Names in a stable order.
    taken
        Slugs already in use (compared case-insensitively, for case-insensitive file systems).

    Returns
    -------
    list of str
        One unique slug per name.
    """
    used = {t.lower() for t in taken}
    out = []
    for name in names:
        base = slugify(name)
        slug, n = base, 2
        while slug.lower() in used:
            slug, n = f"{base}-{n}", n + 1
        used.add(slug.lower())
        out.append(slug)
    return out


class TaskPaths:
    """Paths of a task's pages and files, relative to the task's folder in the site.

    Parameters
    ----------
    results
        The task's results.
    slug
        The task's folder name in the site.
    """

    def __init__(self, results: TaskResults, slug: str) -> None:
        self.slug = slug
        #: What leads from the page being written back to the task's folder ("" on the task page).
        self.prefix = ""
        self._components: dict[tuple[str, str], str] = {}
        for folder, entries in ((METHODS_DIR, [m for m in results.all_methods if not is_control(m)]),
                                (CONTROLS_DIR, [m for m in results.all_methods if is_control(m)]), (METRICS_DIR, results.metrics)):
            ids = [str(e.get("id")) for e in entries]
            for cid, slug_ in zip(ids, unique_slugs(ids)):
                self._components.setdefault((folder, cid), f"{folder}/{slug_}.html")
        dataset_ids = [str(d.get("dataset_id")) for d in results.datasets]
        # Dataset slugs name tables ("table-<slug>") next to the page's fixed ones.
        fixed = ["overall", "failures", "qc", "llm-usage", "resources", "parameters", "scores"]
        self._datasets = dict(zip(dataset_ids, unique_slugs(dataset_ids, taken=fixed)))
        keys = [key for key, _ in results.statistics]
        self._statistics = dict(zip(keys, unique_slugs(keys)))

    def method_page(self, method: dict[str, Any]) -> str:
        """Page of a method or control method, e.g. ``methods/mlp.html``."""
        folder = CONTROLS_DIR if is_control(method) else METHODS_DIR
        return self.prefix + self._components[(folder, str(method.get("id")))]

    def metric_page(self, metric_id: Any) -> str:
        """Page of a metric, e.g. ``metrics/macro_auroc.html``."""
        return self.prefix + self._components[(METRICS_DIR, str(metric_id))]

    def dataset_page(self, dataset_id: Any) -> str:
        """The page of a dataset's section when the task page lists datasets instead, e.g. ``datasets/norman.html``."""
        return f"{self.prefix}{DATASETS_DIR}/{self.dataset_slug(dataset_id)}.html"

    def section_page(self, section_id: str) -> str:
        """The page of a task page's section moved to a page of its own, e.g. ``resources.html``.

        Section ids are the page's own fixed ids and slugs (``stat-<slug>``), so they are safe file names
        and never ``index``.
        """
        return f"{self.prefix}{slugify(section_id)}.html"

    def below(self, folder: str) -> TaskPaths:
        """The same paths as seen from a page one folder down (``datasets/``): each leads back up first.

        Parameters
        ----------
        folder
            The folder the page is in, inside the task's folder.

        Returns
        -------
        TaskPaths
            A copy whose paths start with ``../``.
        """
        if "/" in folder.strip("/"):
            raise ValueError(f"{folder!r}: only pages one folder below the task's are supported")
        other = copy.copy(self)
        other.prefix = self.prefix + "../"
        return other

    def dataset_slug(self, dataset_id: Any) -> str:
        """The slug of a dataset, used in anchors and CSV names."""
        return self._datasets.get(str(dataset_id), slugify(dataset_id))

    def dataset_anchor(self, dataset_id: Any) -> str:
        """The in-page anchor of a dataset's section."""
        return f"dataset-{self.dataset_slug(dataset_id)}"

    def overall_csv(self) -> str:
        """The overall leaderboard's CSV."""
        return self.prefix + "leaderboard_overall.csv"

    def dataset_csv(self, dataset_id: Any) -> str:
        """A dataset leaderboard's CSV."""
        return f"{self.prefix}leaderboard_{self.dataset_slug(dataset_id)}.csv"

    def statistic_slug(self, key: Any) -> str:
        """The slug of a task-specific statistic, used in anchors and CSV names."""
        return self._statistics.get(str(key), slugify(key))

    def statistic_csv(self, key: Any) -> str:
        """A task-specific statistic's table as CSV."""
        return f"{self.prefix}statistic_{self.statistic_slug(key)}.csv"
