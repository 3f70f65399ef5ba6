"""The registered policies, one module each; importing this package registers them."""
from . import ideal, odswap, swapadvisor, reference  # noqa: F401  (each registers itself)
from . import window  # noqa: F401
from . import lms, tflms  # noqa: F401
from . import smartswap  # noqa: F401
from . import capuchin, checkpoint  # noqa: F401
from . import full_recompute  # noqa: F401
