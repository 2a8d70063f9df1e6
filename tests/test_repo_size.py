"""The repository travels: its tracked files (tests/data's reference arrays included) stay
within LIMIT bytes. Reads `git ls-files`; skips outside a git checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 40 * 2**20  # 40 MiB


def tracked_sizes(root: Path) -> dict[str, int] | None:
    """{path: bytes} of every tracked file present in the work tree; None outside git."""
    if shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                          check=False)
    if proc.returncode != 0:
        return None
    names = [n for n in proc.stdout.decode().split("\0") if n]
    return {n: (root / n).stat().st_size for n in names if (root / n).is_file()}


def test_tracked_tree_is_at_most_40_mib():
    sizes = tracked_sizes(ROOT)
    if not sizes:
        pytest.skip("not a git checkout")
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:10]
    listing = ", ".join(f"{name} ({size / 1e6:.1f} MB)" for name, size in largest)
    assert total <= LIMIT, (f"tracked files hold {total:,} bytes, above {LIMIT:,} (40 MiB); "
                            f"largest: {listing}")


def test_tracked_sizes_counts_files(tmp_path):
    """The sum is over tracked files only (an untracked file does not count)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.bin").write_bytes(b"x" * 1000)
    (tmp_path / "b.bin").write_bytes(b"y" * 10)
    subprocess.run([*git, "add", "a.bin"], check=True)
    assert tracked_sizes(tmp_path) == {"a.bin": 1000}
