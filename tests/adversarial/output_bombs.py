"""Hostile outputs that are small on disk and huge once read: the attacks of ``test_hostile_outputs.py``.

Each attack is the body of a hostile method (appended to :data:`adversarial.hostile.SCRIPT_HEAD`,
which writes a valid prediction with ``submit``) or, for the parquet bomb, a hostile dataset loader.
Every one is cheap to make (a fill value, one compressed chunk written many times, a sparse hole)
and costs gigabytes to whoever reads it naively. ``benchmarks/hostile_outputs.py`` runs the same
attacks to measure the harness's peak memory; the sizes are parameters so that the benchmark can
reproduce the issue's figures while the tests stay light.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from adversarial.hostile import add_method

#: A layer declared as n_obs x width float64, with a fill value and no chunk written (the issue's attack).
HUGE_LAYER = '''
import h5py
submit(np.zeros(test.shape))
with h5py.File(par["output"], "r+") as fh:
    layer = fh["layers"].create_dataset("extra", shape=(test.shape[0], {width}), dtype="f8", chunks=(1, 1 << 16),
                                        fillvalue=0.5)
    layer.attrs["encoding-type"], layer.attrs["encoding-version"] = "array", "0.2.0"
'''
#: An obsm matrix of gzip-compressed zeros: one compressed chunk written for every chunk of the matrix.
COMPRESSED_BOMB = '''
import zlib
import h5py
submit(np.zeros(test.shape))
columns = 1 << 16
block = zlib.compress(bytes(test.shape[0] * columns * 8), 9)
with h5py.File(par["output"], "r+") as fh:
    bomb = fh["obsm"].create_dataset("bomb", shape=(test.shape[0], {width}), dtype="f8", chunks=(test.shape[0], columns),
                                     compression="gzip")
    bomb.attrs["encoding-type"], bomb.attrs["encoding-version"] = "array", "0.2.0"
    for start in range(0, {width}, columns):
        bomb.id.write_direct_chunk((0, start), block)
'''
#: An obs index of tens of millions of names (a 10 KB cycle of names, so that deflate packs it small).
HUGE_INDEX = '''
import zlib
import h5py
submit(np.zeros(test.shape))
per_chunk = 1 << 16
names = np.array([f"row{{i:07d}}".encode() for i in range(1024)], dtype="S10")
block = zlib.compress(np.tile(names, per_chunk // 1024).tobytes(), 9)
with h5py.File(par["output"], "r+") as fh:
    del fh["obs/_index"]
    index = fh["obs"].create_dataset("_index", shape=({names},), dtype="S10", chunks=(per_chunk,), compression="gzip")
    index.attrs["encoding-type"], index.attrs["encoding-version"] = "string-array", "0.2.0"
    for start in range(0, {names}, per_chunk):
        index.id.write_direct_chunk((start,), block)
'''
#: A log of gigabytes: the job's stdout is its log, extended by a sparse hole, then a last line; exit 3.
HUGE_LOG = '''
submit(np.zeros(test.shape))
print("hostile: making the log huge", flush=True)
os.ftruncate(1, {size})
os.lseek(1, 0, os.SEEK_END)
os.write(1, b"\\nhostile: the last line of a huge log\\n")
sys.exit(3)
'''
#: Appended to the fixture's synthetic loader: an extra parquet output of one int64 column, every
#: value the same, written as row groups of 4M rows (dictionary + run-length encoded: a few kB each).
PARQUET_BOMB = '''
import pyarrow as pa
import pyarrow.parquet as pq
group = pa.table({{"value": pa.array(np.zeros(1 << 22, dtype=np.int64))}})
with pq.ParquetWriter(par["output_extra"], group.schema, compression="zstd") as writer:
    for _ in range({groups}):
        writer.write_table(group)
'''
EXTRA_FORMAT = """\
type: file
example: resources_test/tiny/syn/extra.parquet
label: Extra table
summary: A table a loader writes beside the dataset.
info:
  format:
    type: parquet
    columns:
      - {name: value, type: integer}
"""
EXTRA_ARGUMENT = """\
arguments:
  - name: --output_extra
    __merge__: ../../api/file_extra.yaml
    required: true
    direction: output
"""


def add_output_bombs(root: Path, *, layer_width: int, bomb_width: int, index_names: int, log_bytes: int) -> list[str]:
    """Add the hostile methods of this module to a project copy; return their names.

    Parameters
    ----------
    root
        A private copy of the fixture project (:func:`adversarial.hostile.copy_project`).
    layer_width
        Columns of the declared-only layer (``huge_layer``: 12 rows x width float64).
    bomb_width
        Columns of the compressed obsm matrix of zeros (``compressed_bomb``).
    index_names
        Names in the obs index of ``huge_index``.
    log_bytes
        Size of the log of ``huge_log`` (sparse: no disk).
    """
    bodies = {
        "huge_layer": HUGE_LAYER.format(width=layer_width),
        "compressed_bomb": COMPRESSED_BOMB.format(width=bomb_width),
        "huge_index": HUGE_INDEX.format(names=index_names),
        "huge_log": HUGE_LOG.format(size=log_bytes),
    }
    for name, body in bodies.items():
        add_method(root, name, body)
    return list(bodies)


def add_parquet_loader(root: Path, *, groups: int, dataset_id: str = "bomb") -> str:
    """Add ``parquet_bomb``, the fixture's synthetic loader plus a parquet bomb of ``groups`` x 4M rows.

    Its train, test and solution files are honest; its ``--output_extra`` (format ``file_extra``, added
    to the task's API here) holds ``groups * 2**22`` rows of one int64 value. Returns its name.
    """
    api = root / "src" / "tiny" / "api"
    (api / "file_extra.yaml").write_text(EXTRA_FORMAT)
    source = root / "src" / "tiny" / "datasets" / "synthetic"
    dest = root / "src" / "tiny" / "datasets" / "parquet_bomb"
    shutil.copytree(source, dest)
    config = (source / "config.vsh.yaml").read_text()
    config = config.replace("name: synthetic", "name: parquet_bomb")
    config = config.replace("    - {id: syn_a, seed: 1}\n    - {id: syn_b, seed: 2}", f"    - {{id: {dataset_id}, seed: 3}}")
    config = config.replace("arguments:\n", EXTRA_ARGUMENT, 1)
    assert f"id: {dataset_id}" in config and "output_extra" in config, config
    (dest / "config.vsh.yaml").write_text(config)
    (dest / "script.py").write_text((source / "script.py").read_text() + PARQUET_BOMB.format(groups=groups))
    return "parquet_bomb"
