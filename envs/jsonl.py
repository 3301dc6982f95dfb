"""Moved to `core.jsonl` (0.2.0). This alias warns and goes in the next release."""
import sys
import warnings

import core.jsonl

warnings.warn("envs.jsonl moved to core.jsonl; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = core.jsonl
