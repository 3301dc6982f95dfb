"""Moved to `diskio.messages` (0.2.0). This alias warns and goes in the next release."""
import sys
import warnings

import diskio.messages

warnings.warn("envs.messages moved to diskio.messages; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = diskio.messages
