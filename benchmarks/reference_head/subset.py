"""Write the HEAD (e3f0224) fixture subset that the default tests use.

    python benchmarks/reference_head/subset.py SRC DST

SRC is the full HEAD fixture set (its README says how HEAD produced it). For the three
perturbed families (vector, image + vector, continuous with
the 0.5 * stddev sample) it copies the config yaml and the start parameters as they are
and the loss file with only the arrays `dreamerjax parity` compares (the batch, the loss
terms, metrics, outputs, carries and the intermediates listed in KEEP; not the 1.5 MB image
decoder prediction, which loss/image and met/loss/image cover); the arrays are
bit-identical to SRC's. The update files (13-16 MB each) stay in SRC.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np

FAMILIES = ("_pert", "_image_pert", "_cont_pert_eps")
KEEP = re.compile(
    r"^(data/|ctx/carry/|loss/|met/|outs/|carry_out/|entries/|state_after/retnorm/|"
    r"diag/imagine/feat/|diag/imag/(act/action|rew|con|val|slowval|weight|ret|adv|logpi|"
    r"ent/action)$|diag/repl/(boot|ret)$|diag/dec/vector/|diag/head/pol1/action/)")


def main(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for fam in FAMILIES:
        start = fam.removesuffix("_eps")
        shutil.copyfile(src / f"head_config{fam}_s0.yaml", dst / f"head_config{fam}_s0.yaml")
        shutil.copyfile(src / f"head_params_start{start}_s0.npz",
                        dst / f"head_params_start{start}_s0.npz")
        with np.load(src / f"head_loss{fam}_s0.npz") as d:
            kept = {k: d[k] for k in d.files if KEEP.match(k)}
        np.savez_compressed(dst / f"head_loss{fam}_s0.npz", **kept)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
