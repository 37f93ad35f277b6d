"""Real data from its public sources: the tasks' manifests, the data store, downloads and views.

Each task declares the public files its dataset loaders read in ``api/data_manifest.yaml``
(:mod:`~openpert.data.manifest`); ``openpert data fetch`` fills the store from the pinned origins
or a mirror, verifying every checksum (:mod:`~openpert.data.fetching`, :mod:`~openpert.data.transfer`);
the engines give each dataset job a read-only view of its task's files (:mod:`~openpert.data.store`).
See ``docs/data.md``.
"""
