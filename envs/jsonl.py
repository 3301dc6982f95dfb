"""Moved to `diskio.jsonl` (0.2.0). This alias warns and goes in the next release."""
import sys
import warnings

import diskio.jsonl

warnings.warn("envs.jsonl moved to diskio.jsonl; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = diskio.jsonl
