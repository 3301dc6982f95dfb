"""Moved to `core.messages` (0.2.0). This alias warns and goes in the next release."""
import sys
import warnings

import core.messages

warnings.warn("envs.messages moved to core.messages; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = core.messages
