"""`--dataset_name` as `trl grpo` takes it: a hub data set, or a local file or folder, loaded through `datasets`.

A local `.jsonl`/`.json`/`.csv`/`.parquet` file is read by `datasets`' builder for its format and named the split
asked for (`--dataset_train_split`, `train` by default), so one file serves any split name. A folder written by
`Dataset.save_to_disk` is loaded from disk (a `DatasetDict`'s split by name); any other folder or name goes to
`datasets.load_dataset(name, config, split=...)` (the hub, or a folder of data files). Every failure is one
ValueError or FileNotFoundError line naming the data set and the split.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from lmgym.core.messages import one_line

# a local file's suffix -> the `datasets` builder that reads it
FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


def looks_like_path(name: str) -> bool:
    """A name meant as a local file or folder: a data file suffix, a path separator first, or `.`/`~` first."""
    return Path(name).suffix.lower() in FILE_BUILDERS or name.startswith(("/", ".", "~"))


def load_data(name: str, config: str | None = None, split: str = "train") -> Any:
    """The `split` of data set `name` (see the module doc) as a `datasets.Dataset`."""
    path = Path(name).expanduser()
    builder = FILE_BUILDERS.get(path.suffix.lower())
    missing = not path.is_file() if builder is not None else looks_like_path(name) and not path.exists()
    if missing:
        raise FileNotFoundError(f"--dataset_name {name}: no such file or folder")
    import datasets

    what = f"data set {name!r} (split {split!r}{f', config {config!r}' if config else ''})"
    try:
        if builder is not None and path.is_file():
            return datasets.load_dataset(builder, data_files={split: str(path)}, split=split)
        if path.is_dir() and any((path / f).is_file() for f in ("dataset_info.json", "dataset_dict.json")):
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise ValueError(f"no split {split!r}; it has {', '.join(loaded)}")
                return loaded[split]
            return loaded
        return datasets.load_dataset(name, config, split=split)
    except Exception as err:  # network, offline mode, a missing split or config, an unreadable file ...
        reason = one_line(str(err))[:300] or type(err).__name__
        raise ValueError(f"could not load {what}: {reason}") from None
